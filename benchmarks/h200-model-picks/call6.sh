#!/usr/bin/env bash
# Session 54, device call 6: the cost model refitted with the fp32 entries' model_picks (62506ca)
# against the fit before (bb3992c's database, copied to before/ for the call, not kept): each one's
# pick over whole SpMM spaces, fp32 then fp16, timed against the entries' own configs in one run.
set -u
source scripts/gpu_env.sh || exit 1
timeout 240 python3 scripts/probe_model_cap.py --dtype float32 --variants cap0.3 --seconds 150 \
  --compare benchmarks/h200-model-picks/before/nvidia-h200.json --out "$OUT/fp32" 2>&1 | tail -n 5
timeout 290 python3 scripts/probe_model_cap.py --dtype float16 --variants cap0.3 --seconds 200 \
  --compare benchmarks/h200-model-picks/before/nvidia-h200.json --out "$OUT/fp16" 2>&1 | tail -n 5
