#!/usr/bin/env bash
# Session 53, device call 3: the compile GPU test with its eager comparison by tolerance; where a
# compiled step's host time goes (graph partitions on and off, counters, a profile).
set -u
source scripts/gpu_env.sh || exit 1
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_compile.py 2>&1 | tee "$OUT/pytest-gpu-compile.txt" | tail -n 3
timeout 300 python3 scripts/probe_compile_overhead.py 2>&1 | tee "$OUT/probe.txt" | tail -n 60
