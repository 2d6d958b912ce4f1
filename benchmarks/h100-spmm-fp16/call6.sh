# Call 6 (session 67): the 18 fp16 SpMM first-table problems still without an H100 entry after
# call 5 (the 70% rows of 4096 x 11008 and 11008 x 4096, five BERT rows at N = 2048, one 98% decode
# row), tuned, then the whole fp16 table benched. Copy <files_at>/nvidia-h100-80gb-hbm3.json over
# tuning_db/'s afterwards (it starts from the shipped file, so it holds everything before as well).
# Session 67 had device time for only its first tune, run as one command with --max-seconds 110
# (`call6/tune-70.log`: 11 of the 12 70% problems; 4096 x 11008, N = 2048, cv 0.4 not reached).
# The rest of this script has not run.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
tune="stuning tune --suite first-table --op spmm --dtype fp16 --seconds 5"
{
  timeout -s KILL 170 $tune --shape 4096x11008,11008x4096 --sparsity 0.7 --max-seconds 150
  echo tune_70_rc=$?
  timeout -s KILL 40 $tune --shape 3072x768 --n 2048 --sparsity 0.95,0.98 --max-seconds 30
  timeout -s KILL 20 $tune --shape 3072x768 --n 2048 --sparsity 0.9 --skew 0.4 --max-seconds 5
  timeout -s KILL 20 $tune --shape 4096x11008 --n 128 --sparsity 0.98 --skew 0.4 --max-seconds 5
  echo tune_rest_rc=$?
} > $OUT/tune.log 2>&1
grep rc= $OUT/tune.log
cp /tmp/sdb/*h100*.json $OUT/
timeout -s KILL 80 stuning bench --suite first-table --ops spmm --dtypes fp16 --configs auto \
  --out /tmp/bench > $OUT/bench.log 2>&1
echo bench_rc=$?
cp /tmp/bench/results.csv $OUT/ 2>/dev/null
tail -8 $OUT/bench.log
