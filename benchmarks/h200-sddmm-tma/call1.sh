#!/usr/bin/env bash
# Session 57, device call 1: the persistent TMA-fed tiled SDDMM probe against the library kernel
# (with 256-wide tiles too), L = 4096 and 2048, K = 64 / 128, 95 / 98% zeros, fp16.
set -u
source scripts/gpu_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 scripts/probe_sddmm_tma.py > /tmp/l4096.txt 2>&1; cp /tmp/l4096.txt $OUT/; grep -v "^{" /tmp/l4096.txt | tail -n 30
OUT=$OUT/l2048 PROBE_LS=2048 PROBE_KS=64 PROBE_SPARSITIES=0.98 PROBE_SECONDS=100 timeout 150 python3 scripts/probe_sddmm_tma.py > /tmp/l2048.txt 2>&1; cp /tmp/l2048.txt $OUT/
tail -n 4 /tmp/l2048.txt
# The SDDMM launcher's dtype check, now one function the compiled operator's fake shares.
timeout 200 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_compile_ops.py -k "sddmm" -x 2>&1 | tail -n 2
