#!/usr/bin/env bash
# Session 56, device call 3: the review's cut_share (formats/sell.py, shared by the slicing and the
# cost model) on the GPU: the sliced-ELL tests, the GPU suite's SpMM and tuner tests.
set -u
source scripts/gpu_env.sh || exit 1
timeout 420 python3 -m pytest -q -m gpu tests/test_gpu.py -k "sell or spmm or tuner" -x 2>&1 | tail -n 3
timeout 120 python3 -m pytest -q tests/test_sell_format.py tests/test_spmm_sell.py -x 2>&1 | tail -n 3
