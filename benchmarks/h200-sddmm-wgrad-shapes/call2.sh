#!/usr/bin/env bash
# Device call 2 (session 52): the lookup on a weight gradient's layout (A = dY^T view, B = X
# row-major) and on K-contiguous operands, with the database before call 1's entries
# (scratch/db-before.json, HEAD's) and after (the working tree's); then bf16 entries for the same
# problems as call 1's.
source scripts/gpu_env.sh >/dev/null
cases=wgrad:11008:4096:256:0.95:float16,wgrad:11008:4096:256:0.98:float16,wgrad:4096:11008:256:0.95:float16,wgrad:4096:11008:256:0.98:float16,wgrad:768:3072:256:0.95:float16,wgrad:3072:768:256:0.98:float16,wgrad:11008:4096:2048:0.95:float16,wgrad:768:3072:2048:0.98:float16
for db in before after; do
  mkdir -p /tmp/db-$db $OUT/$db
  if [ $db = before ]; then cp scratch/db-before.json /tmp/db-$db/nvidia-h200.json; else cp tuning_db/nvidia-h200.json /tmp/db-$db/; fi
  STUNING_DB_DIR=/tmp/db-$db PROBE_CASES=$cases PROBE_LAYOUTS="A m, B n|A k, B k" PROBE_KERNELS=auto OUT=$OUT/$db \
    python3 scripts/probe_sddmm_layouts.py > $OUT/$db/probe.log 2>&1; echo "probe $db rc $?"
done
for db in before after; do echo "== $db"; sed -n '/^case/,$p' $OUT/$db/probe.log; done
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout ${TUNE_S:-330} python3 -m stuning tune --op sddmm --shape 11008x4096,4096x11008,3072x768,768x3072 \
  --n 256,2048 --sparsity 0.9,0.95,0.98 --dtype bf16 --layout k-strided --seconds 10 --json > $OUT/tune.json 2> $OUT/tune.err
echo "tune rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
python3 -c "
import json; d=json.load(open('$OUT/tune.json'))
for r in d['results']: print(r['problem'], round(r['time_us'],1), 'dense', round(r['dense_us'],1), r['config'].get('kernel'))
" 2>&1 | tail -30
