#!/usr/bin/env bash
# Device call 7 (session 46): the rest of the fp32 first table tuned: 11008 x 4096 at N = 16 (call 6's
# time limit) and every shape at N = 128, 90-98% zeros (no entries: cost-model picks); then the
# whole fp32 SpMM first table at 80-98% on the result.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 80 stuning tune --op spmm --shape 11008x4096 --n 16 --sparsity 0.9,0.95,0.98 --skew 0,0.4 --dtype fp32 \
  --seconds 5 --json > $OUT/tune-fp32-n16.json 2> $OUT/tune-n16.log
echo "tune n16 rc $?"
timeout 330 stuning tune --op spmm --shape 768x3072,3072x768,4096x4096,4096x11008,11008x4096 --n 128 \
  --sparsity 0.9,0.95,0.98 --skew 0,0.4 --dtype fp32 --seconds 5 --json > $OUT/tune-fp32-n128.json 2> $OUT/tune-n128.log
echo "tune n128 rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 120 stuning bench --suite first-table --ops spmm --dtypes fp32 --sparsities 80,90,95,98 --configs auto \
  --out /tmp/b32 > /tmp/b32.log 2>&1
echo "bench rc $?"; cp /tmp/b32/results.csv $OUT/spmm-fp32.csv; cp /tmp/b32/summary.md $OUT/spmm-fp32.md
grep "| spmm | fp32 |" /tmp/b32/summary.md
