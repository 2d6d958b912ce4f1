#!/usr/bin/env bash
# Device call 5 (session 48): attention SDDMM at 90% re-tuned with the dense kernel in the space;
# then the fp16 SDDMM first table (weight masks) and the attention suite on the merged database.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 150 stuning tune --op sddmm --shape 8192x8192,4096x4096,2048x2048,1024x1024 --n 128,64 --sparsity 0.9 \
  --dtype fp16 --mask attention --seconds 8 --json > $OUT/tune-attn90.json 2> $OUT/tune-attn90.log
echo "attn rc $?"
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 150 stuning bench --suite first-table --ops sddmm --dtypes fp16 --configs auto --out /tmp/bs > /tmp/bs.log 2>&1
echo "bench rc $?"; mkdir -p $OUT/first-sddmm-fp16; cp /tmp/bs/results.csv /tmp/bs/summary.md /tmp/bs/*.png $OUT/first-sddmm-fp16/ 2>/dev/null
grep -E "^\| sddmm \| fp16 \|" /tmp/bs/summary.md
timeout 200 stuning bench --suite full --ops sddmm --shapes attention --dtypes fp16 --configs auto --out /tmp/ba > /tmp/ba.log 2>&1
echo "bench rc $?"; mkdir -p $OUT/attention-fp16; cp /tmp/ba/results.csv /tmp/ba/summary.md /tmp/ba/*.png $OUT/attention-fp16/ 2>/dev/null
grep -E "^\| sddmm \| fp16 \|" /tmp/ba/summary.md
