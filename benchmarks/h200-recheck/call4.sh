#!/usr/bin/env bash
# Session 55, device call 4: the registers probe after its review fix (a config compiled for an
# earlier problem reports the registers read then, not NaN), on the two worst problems.
set -u
source scripts/gpu_env.sh || exit 1
timeout 200 python3 scripts/probe_spmm_registers.py benchmarks/h200-model-picks/call7/fp32/variants.csv \
  --worst 3 --out "$OUT/registers" 2>&1 | tail -n 22
