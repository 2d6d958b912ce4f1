# Call 1 (session 65): the GPU tests of the SDDMM tiles' files (one constant moved, PARTS_MIN_CAPABILITY),
# then on an H100 the fp16 SpMM first table's decode rows (N = 16, 128 at 90 / 95%, 40 problems)
# tuned into the H100 database and benched; on an H200, the SDDMM entries `stuning db untried` lists
# re-tuned (benchmarks/h100-sddmm-fp32-parts/call2.sh's H200 branch).
# Run as: bash benchmarks/h100-spmm-fp16/call1.sh   (carry .whl)
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
timeout -s KILL 150 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_fp16_split.py tests/test_sddmm_tiled.py \
  tests/test_sddmm_output_tiles.py -k "sddmm or fp16_split or tiled" 2>&1 | tail -4 | tee $OUT/pytest.txt
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
case "$dev" in
  *H200*)
    timeout -s KILL 330 stuning tune --untried --op sddmm --seconds 6 --json > $OUT/tune-sddmm.json 2> $OUT/tune-sddmm.log
    echo tune_rc=$?
    cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
    stuning db untried --device "NVIDIA H200" --json > $OUT/untried-after.json ;;
  *)
    timeout -s KILL 320 stuning tune --suite first-table --op spmm --dtype fp16 --n 16,128 --sparsity 0.9,0.95 \
      --seconds 5 --json > $OUT/tune-decode.json 2> $OUT/tune-decode.log
    echo tune_rc=$?
    cp /tmp/sdb/*h100*.json $OUT/
    timeout -s KILL 90 stuning bench --suite first-table --ops spmm --dtypes fp16 --ns 16,128 --sparsities 90,95 \
      --configs auto --out $OUT/bench > $OUT/bench.log 2>&1
    echo bench_rc=$?
    tail -25 $OUT/bench.log ;;
esac
