#!/usr/bin/env bash
# Session 58, device call 7 (this directory's call 2): call 1's pretune stopped at once (BERT's random
# weights are not 2:4: --sparsity 0.5 prunes them to it). The layers' X^T entries (bt=1) at 2048 and
# 8192 tokens, 20 s each.
set -u
source scripts/gpu_env.sh || exit 1
mkdir -p $OUT
timeout 200 stuning pretune --model stuning.nn.examples:bert_encoder --pattern 2:4 --sparsity 0.5 --tokens 2048,8192 \
  --dtype fp16 --seconds 20 --refresh --db $STUNING_DB_DIR --json > $OUT/pretune-bert.json 2> $OUT/pretune-bert.err
echo "pretune rc $?"; tail -n 3 $OUT/pretune-bert.err; cp $STUNING_DB_DIR/*.json $OUT/
