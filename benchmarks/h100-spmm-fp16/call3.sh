# Call 3 (session 65, H100): the fp16 attention SDDMM problems of the full suite (L = 1024-4096,
# K = 64 / 128, 50-98%, 36 problems) tuned into the H100 database and benched against the dense
# product; then, with the time left, the fp16 SpMM first table's 98% decode rows tuned and the table
# benched again. Copy <files_at>/nvidia-h100-80gb-hbm3.json over tuning_db/'s afterwards.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
timeout -s KILL 270 stuning tune --suite full --op sddmm --mask attention --dtype fp16 --seconds 4 \
  > $OUT/tune-attention.log 2>&1
echo tune_attention_rc=$?
cp /tmp/sdb/*h100*.json $OUT/
timeout -s KILL 60 stuning bench --suite full --ops sddmm --shapes attention --dtypes fp16 --configs auto \
  --out $OUT/bench-attention > $OUT/bench-attention.log 2>&1
echo bench_attention_rc=$?
tail -8 $OUT/bench-attention.log
timeout -s KILL 150 stuning tune --suite first-table --op spmm --dtype fp16 --n 16,128 --sparsity 0.98 --seconds 4 \
  > $OUT/tune-decode98.log 2>&1
echo tune_decode98_rc=$?
cp /tmp/sdb/*h100*.json $OUT/
timeout -s KILL 60 stuning bench --suite first-table --ops spmm --dtypes fp16 --configs auto \
  --out $OUT/bench-spmm > $OUT/bench-spmm.log 2>&1
echo bench_spmm_rc=$?
tail -8 $OUT/bench-spmm.log
