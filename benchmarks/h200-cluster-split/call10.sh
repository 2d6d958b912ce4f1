#!/usr/bin/env bash
# Device call 10 (session 44): the first table's decode problems re-tuned with two splits as a
# cluster (on a copy of the shipped database), then the decode rows benched on the result.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
stuning db untried --op spmm > $OUT/untried.txt 2>&1; tail -2 $OUT/untried.txt
stuning tune --op spmm --shape 768x3072,3072x768,11008x4096,4096x4096,4096x11008 --n 16,128 \
  --sparsity 0.9,0.95 --skew 0,0.4 --dtype fp16 --seconds 8 --json > $OUT/tune-decode.json 2> $OUT/tune-decode.log
tail -3 $OUT/tune-decode.log
cp /tmp/sdb/nvidia-h200.json $OUT/db-after-tune.json
stuning bench --suite first-table --ops spmm --dtypes fp16 --ns 16,128 --sparsities 90,95 --skews 0,0.4 \
  --configs auto --out /tmp/bt > /tmp/bt.log 2>&1
cp /tmp/bt/results.csv $OUT/decode-retuned.csv; cp /tmp/bt/summary.md $OUT/decode-retuned.md
grep "| spmm | fp16 |" /tmp/bt/summary.md | head -4
