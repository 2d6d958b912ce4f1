#!/usr/bin/env bash
# Device call 4 (session 49): the fp16 SDDMM first table on the final database (call 3's entries
# merged onto the session's starting database).
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 200 stuning bench --suite first-table --ops sddmm --dtypes fp16 --configs auto --out /tmp/bs > /tmp/bs.log 2>&1
echo "bench rc $?"; mkdir -p $OUT/first-sddmm-fp16; cp /tmp/bs/results.csv /tmp/bs/summary.md $OUT/first-sddmm-fp16/ 2>/dev/null
grep -E "^\| sddmm \| fp16 \|" /tmp/bs/summary.md
