#!/usr/bin/env bash
# Session 56, device call 2: three fits timed in one run per dtype. cap0.3 (the library): round 6,
# call 1's slower picks recorded and refitted; compare: round 5, call 1's database (round5/, copied
# for the call, not kept); picks: the model before the longest row's chain (4ff2afc), written on the
# CPU by --write-picks (now over the H200's whole space, the scatter kernel included).
set -u
source scripts/gpu_env.sh || exit 1
D=benchmarks/h200-longest-row
timeout 250 python3 scripts/probe_model_cap.py --dtype float32 --variants cap0.3 --seconds 200 \
  --compare $D/round5/nvidia-h200.json --picks $D/picks-before-float32.csv --out "$OUT/fp32" 2>&1 | tail -n 5
timeout 340 python3 scripts/probe_model_cap.py --dtype float16 --variants cap0.3 --seconds 300 \
  --compare $D/round5/nvidia-h200.json --picks $D/picks-before-float16.csv --out "$OUT/fp16" 2>&1 | tail -n 5
