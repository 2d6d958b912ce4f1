# Session 72's device calls; `bash benchmarks/session72/call.sh STEP` after carrying .whl.
#   1 on either: the whole `pytest -m gpu` (scripts/gpu_tests.sh, owed since session 71's timer
#     change), then trial_time.py: a screen's graph timing with calls counted from GPU time against
#     calls bounded by host time (branch bounded-graph-calls, the checkout this ran on).
#   1q on either, when little device time is left: the timing tests alone (tests/test_timing.py),
#     then trial_time.py.
#   2 on an H100: session 70's step 3 (2:4 tuned there for the first time, then benched in fp16 and
#     bf16); on an H200: the fp32 SpMM first table benched on the entries re-tuned in session 71.
#   3 on an H100: the fp16 and bf16 SpMM first tables benched again with the queued graph timer.
#   4 on an H100: the fp16 and bf16 attention SDDMM suites, then the fp32 SpMM first table, likewise.
source scripts/gpu_env.sh >/dev/null || exit 1
[ -d /tmp/sdb ] || { mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/; }
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
echo "device: $dev; step $1"
T0=$(date +%s); left() { echo $((${CALL_SECONDS:-570} - $(date +%s) + T0)); }
bench_spmm() {  # dtype, seconds
  timeout -s KILL $(($2 + 50)) stuning bench --suite first-table --configs auto --ops spmm --dtypes $1 \
    --max-seconds $2 --out /tmp/bench-$1 > $OUT/bench-spmm-$1.log 2>&1
  echo "bench $1 rc=$?"; cp /tmp/bench-$1/results.csv $OUT/spmm-$1.csv; tail -3 $OUT/bench-spmm-$1.log
}
probe() {
  timeout -s KILL $(($(left) - 5)) python3 benchmarks/session72/trial_time.py $OUT/trial-time.csv \
    $(($(left) - 60)) > $OUT/trial-time.log 2>&1; echo "probe rc=$?"; tail -4 $OUT/trial-time.log
}
bench_attention() {  # dtype
  timeout -s KILL 90 stuning bench --suite full --ops sddmm --shapes attention --configs auto \
    --dtypes $1 --out /tmp/bench-sddmm-$1 > $OUT/bench-sddmm-$1.log 2>&1
  echo "bench sddmm $1 rc=$?"; cp /tmp/bench-sddmm-$1/results.csv $OUT/sddmm-$1.csv; tail -3 $OUT/bench-sddmm-$1.log
}
case "$dev:$1" in
  *:1)
    GPU_TEST_SHARDS=4 GPU_TEST_SECONDS=330 OUT=/tmp/gt bash scripts/gpu_tests.sh; echo "gpu_tests.sh rc=$?"
    for f in /tmp/gt/*.log; do echo "== ${f##*/}"; cat $f; done > $OUT/gpu-tests.log
    grep -hE "passed|failed" /tmp/gt/*.log | tail -6
    probe ;;
  *:1q)
    timeout -s KILL 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_timing.py \
      > $OUT/gpu-timing-tests.log 2>&1; echo "timing tests rc=$?"; tail -3 $OUT/gpu-timing-tests.log
    probe ;;
  *H100*:2) CALL_SECONDS=$(left) bash benchmarks/session70/call.sh 3 ;;
  *H200*:2) bench_spmm fp32 $(($(left) - 70)) ;;
  *H100*:3) bench_spmm fp16 $(( ($(left) - 110) / 2 )); bench_spmm bf16 $(($(left) - 60)) ;;
  *H100*:4) bench_attention fp16; bench_attention bf16; bench_spmm fp32 $(($(left) - 60)) ;;
  *) echo "no step $1 for $dev" ;;
esac
ls $OUT
