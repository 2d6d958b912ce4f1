#!/usr/bin/env bash
# Session 53, device call 2: after the first call's fix (a layer's first compiled call at an input
# runs once on a helper thread, outside the CUDA-graph pool), the compile tests and the timings.
set -u
source scripts/gpu_env.sh || exit 1
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_compile.py 2>&1 | tee "$OUT/pytest-gpu-compile.txt" | tail -n 4
timeout 380 python3 scripts/bench_compile.py --models llama-mlp,bert --patterns 0.95,2:4 --tokens 16,128 --out "$OUT/bench" \
  2>&1 | grep -v '^{' | tee "$OUT/bench.txt" | tail -n 30
