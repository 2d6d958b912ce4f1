# Call 5: the GPU tests the kernel change touches, then fp32 entries at 80% zeros, N = 128 / 2048, re-tuned.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
timeout -s KILL 300 python3 -m pytest -q -m gpu tests/test_spmm_scatter.py tests/test_fp16_split.py tests/test_gpu.py \
  tests/test_semi24_wgmma_sp.py -k "scatter or semi24 or fp32 or fp16_split" -x 2>&1 | tail -4 | tee $OUT/pytest.txt
timeout -s KILL 230 stuning tune --op spmm --dtype fp32 --shape 768x3072,3072x768,4096x4096,11008x4096,4096x11008 \
  --n 128,2048 --sparsity 0.8 --skew 0,0.4 --seconds 8 --json > $OUT/tune-fp32-80.json 2> $OUT/tune.log
echo tune_rc=$?; tail -2 $OUT/tune.log
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
