#!/usr/bin/env bash
# Device call 9 (session 45): clusters of four only while the grid's CTAs fit one an SM. GPU tests of
# the scatter kernel, then the fp16 first table (120 rows) on the shipped database.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_spmm_scatter.py --tb=short 2>&1 | tee $OUT/pytest.txt | tail -3
timeout 200 stuning bench --suite first-table --ops spmm --dtypes fp16 --configs auto --out /tmp/bf > /tmp/bf.log 2>&1
echo "bench rc $?"; cp /tmp/bf/results.csv $OUT/first-fp16.csv; cp /tmp/bf/summary.md $OUT/first-fp16.md
grep "| spmm | fp16 |" /tmp/bf/summary.md
