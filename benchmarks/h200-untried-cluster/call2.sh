#!/usr/bin/env bash
# Device call 2 (session 45): the entries `stuning db untried` lists since the scatter kernel's
# cluster rebuild, re-tuned on a copy of the shipped database; then the decode rows (fp16, bf16)
# benched on the result.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
stuning db untried --op spmm > $OUT/untried-before.txt 2>&1; tail -3 $OUT/untried-before.txt
timeout 330 stuning tune --untried --seconds 5 --json > $OUT/tune-untried.json 2> $OUT/tune-untried.log
echo "tune rc $?"; tail -3 $OUT/tune-untried.log
cp /tmp/sdb/nvidia-h200.json $OUT/db-after-tune.json
stuning db untried --op spmm > $OUT/untried-after.txt 2>&1; tail -3 $OUT/untried-after.txt
for dt in fp16 bf16; do
  stuning bench --suite first-table --ops spmm --dtypes $dt --ns 16,128 --sparsities 90,95 --skews 0,0.4 \
    --configs auto --out /tmp/b-$dt > /tmp/b-$dt.log 2>&1
  cp /tmp/b-$dt/results.csv $OUT/decode-$dt.csv; cp /tmp/b-$dt/summary.md $OUT/decode-$dt.md
  grep "| spmm | $dt |" /tmp/b-$dt/summary.md | head -4
done
