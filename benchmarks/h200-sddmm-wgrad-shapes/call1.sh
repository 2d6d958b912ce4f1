#!/usr/bin/env bash
# Device call 1 (session 52): the SDDMM tests on session 51's final code (347ba6f: its review mend ran
# on the CPU only), then SDDMM entries on a weight gradient's layout (at=1) for the Llama-7B and
# BERT MLP weight shapes, fp16, K = 256 / 2048 tokens, 90-98% zeros.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -p no:cacheprovider tests/test_sddmm.py tests/test_sddmm_tiled.py tests/test_sddmm_dense.py --tb=short 2>&1 | tee $OUT/pytest-sddmm.txt | tail -2
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k "sddmm or tuner" --tb=short 2>&1 | tee $OUT/pytest-gpu-sddmm-tuner.txt | tail -2
timeout ${TUNE_S:-360} python3 -m stuning tune --op sddmm --shape ${SHAPES:-11008x4096,4096x11008,3072x768,768x3072} \
  --n 256,2048 --sparsity 0.9,0.95,0.98 --dtype fp16 --layout k-strided --seconds 10 --json > $OUT/tune.json 2> $OUT/tune.err
echo "tune rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
python3 -c "
import json; d=json.load(open('$OUT/tune.json'))
for r in d['results']: print(r['problem'], round(r['time_us'],1), 'dense', round(r['dense_us'],1), r['config'].get('kernel'))
" 2>&1 | tail -30
