#!/usr/bin/env bash
# Session 56, device call 1: the cost model with the longest row's chain (refitted) against the
# shipped model before it, each pick timed in the same run. The before picks were written on the CPU
# from a checkout of 4ff2afc (`PYTHONPATH=OLD_TREE python3 scripts/probe_model_cap.py --write-picks
# picks-before-DTYPE.csv --db OLD_TREE/tuning_db/nvidia-h200.json --dtype DTYPE`).
set -u
source scripts/gpu_env.sh || exit 1
D=benchmarks/h200-longest-row
timeout 230 python3 scripts/probe_model_cap.py --dtype float32 --variants cap0.3 --seconds 190 \
  --picks $D/picks-before-float32.csv --out "$OUT/fp32" 2>&1 | tail -n 4
timeout 340 python3 scripts/probe_model_cap.py --dtype float16 --variants cap0.3 --seconds 290 \
  --picks $D/picks-before-float16.csv --out "$OUT/fp16" 2>&1 | tail -n 4
