#!/usr/bin/env bash
# Session 57, device call 2: where the TMA kernel's tile time goes (its product alone, the product and
# the gather, the pick alone), L = 4096; then call 1's grid at L = 4096, K = 64, 98%, which call 1's
# time limit cut.
set -u
source scripts/gpu_env.sh || exit 1
OUT=$OUT/parts-k64 PROBE_PARTS=1 PROBE_KS=64 PROBE_SPARSITIES=0.95,0.98 PROBE_TILES=128x128,128x256 \
  timeout 150 python3 scripts/probe_sddmm_tma.py 2>&1 | grep -v Warning | tail -n 8
OUT=$OUT/parts-k128 PROBE_PARTS=1 PROBE_KS=128 PROBE_SPARSITIES=0.98 PROBE_TILES=128x128,64x256 \
  timeout 100 python3 scripts/probe_sddmm_tma.py 2>&1 | grep -v Warning | tail -n 4
OUT=$OUT/grid-k64-98 PROBE_KS=64 PROBE_SPARSITIES=0.98 PROBE_TILES=128x128,128x256,64x256 PROBE_FACTORS=0,2 \
  timeout 200 python3 scripts/probe_sddmm_tma.py > /tmp/grid.txt 2>&1; mkdir -p $OUT/grid-k64-98; cp /tmp/grid.txt $OUT/grid-k64-98/
grep -v "^{" /tmp/grid.txt | tail -n 4
