#!/usr/bin/env bash
# Session 55, device call 2: round 3 of the cost model's refit on its own misses (call 7 of
# h200-model-picks recorded, now fitted), against round 2 (cc50100's database, copied to round2/ for
# the call, not kept): the model's pick over each measured entry's whole space against the entry's own.
set -u
source scripts/gpu_env.sh || exit 1
timeout 200 python3 scripts/probe_model_cap.py --dtype float32 --variants cap0.3 --seconds 150 \
  --compare benchmarks/h200-recheck/round2/nvidia-h200.json --out "$OUT/fp32" 2>&1 | tail -n 4
timeout 330 python3 scripts/probe_model_cap.py --dtype float16 --variants cap0.3 --seconds 270 \
  --compare benchmarks/h200-recheck/round2/nvidia-h200.json --out "$OUT/fp16" 2>&1 | tail -n 4
