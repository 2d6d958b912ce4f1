#!/usr/bin/env bash
# Device call 1 (session 46): the bf16 decode problems at N = 128 re-tuned (8v re-tuned only fp16's),
# then the bf16 decode rows and the whole bf16 first table on the result (8q's predates both clusters).
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 260 stuning tune --op spmm --shape 768x3072,3072x768,11008x4096,4096x4096,4096x11008 --n 128 \
  --sparsity 0.9,0.95 --skew 0,0.4 --dtype bf16 --seconds 6 --json > $OUT/tune-bf16-n128.json 2> $OUT/tune.log
echo "tune rc $?"; cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 200 stuning bench --suite first-table --ops spmm --dtypes bf16 --configs auto --out /tmp/bf > /tmp/bf.log 2>&1
echo "bench rc $?"; cp /tmp/bf/results.csv $OUT/first-bf16.csv; cp /tmp/bf/summary.md $OUT/first-bf16.md; cp /tmp/bf.log $OUT/
grep "| spmm | bf16 |" /tmp/bf/summary.md
