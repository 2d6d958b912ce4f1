#!/usr/bin/env bash
# Session 54, device call 5: call 4's bench again, the graph-breaking block now a class of its own
# (in call 4 it shared a forward with the compiled one, and Dynamo broke both) and Dynamo reset
# between patterns; the Llama-7B MLP block as layers in the same run.
set -u
source scripts/gpu_env.sh || exit 1
timeout 400 python3 scripts/bench_compile.py --models llama-mlp-ops,llama-mlp --patterns 0.95,2:4 --tokens 16,128 \
  --out "$OUT/bench" 2>&1 | grep -v '^{' | tee "$OUT/bench.txt" | tail -n 12
