# Session 70's device calls; `bash benchmarks/session70/call.sh STEP` after carrying .whl. Calls 1-2
# ran session 69's step 2 and a bf16 attention tune (benchmarks/session70/README.md).
#   3 on an H100: 2:4 tuned there for the first time (fp16, the first table's 15 problems; bf16
#     looks fp16's entries up), then the 2:4 first table benched in fp16 and bf16.
#   3 on an H200: session 68's H200 phase 1 (the ~100 untried fp32 SpMM entries re-tuned, 450 s).
#   5 on either: bench_vs_tuner.py for 200 s, then on an H100 step 3's 2:4 tune and bench in what is
#     left, on an H200 the untried fp32 SpMM entries re-tuned (one call where a machine is scarce).
#   6 on either (not run yet): graph_rep.py for 300 s, the bench-vs-tuner gap taken apart (9u), then
#     the untried entries `stuning tune --untried` lists re-tuned in what is left.
#   4 on either: the whole `pytest -m gpu` through scripts/gpu_tests.sh (its first whole run), then
#     bench_vs_tuner.py (9t's open question: a slower bench path, or a lucky recorded best?).
source scripts/gpu_env.sh >/dev/null || exit 1
[ -d /tmp/sdb ] || { mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/; }
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
echo "device: $dev; step ${1:-3}"
T0=$(date +%s); left() { echo $((${CALL_SECONDS:-560} - $(date +%s) + T0)); }
case "$dev:${1:-3}" in
  *H100*:3)
    timeout -s KILL $(($(left) - 130)) stuning tune --suite first-table --op semi24 --dtype fp16 --seconds 12 \
      --max-seconds $(($(left) - 170)) > $OUT/tune.log 2>&1
    echo "tune rc=$?"; grep -E "^│ semi24" $OUT/tune.log | cut -c1-60 | head -20; grep -i "left\|not started" $OUT/tune.log | head -3
    timeout -s KILL $(($(left) - 10)) stuning bench --suite first-table --configs auto --ops semi24 --dtypes fp16,bf16 \
      --max-seconds $(($(left) - 40)) --out /tmp/bench-semi24 > $OUT/bench-semi24.log 2>&1
    echo "bench rc=$?"; cp /tmp/bench-semi24/results.csv $OUT/semi24.csv; tail -4 $OUT/bench-semi24.log
    cp /tmp/sdb/nvidia-h100*.json $OUT/ ;;
  *H200*:3) bash benchmarks/session68/call.sh 1 ;;
  *:4)
    GPU_TEST_SHARDS=4 GPU_TEST_SECONDS=330 OUT=/tmp/gt bash scripts/gpu_tests.sh; echo "gpu_tests.sh rc=$?"
    for f in /tmp/gt/*.log; do echo "== ${f##*/}"; cat $f; done > $OUT/gpu-tests.log
    timeout -s KILL $(($(left) - 5)) python3 benchmarks/session70/bench_vs_tuner.py $OUT/bench-vs-tuner.csv \
      > $OUT/bench-vs-tuner.log 2>&1; echo "probe rc=$?"; tail -8 $OUT/bench-vs-tuner.log ;;
  *:5)
    timeout -s KILL 260 python3 benchmarks/session70/bench_vs_tuner.py $OUT/bench-vs-tuner.csv 200 \
      > $OUT/bench-vs-tuner.log 2>&1; echo "probe rc=$?"; tail -7 $OUT/bench-vs-tuner.log
    case $dev in
      *H100*)
        timeout -s KILL $(($(left) - 100)) stuning tune --suite first-table --op semi24 --dtype fp16 --seconds 12 \
          --max-seconds $(($(left) - 140)) > $OUT/tune.log 2>&1
        echo "tune rc=$?"; grep -E "^│ semi24" $OUT/tune.log | cut -c1-60 | head -20
        timeout -s KILL $(($(left) - 10)) stuning bench --suite first-table --configs auto --ops semi24 \
          --dtypes fp16,bf16 --max-seconds $(($(left) - 40)) --out /tmp/bench-semi24 > $OUT/bench-semi24.log 2>&1
        echo "bench rc=$?"; cp /tmp/bench-semi24/results.csv $OUT/semi24.csv; tail -4 $OUT/bench-semi24.log ;;
      *H200*)
        timeout -s KILL $(($(left) - 10)) stuning tune --untried --op spmm --seconds 4 --max-seconds $(($(left) - 70)) \
          --json > $OUT/tune-untried-spmm.json 2> $OUT/tune-untried-spmm.log; echo "untried rc=$?" ;;
    esac
    cp /tmp/sdb/nvidia-h*.json $OUT/ ;;
  *:6)
    timeout -s KILL 360 python3 benchmarks/session70/graph_rep.py $OUT/graph-rep.csv 300 > $OUT/graph-rep.log 2>&1
    echo "graph_rep rc=$?"; tail -4 $OUT/graph-rep.log
    timeout -s KILL $(($(left) - 10)) stuning tune --untried --seconds 4 --max-seconds $(($(left) - 70)) --json \
      > $OUT/tune-untried.json 2> $OUT/tune-untried.log; echo "untried rc=$?"
    cp /tmp/sdb/nvidia-h*.json $OUT/ ;;
  *) echo "no step ${1:-3} for $dev" ;;
esac
ls $OUT
