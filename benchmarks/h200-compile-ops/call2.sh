#!/usr/bin/env bash
# Session 54, device call 2 (and 3, the probe with dense blocks, pipelined steps and counters):
set -u
source scripts/gpu_env.sh || exit 1
timeout 300 python3 scripts/probe_compile_default.py 2>&1 | tee "$OUT/probe.txt" | tail -n 80
