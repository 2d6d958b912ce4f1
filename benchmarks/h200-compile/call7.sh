#!/usr/bin/env bash
# Session 53, device call 7: after the ops' graph-break decorator, the layers' GPU tests (they call
# the ops) and a sample of the kernels' file through the ops (the fused epilogue SparseLinear
# writes, the no-recompile checks, skewed rows, an odd 2:4 shape).
set -u
source scripts/gpu_env.sh || exit 1
timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_nn.py tests/test_conv.py tests/test_dense_fallback.py \
  tests/test_compile.py tests/test_pretune.py tests/test_bench_models.py tests/test_gpu.py \
  -k "not test_gpu.py or epilogue or no_recompile or semi24_pruned or spmm_skewed" 2>&1 | tee "$OUT/pytest-gpu.txt" | tail -n 4
