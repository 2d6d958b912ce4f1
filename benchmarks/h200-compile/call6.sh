#!/usr/bin/env bash
# Session 53, device call 6: the functional ops as graph breaks under torch.compile, on the GPU.
set -u
source scripts/gpu_env.sh || exit 1
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_compile.py 2>&1 | tee "$OUT/pytest-gpu-compile.txt" | tail -n 4
