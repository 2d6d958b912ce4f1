#!/usr/bin/env bash
# Session 55, device call 3: round 4 (call 2's slower picks recorded, refitted) against round 3
# (the database call 2 measured, copied to round3/ for the call, not kept).
set -u
source scripts/gpu_env.sh || exit 1
timeout 200 python3 scripts/probe_model_cap.py --dtype float32 --variants cap0.3 --seconds 150 \
  --compare benchmarks/h200-recheck/round3/nvidia-h200.json --out "$OUT/fp32" 2>&1 | tail -n 4
timeout 330 python3 scripts/probe_model_cap.py --dtype float16 --variants cap0.3 --seconds 270 \
  --compare benchmarks/h200-recheck/round3/nvidia-h200.json --out "$OUT/fp16" 2>&1 | tail -n 4
