source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
for shape in 4096x4096 11008x4096; do
  PROBE_SHAPE=$shape PROBE_NS=128 PROBE_SPARSITIES=0.95,0.99 PROBE_CONFIGS=64x128x128:1:4,64x128x128:2:4,64x128x128:4:3 timeout 150 python3 scripts/probe_spmm_smem_scatter.py 2>&1 | grep -v Warn > $OUT/real-$shape.txt
  python3 - $OUT/real-$shape.txt <<'PY'
import json,sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r=json.loads(line)
        print("real", r["m"], r["k"], r["sparsity"], "cublas", round(r["cublas_us"],2), " ".join(f"{k}={v if not isinstance(v,float) else round(v,2)}" for k,v in r["scatter"].items()))
PY
done
cd scripts
PROBE_SHAPES=4096x4096,11008x4096 PROBE_SPLITS=1,2,4 PROBE_KINDS=ax:4 PROBE_STAGES=3,4 timeout 150 python3 probe_swap_analog.py 2>&1 | grep -v Warn | tail -13
