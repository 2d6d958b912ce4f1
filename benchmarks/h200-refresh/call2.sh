#!/usr/bin/env bash
# Device call 2 (session 46): where clusters of four start to cost. Four-split configs on 64- and
# 128-wide N tiles at N = 128, timed as clusters of four ("always") and with atomic adds through L2
# ("never"), on M = 1024-4096 rows (K = 4096), so that 4 x tiles spans ~64 to 256 CTAs.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
for m in 1024 1536 2048 2560 3072 3584 4096; do
  OUT=$OUT/m$m PROBE_SHAPE=${m}x4096 PROBE_NS=128 PROBE_SPARSITIES=0.7,0.95 PROBE_CLUSTER4=always,never \
    PROBE_CONFIGS=64x128x64:4:4,64x128x128:4:4,128x128x128:4:3 PROBE_SECONDS=60 \
    timeout 80 python3 scripts/probe_spmm_smem_scatter.py 2>&1 | tail -12
done
