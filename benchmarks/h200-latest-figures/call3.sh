#!/usr/bin/env bash
# Device call 3 (session 48): the fp16 weight-gradient SDDMM problems of the first table that have
# no entry yet (70 / 90%, and three of call 2's that its time limit cut), attention at L = 8192,
# K = 128, 98%; then the fp16 SDDMM first table (40 rows: BERT and Llama-7B weight masks, K = 256 /
# 2048, 70-98%) on the database with them.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 40 stuning tune --op sddmm --shape 11008x4096 --n 2048 --sparsity 0.98,0.95 --dtype fp16 --mask wgrad \
  --seconds 6 --json > $OUT/tune-wgrad-rest.json 2> $OUT/tune-wgrad-rest.log
timeout 20 stuning tune --op sddmm --shape 11008x4096 --n 256 --sparsity 0.98 --dtype fp16 --mask wgrad \
  --seconds 6 --json >> $OUT/tune-wgrad-rest.json 2>> $OUT/tune-wgrad-rest.log
timeout 240 stuning tune --op sddmm --shape 11008x4096,4096x4096,768x3072,3072x768,4096x11008 --n 256,2048 \
  --sparsity 0.9,0.7 --dtype fp16 --mask wgrad --seconds 6 --json > $OUT/tune-wgrad.json 2> $OUT/tune-wgrad.log
echo "wgrad rc $?"
timeout 30 stuning tune --op sddmm --shape 8192x8192 --n 128 --sparsity 0.98 --dtype fp16 --mask attention \
  --seconds 8 --json > $OUT/tune-attn8192.json 2> $OUT/tune-attn8192.log
echo "attn rc $?"
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
timeout 200 stuning bench --suite first-table --ops sddmm --dtypes fp16 --configs auto --out /tmp/bs > /tmp/bs.log 2>&1
echo "bench rc $?"; mkdir -p $OUT/first-sddmm-fp16; cp /tmp/bs/results.csv /tmp/bs/summary.md /tmp/bs/*.png $OUT/first-sddmm-fp16/ 2>/dev/null
grep "| sddmm |" /tmp/bs/summary.md
