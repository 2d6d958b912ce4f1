#!/usr/bin/env bash
# Device call 6 (session 46): the fp32 first table's N = 16 rows had no entries, and the cost model's
# picks for them ran 1.25x slower than in 7p (call 5). Tune them (5 shapes x 80-98% x two skews), then
# the fp32 SpMM rows at N = 16 on the result.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 360 stuning tune --op spmm --shape 768x3072,3072x768,4096x4096,4096x11008,11008x4096 --n 16 \
  --sparsity 0.8,0.9,0.95,0.98 --skew 0,0.4 --dtype fp32 --seconds 5 --json > $OUT/tune-fp32-n16.json 2> $OUT/tune.log
echo "tune rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 100 stuning bench --suite first-table --ops spmm --dtypes fp32 --ns 16 --sparsities 80,90,95,98 --configs auto \
  --out /tmp/b32 > /tmp/b32.log 2>&1
echo "bench rc $?"; cp /tmp/b32/results.csv $OUT/spmm-fp32-n16.csv
grep "| spmm | fp32 |" /tmp/b32/summary.md
