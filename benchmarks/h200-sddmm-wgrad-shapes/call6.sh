#!/usr/bin/env bash
# Device call 6 (session 52): the rest of `pytest -m gpu` (tests/test_gpu.py outside its SDDMM and
# tuner tests) on the final code; with call 5 the whole suite. Then an A/B of the tiled kernel.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k "not (sddmm or tuner)" --tb=short 2>&1 | tee $OUT/pytest-gpu-rest.txt | tail -3
