#!/usr/bin/env bash
# Device call 3 (session 45): the untried entries call 2's time limit left, then the fp16 first
# table (120 rows) on the merged database.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 200 stuning tune --untried --seconds 5 > $OUT/tune-untried.log 2>&1; echo "tune rc $?"
cp /tmp/sdb/nvidia-h200.json $OUT/db-after-tune.json
stuning db untried --op spmm > $OUT/untried-after.txt 2>&1; grep -c "spmm|" $OUT/untried-after.txt
stuning bench --suite first-table --ops spmm --dtypes fp16 --configs auto --out /tmp/bf > /tmp/bf.log 2>&1
echo "bench rc $?"; cp /tmp/bf/results.csv $OUT/first-fp16.csv; cp /tmp/bf/summary.md $OUT/first-fp16.md
grep "| spmm | fp16 |" /tmp/bf/summary.md
