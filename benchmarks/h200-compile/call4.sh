#!/usr/bin/env bash
# Session 53, device call 4: on the final layer code (the compiled branch guards on plain attributes
# and buffers only), the layers' GPU tests, then eager vs compiled steps.
set -u
source scripts/gpu_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_compile.py tests/test_nn.py tests/test_conv.py \
  tests/test_dense_fallback.py tests/test_sparsify.py tests/test_fused_output.py 2>&1 | tee "$OUT/pytest-gpu-layers.txt" | tail -n 3
timeout 330 python3 scripts/bench_compile.py --models llama-mlp,bert --patterns 0.95,2:4 --tokens 16,128 --out "$OUT/bench" \
  2>&1 | grep -v '^{' | tee "$OUT/bench.txt" | tail -n 12
