# Call 1 (with sddmm-fp32-parts.patch applied): the GPU tests the fp32 SDDMM change touches, the probe
# (parts against tf32x3, sampled_addmm, SGEMM), and the fp32 SDDMM first table on the shipped entries.
# Run as: bash benchmarks/h200-sddmm-fp32-parts/call1.sh   (carry .whl; about 9 minutes)
grep -q 'def fp16_parts' kernels/sddmm_tiled.py || { echo 'call1: apply sddmm-fp32-parts.patch first'; exit 2; }
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
timeout -s KILL 240 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_fp16_split.py tests/test_sddmm_tiled.py \
  -k "sddmm or fp16_split or tiled" 2>&1 | tail -6 | tee $OUT/pytest.txt
PROBE_SHAPES=4096x4096,768x3072 PROBE_KS=256,2048 PROBE_SPARSITIES=0.7,0.9,0.98 \
  timeout -s KILL 170 python3 scripts/probe_sddmm_fp32_parts.py > $OUT/probe.log 2>&1
echo probe_rc=$?
timeout -s KILL 120 stuning bench --suite first-table --ops sddmm --dtypes fp32 --configs auto \
  --db tuning_db/nvidia-h200.json --out $OUT/bench > $OUT/bench.log 2>&1
echo bench_rc=$?
tail -4 $OUT/bench.log
grep '^|' $OUT/probe.log
