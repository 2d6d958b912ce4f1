#!/usr/bin/env bash
# Session 57, device call 3: call 2 found the product's operand reads from L2 the bound, not the pick.
# Taller tiles read B fewer times: the library kernel with 256-row tiles (its config space stops at
# 128), runs of 1, 2 and 4, against 128 x 128, L = 4096, K = 64 / 128, 95 / 98% zeros.
set -u
source scripts/gpu_env.sh || exit 1
OUT=$OUT/tall PROBE_KINDS=lib PROBE_RUNS=1,2,4 PROBE_TILES=128x128,256x64,256x128 \
  timeout 420 python3 scripts/probe_sddmm_tma.py > /tmp/tall.txt 2>&1; mkdir -p $OUT/tall; cp /tmp/tall.txt $OUT/tall/
grep -v "^{" /tmp/tall.txt | grep -v Warning | tail -n 12
