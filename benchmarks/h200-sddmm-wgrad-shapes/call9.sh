#!/usr/bin/env bash
# Device call 9 (session 52): after the review's mend (one predicate for K strided, host side), the
# SDDMM test files and the SDDMM and tuner GPU tests.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -p no:cacheprovider tests/test_sddmm.py tests/test_sddmm_tiled.py tests/test_sddmm_dense.py --tb=short 2>&1 | tee $OUT/pytest-sddmm.txt | tail -2
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k "sddmm or tuner" --tb=short 2>&1 | tee $OUT/pytest-gpu-sddmm-tuner.txt | tail -2
