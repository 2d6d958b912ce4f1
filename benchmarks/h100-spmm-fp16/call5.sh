# Call 5 (written in session 65, run in session 66: 476 s on an H100): the fp16 SpMM first table's problems without an
# H100 entry (the 70% rows, the BERT shapes at N = 2048, the five 98% decode rows call 3 did not
# reach), tuned, then the whole table benched (CSV and log only: the device returns eight files).
# Copy <files_at>/nvidia-h100-80gb-hbm3.json over tuning_db/'s afterwards.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
tune="stuning tune --suite first-table --op spmm --dtype fp16 --seconds 5"
# the five untuned are 4096 x 11008 (four) and 11008 x 4096 at N = 128 (one); its three others re-tune, kept if faster
timeout -s KILL 100 $tune --shape 4096x11008,11008x4096 --n 16,128 --sparsity 0.98 --max-seconds 70 > $OUT/tune-decode98.log 2>&1
echo tune_decode98_rc=$?
timeout -s KILL 150 $tune --shape 768x3072,3072x768 --n 2048 --max-seconds 120 > $OUT/tune-bert-wide.log 2>&1
echo tune_bert_wide_rc=$?
timeout -s KILL 200 $tune --sparsity 0.7 --max-seconds 170 > $OUT/tune-70.log 2>&1
echo tune_70_rc=$?
cp /tmp/sdb/*h100*.json $OUT/
timeout -s KILL 70 stuning bench --suite first-table --ops spmm --dtypes fp16 --configs auto \
  --out /tmp/bench > $OUT/bench.log 2>&1
echo bench_rc=$?
cp /tmp/bench/results.csv $OUT/ 2>/dev/null
tail -8 $OUT/bench.log
