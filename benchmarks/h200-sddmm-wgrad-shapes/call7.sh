#!/usr/bin/env bash
# Device call 7 (session 52): the tiled kernel before and after EVEN_M on the attention masks, on one
# machine (call 5's suite ran 6-7% slower than 8y's on every kernel, the untouched gather kernel
# included). Carries scratch/ (the before kernel).
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 benchmarks/h200-sddmm-wgrad-shapes/even_m_ab.py 2>&1 | tail -26
