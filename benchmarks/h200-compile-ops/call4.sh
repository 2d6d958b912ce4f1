#!/usr/bin/env bash
# Session 54, device call 4: the functional ops as custom operators (stuning.ops.compiled) on the GPU
# (their compile tests, the layers' files, and the kernels' tests that go through the ops), then
# the Llama-7B MLP block written with the ops, compiled with operators against graph breaks.
set -u
source scripts/gpu_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_compile_ops.py tests/test_compile.py \
  tests/test_nn.py tests/test_conv.py tests/test_dense_fallback.py tests/test_fused_output.py tests/test_gpu.py \
  -k "not test_gpu.py or epilogue or no_recompile or semi24_pruned or spmm_skewed or sddmm_attention or transposed_b" \
  2>&1 | tee "$OUT/pytest-gpu.txt" | tail -n 4
timeout 240 python3 scripts/bench_compile.py --models llama-mlp-ops --patterns 0.95,2:4 --tokens 16,128 \
  --out "$OUT/bench" 2>&1 | grep -v '^{' | tee "$OUT/bench.txt" | tail -n 8
