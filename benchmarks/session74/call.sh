# Session 74's device calls; `bash benchmarks/session74/call.sh STEP` after carrying .whl.
#   1 on either: the timing tests (owed for f67267a, session 73's review mend), then
#     on an H100 session 70's step 3 (2:4 tuned there for the first time, benched in fp16 and bf16),
#     on an H200 the fp32 SpMM first table on the entries re-tuned in session 71.
#   2 on an H100: the rest of the fp32 SpMM first table on the queued timer.
source scripts/gpu_env.sh >/dev/null || exit 1
[ -d /tmp/sdb ] || { mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/; }
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
echo "device: $dev; step $1"
T0=$(date +%s); left() { echo $((${CALL_SECONDS:-570} - $(date +%s) + T0)); }
timing_tests() {
  timeout -s KILL 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_timing.py \
    > $OUT/gpu-timing-tests.log 2>&1; echo "timing tests rc=$?"; tail -2 $OUT/gpu-timing-tests.log
}
bench_spmm() {  # dtype, seconds
  timeout -s KILL $(($2 + 50)) stuning bench --suite first-table --configs auto --ops spmm --dtypes $1 \
    --max-seconds $2 --out /tmp/bench-$1 > $OUT/bench-spmm-$1.log 2>&1
  echo "bench $1 rc=$?"; cp /tmp/bench-$1/results.csv $OUT/spmm-$1.csv; tail -3 $OUT/bench-spmm-$1.log
}
case "$dev:$1" in
  *H100*:1) timing_tests; CALL_SECONDS=$(left) bash benchmarks/session70/call.sh 3 ;;
  *H200*:1) timing_tests; bench_spmm fp32 $(($(left) - 70)) ;;
  *H100*:2) bench_spmm fp32 $(($(left) - 60)) ;;
  *) echo "no step $1 for $dev" ;;
esac
ls $OUT
