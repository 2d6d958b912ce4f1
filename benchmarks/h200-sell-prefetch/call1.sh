source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 150 python3 -m pytest -q -m gpu tests/test_gpu.py -k "sell" -x 2>&1 | tail -3 | tee $OUT/pytest-sell.txt
cd scripts && PROBE_SHAPES=3072x768,768x3072,4096x4096,11008x4096,4096x11008 PROBE_NS=16,128 PROBE_SPARSITIES=0.95 PROBE_CVS=0,0.4 timeout 420 python3 probe_spmm_sell_prefetch.py 2>&1 | grep -v Warning | tail -25
