#!/usr/bin/env bash
# Device call 4 (session 46): with the wave rule for clusters of four, the fp16 decode problems whose
# grids the rule now lets form clusters (3072 x 768, 4096 x 4096 at N = 128) re-tuned, then the fp16
# decode rows on the result.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 150 stuning tune --op spmm --shape 3072x768,4096x4096 --n 128 --sparsity 0.9,0.95 --skew 0,0.4 \
  --dtype fp16 --seconds 6 --json > $OUT/tune-fp16-n128.json 2> $OUT/tune.log
echo "tune rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 90 stuning bench --suite first-table --ops spmm --dtypes fp16 --ns 16,128 --sparsities 90,95 --skews 0,0.4 \
  --configs auto --out /tmp/bd > /tmp/bd.log 2>&1
echo "bench rc $?"; cp /tmp/bd/results.csv $OUT/decode-fp16.csv; grep "| spmm | fp16 |" /tmp/bd/summary.md
