#!/usr/bin/env bash
# Session 55, device call 1: session 54's review refactor (cc50100: run_outside_graph_pools merging
# warm and run, the shared per-config pass of union_top_k/kept_model_picks) on the GPU; then the
# registers and spills of the configs behind the cost model's worst fp32 picks (9f's call 7).
set -u
source scripts/gpu_env.sh || exit 1
timeout 330 python3 -m pytest -q -m gpu tests/test_compile_ops.py tests/test_compile.py tests/test_nn.py \
  tests/test_recorded_picks.py 2>&1 | tail -n 8
timeout 200 python3 scripts/probe_spmm_registers.py benchmarks/h200-model-picks/call7/fp32/variants.csv \
  --worst 8 --out "$OUT/registers" 2>&1 | tail -n 60
