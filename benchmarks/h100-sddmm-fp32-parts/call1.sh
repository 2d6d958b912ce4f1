# Call 1 (ran in session 64 on an H100, 103 s): the GPU tests the fp32 SDDMM change touches, the probe
# (parts against tf32x3, sampled_addmm, SGEMM), and, on an H200, the fp32 SDDMM first table on the
# shipped entries. Run as: bash benchmarks/h100-sddmm-fp32-parts/call1.sh   (carry .whl)
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
timeout -s KILL 180 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_fp16_split.py tests/test_sddmm_tiled.py \
  -k "sddmm or fp16_split or tiled" 2>&1 | tail -6 | tee $OUT/pytest.txt
PROBE_SHAPES=4096x4096 PROBE_KS=256,2048 PROBE_SPARSITIES=0.7,0.98 \
  timeout -s KILL 100 python3 scripts/probe_sddmm_fp32_parts.py > $OUT/probe.log 2>&1
echo probe_rc=$?
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
case "$dev" in
  *H200*) timeout -s KILL 110 stuning bench --suite first-table --ops sddmm --dtypes fp32 --configs auto \
            --db tuning_db/nvidia-h200.json --out $OUT/bench > $OUT/bench.log 2>&1
          echo bench_rc=$? ;;
  *) echo "bench skipped: the shipped entries are the H200's, this is $dev" | tee $OUT/bench.log ;;
esac
tail -4 $OUT/bench.log
grep '^|' $OUT/probe.log
