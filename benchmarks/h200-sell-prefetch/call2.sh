source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 200 python3 -m pytest -q -m gpu tests/test_spmm_scatter.py -x 2>&1 | tail -3 | tee $OUT/pytest-scatter.txt
probe() {  # tag
  for spec in "4096x4096 16 64x128x16:4:4,64x128x16:2:4" "4096x4096 128 64x128x128:2:4,64x64x128:2:3" \
              "11008x4096 16 64x128x16:2:4" "11008x4096 128 64x64x128:2:3,64x128x128:2:4" \
              "3072x768 128 64x128x64:1:4" "768x3072 128 64x128x64:4:4" "3072x768 16 64x128x16:1:3"; do
    set -- $spec
    PROBE_SHAPE=$1 PROBE_NS=$2 PROBE_SPARSITIES=0.95 PROBE_CONFIGS=$3 timeout 120 python3 scripts/probe_spmm_smem_scatter.py > $OUT/probe-$TAG-$1-n$2.txt 2>&1
    python3 - $OUT/probe-$TAG-$1-n$2.txt $TAG <<'PY'
import json,sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r=json.loads(line)
        print(sys.argv[2], sys.argv[1].split("probe-")[-1], "cublas", round(r["cublas_us"],2), " ".join(f"{k}={v if not isinstance(v,float) else round(v,2)}" for k,v in r["scatter"].items()))
PY
  done
}
TAG=new probe
cp scratch/spmm_scatter_old.py kernels/spmm_scatter.py
TAG=old probe
cp scratch/spmm_scatter_new.py kernels/spmm_scatter.py
TAG=new2 probe
