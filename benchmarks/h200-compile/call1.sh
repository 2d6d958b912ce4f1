#!/usr/bin/env bash
# Session 53, device call 1: the layers' GPU tests with torch.compile, then eager vs compiled steps.
set -u
source scripts/gpu_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_compile.py tests/test_nn.py tests/test_conv.py \
  tests/test_dense_fallback.py 2>&1 | tee "$OUT/pytest-gpu-layers.txt" | tail -n 15
timeout 330 python3 scripts/bench_compile.py --models llama-mlp --patterns 0.95,2:4 --tokens 16,128 --out "$OUT/llama" \
  2>&1 | grep -v '^{' | tee "$OUT/bench-llama.txt"
