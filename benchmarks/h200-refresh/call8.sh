#!/usr/bin/env bash
# Device call 8 (session 46): the fp32 first table at N = 2048, 90-98% zeros tuned (no entries: call 7
# ran them on the cost model's picks after the refit, 0.93x call 5's time); then the whole fp32 SpMM
# first table at 80-98% on the result.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 400 stuning tune --op spmm --shape 768x3072,3072x768,4096x4096,4096x11008,11008x4096 --n 2048 \
  --sparsity 0.9,0.95,0.98 --skew 0,0.4 --dtype fp32 --seconds 5 --json > $OUT/tune-fp32-n2048.json 2> $OUT/tune-n2048.log
echo "tune rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 120 stuning bench --suite first-table --ops spmm --dtypes fp32 --sparsities 80,90,95,98 --configs auto \
  --out /tmp/b32 > /tmp/b32.log 2>&1
echo "bench rc $?"; cp /tmp/b32/results.csv $OUT/spmm-fp32.csv; cp /tmp/b32/summary.md $OUT/spmm-fp32.md
grep "| spmm | fp32 |" /tmp/b32/summary.md
