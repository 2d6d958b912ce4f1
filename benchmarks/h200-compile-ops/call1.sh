#!/usr/bin/env bash
# Session 54, device call 1: session 53's final compiled.py (torch.export refused in the operator's
# fake) on the GPU, then torch.compile's default mode (no CUDA graphs) timed as 9d timed reduce-overhead.
set -u
source scripts/gpu_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_compile.py tests/test_nn.py \
  2>&1 | tee "$OUT/pytest-gpu-compile.txt" | tail -n 3
timeout 300 python3 scripts/bench_compile.py --mode default --models llama-mlp,bert --patterns 0.95,2:4 --tokens 16,128 \
  --out "$OUT/bench-default" 2>&1 | grep -v '^{' | tee "$OUT/bench-default.txt" | tail -n 12
