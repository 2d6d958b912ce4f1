#!/usr/bin/env bash
# Device call 2 (session 48): the cost model's fp32 SpMM picks over whole spaces against the tuned
# entries; fp16 SDDMM problems the database lacks tuned (attention at L = 8192, weight-gradient masks).
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 200 python3 scripts/probe_model_cap.py --dtype float32 --variants uncapped,cap0.3 --seconds 170 \
  --out $OUT/modelcap-fp32 > $OUT/modelcap-fp32.log 2>&1
echo "modelcap rc $?"; tail -4 $OUT/modelcap-fp32.log
timeout 90 stuning tune --op sddmm --shape 8192x8192 --n 64,128 --sparsity 0.9,0.95,0.98 --dtype fp16 \
  --mask attention --seconds 8 --json > $OUT/tune-attn8192.json 2> $OUT/tune-attn8192.log
echo "attn rc $?"
timeout 200 stuning tune --op sddmm --shape 4096x4096,768x3072,3072x768,4096x11008,11008x4096 --n 256,2048 \
  --sparsity 0.95,0.98 --dtype fp16 --mask wgrad --seconds 6 --json > $OUT/tune-wgrad.json 2> $OUT/tune-wgrad.log
echo "wgrad rc $?"
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
python3 - <<'PY'
import json
d = json.load(open("/tmp/sdb/nvidia-h200.json"))
old = json.load(open("tuning_db/nvidia-h200.json"))["entries"]
for k, e in d["entries"].items():
    if e["op"] == "sddmm" and e["updated"] != old.get(k, {}).get("updated"):
        f = e["features"]
        print(f"{f['m']}x{f['n']} k={f['k']} d={f['density']:.3f} {e['best']['config']['kernel']:7s} "
              f"{e['best']['time_us']:8.1f} us  dense {e.get('dense_us') or float('nan'):8.1f} us")
PY
