#!/usr/bin/env bash
# Device call 3 (session 52): the tiled SDDMM kernel unmasked along M where M is whole tiles
# (EVEN_M), so a transposed A (a weight gradient's dY^T) loads in 16-byte pieces and is no longer
# copied; the SDDMM tests on the GPU, then the layout probe (the tiled heuristic and the lookup) on
# 9a's problems and on the Llama-7B / BERT weight shapes.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -p no:cacheprovider tests/test_sddmm.py tests/test_sddmm_tiled.py tests/test_sddmm_dense.py --tb=short 2>&1 | tee $OUT/pytest-sddmm.txt | tail -2
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k "sddmm or tuner" --tb=short 2>&1 | tee $OUT/pytest-gpu-sddmm-tuner.txt | tail -2
mkdir -p $OUT/probe-9a $OUT/probe-shapes
PROBE_KERNELS="tiled|auto" OUT=$OUT/probe-9a python3 scripts/probe_sddmm_layouts.py > $OUT/probe-9a/probe.log 2>&1; echo "probe 9a rc $?"
PROBE_CASES=wgrad:11008:4096:256:0.95:float16,wgrad:11008:4096:256:0.98:float16,wgrad:4096:11008:256:0.95:float16,wgrad:4096:11008:256:0.98:float16,wgrad:768:3072:256:0.95:float16,wgrad:4096:4096:256:0.95:bfloat16 \
  PROBE_KERNELS="tiled|auto" PROBE_LAYOUTS="A k, B k|A m, B n" OUT=$OUT/probe-shapes python3 scripts/probe_sddmm_layouts.py > $OUT/probe-shapes/probe.log 2>&1; echo "probe shapes rc $?"
for p in 9a shapes; do sed -n '/^case/,$p' $OUT/probe-$p/probe.log; tail -3 $OUT/probe-$p/probe.log | grep -i error; done
