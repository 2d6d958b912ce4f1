# Call 2 (session 65, H100): the 8 decode problems call 1's tune did not reach (4096 x 11008), then the
# wide rows issue 7 names (N = 2048, M and K >= 4096, 90 / 95 / 98%, 18 problems), tuned into the H100
# database; then the whole fp16 SpMM first table (120 rows) benched. Copy <files_at>/nvidia-h100-80gb-hbm3.json
# over tuning_db/'s afterwards (it started from it).
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
tune="stuning tune --suite first-table --op spmm --dtype fp16"
timeout -s KILL 90 $tune --shape 4096x11008 --n 16,128 --sparsity 0.9,0.95 --seconds 5 > $OUT/tune-decode.log 2>&1
echo tune_decode_rc=$?
cp /tmp/sdb/*h100*.json $OUT/
timeout -s KILL 250 $tune --shape 4096x4096,4096x11008,11008x4096 --n 2048 --sparsity 0.9,0.95,0.98 --seconds 6 \
  > $OUT/tune-wide.log 2>&1
echo tune_wide_rc=$?
cp /tmp/sdb/*h100*.json $OUT/
timeout -s KILL 100 stuning bench --suite first-table --ops spmm --dtypes fp16 --configs auto \
  --out $OUT/bench > $OUT/bench.log 2>&1
echo bench_rc=$?
tail -12 $OUT/bench.log
