#!/usr/bin/env bash
# Device call 5 (session 46): the fp32 first tables, last measured in 7p (SpMM) and 7n (SDDMM), on
# today's kernels and the shipped database: SpMM at 80-98% zeros against SGEMM (TF32 off) and
# cuSPARSE, SDDMM against SGEMM and sampled_addmm.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 300 stuning bench --suite first-table --ops spmm --dtypes fp32 --sparsities 80,90,95,98 --configs auto \
  --out /tmp/b32 > /tmp/b32.log 2>&1
echo "spmm bench rc $?"; cp /tmp/b32/results.csv $OUT/spmm-fp32.csv; cp /tmp/b32/summary.md $OUT/spmm-fp32.md
grep "| spmm | fp32 |" /tmp/b32/summary.md
timeout 240 stuning bench --suite first-table --ops sddmm --dtypes fp32 --configs auto --out /tmp/s32 > /tmp/s32.log 2>&1
echo "sddmm bench rc $?"; cp /tmp/s32/results.csv $OUT/sddmm-fp32.csv; cp /tmp/s32/summary.md $OUT/sddmm-fp32.md
grep "| sddmm | fp32 |" /tmp/s32/summary.md
