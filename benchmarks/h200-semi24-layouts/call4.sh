#!/usr/bin/env bash
# Session 59, device call 4: the end-to-end 2:4 models (8j's command) on the column-store epilogue and
# the re-tuned layer entries (tuning_db at the commit after 0b22573).
set -u
source scripts/gpu_env.sh || exit 1
mkdir -p $OUT
for model in bert llama-mlp; do
  timeout 270 python3 scripts/bench_models.py --out $OUT/$model --models $model --sparsities 2:4 \
    --tokens 16,128,512,2048,8192 --trials 24 --seconds 6 > $OUT/$model.log 2>&1
  echo "bench_models $model rc $?"; rm -rf $OUT/$model/db
  grep "^| $model\|^| llama" $OUT/$model/summary.md | head -6
done
