# Call 3 (ran in session 64 on an H100, 105 s): the six fp32 first-table SDDMM problems call 2's tune did not reach (4096 x 11008 at
# K = 256 with 95 / 98% zeros, and at K = 2048), tuned into the H100 database, then the fp32 SDDMM
# first table again. Then copy <files_at>/nvidia-h100-80gb-hbm3.json over tuning_db/'s (it started
# from it).
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
tune="stuning tune --suite first-table --op sddmm --dtype fp32 --shape 4096x11008 --seconds 4"
timeout -s KILL 40 $tune --n 256 --sparsity 0.95,0.98 > $OUT/tune-k256.log 2>&1; echo tune_k256_rc=$?
timeout -s KILL 60 $tune --n 2048 > $OUT/tune-k2048.log 2>&1; echo tune_k2048_rc=$?
cp /tmp/sdb/*h100*.json $OUT/
timeout -s KILL 45 stuning bench --suite first-table --ops sddmm --dtypes fp32 --configs auto \
  --out $OUT/bench > $OUT/bench.log 2>&1
echo bench_rc=$?
tail -8 $OUT/bench.log
