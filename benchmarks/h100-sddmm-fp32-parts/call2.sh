# Call 2 (ran in session 64 on an H100, its second branch; the H200 branch, with --max-seconds and the
# fp32 table benched after, written for session 67): the
# SDDMM entries `stuning db untried` lists on the GPU's Triton re-tuned (fp32 on the new tiles; fp16 / fp32 ones that never tried the dense kernel), then
# merged by hand into tuning_db/nvidia-h200.json:
#   python3 -m stuning db merge --device "NVIDIA H200" --out tuning_db/nvidia-h200.json \
#     tuning_db/nvidia-h200.json <files_at>/db-after.json
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
case "$dev" in
  *H200*)
    stuning db untried --device "NVIDIA H200" --json > $OUT/untried-before.json
    timeout -s KILL $((${TUNE_SECONDS:-360} + 40)) stuning tune --untried --op sddmm --seconds 6 --max-seconds ${TUNE_SECONDS:-360} --json \
      > $OUT/tune-sddmm.json 2> $OUT/tune-sddmm.log
    echo sddmm_rc=$?
    cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
    stuning db untried --device "NVIDIA H200" --json > $OUT/untried-after.json
    python3 -c "import json; print(len(json.load(open('$OUT/untried-after.json'))['entries']), 'entries still untried')"
    # the fp32 table on the re-tuned entries (CSV and log only: the device returns eight files)
    timeout -s KILL ${BENCH_SECONDS:-140} stuning bench --suite first-table --ops sddmm --dtypes fp32 --configs auto \
      --out /tmp/bench > $OUT/bench.log 2>&1
    echo bench_rc=$?
    cp /tmp/bench/results.csv $OUT/ 2>/dev/null
    tail -12 $OUT/bench.log ;;
  *)  # An H100: its database has no entries to re-tune, so tune the fp32 first table there and bench it.
    timeout -s KILL 330 stuning tune --suite first-table --op sddmm --dtype fp32 --seconds 6 --json \
      > $OUT/tune-sddmm.json 2> $OUT/tune-sddmm.log
    echo sddmm_rc=$?
    cp /tmp/sdb/*h100*.json $OUT/ 2>/dev/null
    timeout -s KILL 150 stuning bench --suite first-table --ops sddmm --dtypes fp32 --configs auto \
      --out $OUT/bench > $OUT/bench.log 2>&1
    echo bench_rc=$?
    tail -30 $OUT/bench.log ;;
esac
