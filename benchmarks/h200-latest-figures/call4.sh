#!/usr/bin/env bash
# Device call 4 (session 48): the dense SDDMM kernel. Its tests and the other SDDMM tests on the GPU,
# then the first table's fp16 weight-mask SDDMM problems re-tuned with it in the space.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -p no:cacheprovider tests/test_sddmm_dense.py tests/test_sddmm.py --tb=short 2>&1 | tee $OUT/pytest-sddmm.txt | tail -2
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k sddmm --tb=short 2>&1 | tee $OUT/pytest-gpu-sddmm.txt | tail -2
timeout 420 stuning tune --op sddmm --shape 4096x4096,768x3072,3072x768,4096x11008,11008x4096 --n 256,2048 \
  --sparsity 0.98,0.95,0.9,0.7 --dtype fp16 --mask wgrad --seconds 6 --json > $OUT/tune-wgrad.json 2> $OUT/tune-wgrad.log
echo "wgrad rc $?"
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
python3 - <<'PY'
import json
d = json.load(open("/tmp/sdb/nvidia-h200.json"))
old = json.load(open("tuning_db/nvidia-h200.json"))["entries"]
for k, e in d["entries"].items():
    if e["op"] == "sddmm" and e["updated"] != old.get(k, {}).get("updated"):
        f, was = e["features"], old.get(k, {}).get("best", {})
        print(f"{f['m']}x{f['n']} k={f['k']} d={f['density']:.3f} {e['best']['config']['kernel']:6s} "
              f"{e['best']['time_us']:7.1f} us (was {was.get('config', {}).get('kernel', '-'):6s} "
              f"{was.get('time_us') or float('nan'):7.1f})  dense {e.get('dense_us') or float('nan'):7.1f} us "
              f"kernels {e['tuner'].get('kernels')}")
PY
