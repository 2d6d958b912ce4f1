#!/usr/bin/env bash
# Device call 5 (session 52), on the final kernel code and database: the GPU tests outside
# tests/test_gpu.py and its SDDMM and tuner tests (call 6 runs the rest of `pytest -m gpu`), the
# lookup on a weight gradient's layout with the re-tuned entries, and the fp16 attention suite.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -m gpu -p no:cacheprovider tests/ -k "not test_gpu.py" --tb=short 2>&1 | tee $OUT/pytest-gpu-other-files.txt | tail -2
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k "sddmm or tuner" --tb=short 2>&1 | tee $OUT/pytest-gpu-sddmm-tuner.txt | tail -2
mkdir -p $OUT/probe-9a $OUT/probe-shapes
PROBE_KERNELS="auto" OUT=$OUT/probe-9a python3 scripts/probe_sddmm_layouts.py > $OUT/probe-9a/probe.log 2>&1; echo "probe 9a rc $?"
PROBE_CASES=wgrad:11008:4096:256:0.95:float16,wgrad:11008:4096:256:0.98:float16,wgrad:4096:11008:256:0.95:float16,wgrad:4096:11008:256:0.98:float16,wgrad:768:3072:256:0.95:float16,wgrad:4096:4096:256:0.95:bfloat16 \
  PROBE_KERNELS="auto" PROBE_LAYOUTS="A k, B k|A m, B n" OUT=$OUT/probe-shapes python3 scripts/probe_sddmm_layouts.py > $OUT/probe-shapes/probe.log 2>&1; echo "probe shapes rc $?"
for p in 9a shapes; do sed -n '/^case/,$p' $OUT/probe-$p/probe.log; done
timeout 150 stuning bench --suite full --ops sddmm --shapes attention --dtypes fp16 --configs auto --out /tmp/batt > /tmp/batt.log 2>&1
echo "attention rc $?"; mkdir -p $OUT/attention; cp /tmp/batt/results.csv /tmp/batt/summary.md $OUT/attention/ 2>/dev/null
grep -E "^\| sddmm \| fp16 \|" /tmp/batt/summary.md
