#!/usr/bin/env bash
# Session 54, device call 2: where a default-mode compiled sparse block spends its host time.
set -u
source scripts/gpu_env.sh || exit 1
timeout 300 python3 scripts/probe_compile_default.py 2>&1 | tee "$OUT/probe.txt" | tail -n 80
