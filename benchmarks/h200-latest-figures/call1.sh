#!/usr/bin/env bash
# Device call 1 (session 48): the fp16 first table and the Llama-7B MLP block at 95 / 90% on the
# shipped database (entries re-tuned in 8x), for the latest-figures table.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
timeout 230 stuning bench --suite first-table --ops spmm --dtypes fp16 --configs auto --out /tmp/bf > /tmp/bf.log 2>&1
echo "bench rc $?"; mkdir -p $OUT/first-fp16; cp /tmp/bf/results.csv /tmp/bf/summary.md /tmp/bf/*.png $OUT/first-fp16/ 2>/dev/null
grep "| spmm | fp16 |" /tmp/bf/summary.md
timeout 330 python3 scripts/bench_models.py --out $OUT/llama-mlp --models llama-mlp --sparsities 0.95,0.9 \
  --tokens 16,128,512,2048,8192 --trials 24 --seconds 6 > $OUT/llama-mlp.log 2>&1
echo "llama rc $?"; grep -E "^\| llama|tokens=" $OUT/llama-mlp.log
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
