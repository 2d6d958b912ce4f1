#!/usr/bin/env bash
# Device call 6 (session 48): the attention suite's 50-80% problems, which had no entries and fell to
# the cost model's picks (0.18-0.62x dense in call 5), tuned; then the attention suite again.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 230 stuning tune --op sddmm --shape 4096x4096,2048x2048,1024x1024 --n 64,128 --sparsity 0.8,0.7,0.5 \
  --dtype fp16 --mask attention --seconds 8 --json > $OUT/tune-attn-low.json 2> $OUT/tune-attn-low.log
echo "attn rc $?"
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 150 stuning bench --suite full --ops sddmm --shapes attention --dtypes fp16 --configs auto --out /tmp/ba > /tmp/ba.log 2>&1
echo "bench rc $?"; mkdir -p $OUT/attention-fp16; cp /tmp/ba/results.csv /tmp/ba/summary.md /tmp/ba/*.png $OUT/attention-fp16/ 2>/dev/null
grep -E "^\| sddmm \| fp16 \|" /tmp/ba/summary.md
