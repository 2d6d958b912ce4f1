#!/usr/bin/env bash
# Device call 8 (session 52): the two problems call 4's time limit left (bf16, 768 x 3072, K = 256,
# 95 / 98%, a weight gradient's layout).
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m stuning tune --op sddmm --shape 768x3072 --n 256 --sparsity 0.95,0.98 --dtype bf16 --layout k-strided \
  --seconds 10 --json > $OUT/tune.json 2> $OUT/tune.err
echo "tune rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
python3 -c "
import json; d=json.load(open('$OUT/tune.json'))
for r in d['results']: print(r['problem'], round(r['time_us'],1), 'dense', round(r['dense_us'],1), r['config'].get('kernel'))
"
