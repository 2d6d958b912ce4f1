#!/usr/bin/env bash
# Device call 3 (session 49): both dense SDDMM sampling passes in the space. The SDDMM tests on the
# GPU; the two passes as shipped; the first table's fp16 K = 2048 weight-mask problems re-tuned
# (both passes timed); the fp16 SDDMM first table.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -p no:cacheprovider tests/test_sddmm_dense.py tests/test_sddmm.py tests/test_sddmm_tiled.py --tb=short 2>&1 | tee $OUT/pytest-sddmm.txt | tail -2
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k sddmm --tb=short 2>&1 | tee $OUT/pytest-gpu-sddmm.txt | tail -2
python3 benchmarks/h200-sddmm-row-pass/passes.py > $OUT/passes.log 2>&1; echo "passes rc $?"; tail -41 $OUT/passes.log
timeout 250 stuning tune --op sddmm --shape 768x3072,3072x768,11008x4096,4096x11008,4096x4096 --n 2048 \
  --sparsity 0.98,0.95,0.9,0.7 --dtype fp16 --mask wgrad --seconds 6 --json > $OUT/tune-wgrad.json 2> $OUT/tune-wgrad.log
echo "tune rc $?"
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 150 stuning bench --suite first-table --ops sddmm --dtypes fp16 --configs auto --out /tmp/bs > /tmp/bs.log 2>&1
echo "bench rc $?"; mkdir -p $OUT/first-sddmm-fp16; cp /tmp/bs/results.csv $OUT/first-sddmm-fp16/ 2>/dev/null
grep -E "^\| sddmm \| fp16 \|" /tmp/bs/summary.md
