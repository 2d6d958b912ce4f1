#!/usr/bin/env bash
# Device call 4 (session 52): the no-recompile test with the tiled kernel's EVEN_M form, then the
# weight-gradient (at=1) SDDMM entries at K = 256 re-tuned now that the tiled kernel reads a
# transposed A in place (fp16 and bf16; 4096 x 4096 and the Llama-7B / BERT MLP shapes).
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k "no_recompile" --tb=short 2>&1 | tee $OUT/pytest-gpu-no-recompile.txt | tail -2
timeout ${TUNE_S:-420} python3 -m stuning tune --op sddmm --shape 4096x4096,11008x4096,4096x11008,3072x768,768x3072 \
  --n 256 --sparsity 0.9,0.95,0.98 --dtype fp16,bf16 --layout k-strided --seconds 10 --json > $OUT/tune.json 2> $OUT/tune.err
echo "tune rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
python3 -c "
import json; d=json.load(open('$OUT/tune.json'))
for r in d['results']: print(r['problem'], round(r['time_us'],1), 'dense', round(r['dense_us'],1), r['config'].get('kernel'))
" 2>&1 | tail -32
