source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 300 python3 -m pytest -q -m gpu tests/test_spmm_scatter.py 2>&1 | tail -4 | tee $OUT/pytest-scatter.txt
C16=64x128x16:4:4,64x128x16:4:8,64x128x16:2:4,64x128x16:2:8,64x64x16:4:4,64x64x16:4:8,64x128x16:8:8
for shape in 4096x4096 11008x4096 4096x11008; do
  for ring in 4,2 8,4,2; do
    PROBE_RING_STAGES=$ring PROBE_MORE_STAGES=8 PROBE_SHAPE=$shape PROBE_NS=16 PROBE_SPARSITIES=0.95 PROBE_CONFIGS=$C16 timeout 150 python3 scripts/probe_spmm_smem_scatter.py > $OUT/n16-$shape-ring${ring//,/}.txt 2>&1
  done
done
for ring in 4,2 8,4,2; do
  PROBE_RING_STAGES=$ring PROBE_SHAPE=4096x4096 PROBE_NS=128 PROBE_SPARSITIES=0.95,0.9 PROBE_CONFIGS=64x128x128:2:4 timeout 150 python3 scripts/probe_spmm_smem_scatter.py > $OUT/n128-4096x4096-ring${ring//,/}.txt 2>&1
done
python3 scratch/summ.py $OUT/n*.txt
grep -h -i "error\|Traceback" $OUT/n*.txt | head -5
