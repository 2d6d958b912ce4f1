#!/usr/bin/env bash
# Device call 3 (session 46): clusters of four where they take no more waves than their CTAs alone.
# The whole GPU suite; call 2's configs under the new rule ("rule"); the fp16 decode rows.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short 2>&1 | tee $OUT/pytest-gpu-full.txt | tail -3
for m in 1024 1536 2048 2560 3072 3584 4096; do
  OUT=$OUT/m$m PROBE_SHAPE=${m}x4096 PROBE_NS=128 PROBE_SPARSITIES=0.7,0.95 PROBE_CLUSTER4=rule \
    PROBE_CONFIGS=64x128x64:4:4,64x128x128:4:4,128x128x128:4:3 PROBE_SECONDS=60 \
    timeout 60 python3 scripts/probe_spmm_smem_scatter.py 2>&1 | tail -3
done
timeout 60 stuning bench --suite first-table --ops spmm --dtypes fp16 --ns 16,128 --sparsities 90,95 --skews 0,0.4 \
  --configs auto --out /tmp/bd > /tmp/bd.log 2>&1
echo "bench rc $?"; cp /tmp/bd/results.csv $OUT/decode-fp16.csv; grep "| spmm | fp16 |" /tmp/bd/summary.md
