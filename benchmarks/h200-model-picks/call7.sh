#!/usr/bin/env bash
# Session 54, device call 7: a second round: call 6's slower picks recorded too and the fit refitted
# again, against the first round's fit (62506ca's database, copied to iter1/ for the call, not kept).
set -u
source scripts/gpu_env.sh || exit 1
timeout 160 python3 scripts/probe_model_cap.py --dtype float32 --variants cap0.3 --seconds 90 \
  --compare benchmarks/h200-model-picks/iter1/nvidia-h200.json --out "$OUT/fp32" 2>&1 | tail -n 4
timeout 170 python3 scripts/probe_model_cap.py --dtype float16 --variants cap0.3 --seconds 100 \
  --compare benchmarks/h200-model-picks/iter1/nvidia-h200.json --out "$OUT/fp16" 2>&1 | tail -n 4
