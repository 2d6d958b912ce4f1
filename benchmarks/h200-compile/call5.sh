#!/usr/bin/env bash
# Session 53, device call 5: on the final library code, every GPU test outside tests/test_gpu.py
# (the layers, pretune, the benchmarks' and CLI's GPU paths; test_gpu.py runs the kernels through
# the ops, which this session did not change).
set -u
source scripts/gpu_env.sh || exit 1
git log -1 --format='%h %s' | tee "$OUT/commit.txt"
timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/ -k "not test_gpu.py" 2>&1 | tee "$OUT/pytest-gpu.txt" | tail -n 6
