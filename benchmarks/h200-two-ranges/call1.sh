source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 400 python3 -m pytest -q -m gpu tests/test_spmm_scatter.py -x 2>&1 | tail -15 | tee $OUT/pytest-scatter.txt
for n in 128 16; do
  if [ $n = 128 ]; then C=64x128x128:2:4:4,64x64x128:2:3:8,64x64x128:2:2:8,64x64x128:1:3:8,64x128x64:1:2:8,64x128x64:2:2:8,64x64x64:1:3:8,64x64x64:1:4:8,64x64x64:2:3:8
  else C=64x128x16:4:4:4,64x128x16:2:4:8,64x128x16:2:3:8,64x128x16:4:3:8,64x128x16:1:4:8,64x64x16:2:4:8,64x64x16:4:4:8,64x128x16:4:4:8; fi
  for shape in 4096x4096 11008x4096; do
    PROBE_SHAPE=$shape PROBE_NS=$n PROBE_SPARSITIES=0.95 PROBE_CONFIGS=$C timeout 200 python3 scripts/probe_spmm_smem_scatter.py > $OUT/probe-$shape-n$n.txt 2>&1
    python3 - $OUT/probe-$shape-n$n.txt <<'PY'
import json,sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r=json.loads(line)
        print(sys.argv[1].split("/")[-1], "cublas", round(r["cublas_us"],2), "pick", round(r["pick_us"],2))
        for k,v in r["scatter"].items():
            print("   ", k, v if not isinstance(v,float) else round(v,2))
PY
    tail -3 $OUT/probe-$shape-n$n.txt
  done
done
