# Session 71's device calls; `bash benchmarks/session71/call.sh STEP`, carrying .whl and .qgt
# (.qgt: `git archive queued-graph-timer stuning tests/test_timing.py tests/conftest.py pyproject.toml`,
# the unmerged timer of session 70, run ahead of the installed project through PYTHONPATH).
#   1 on either: graph_rep.py (main's timer against the queued replay, 9u's suspect), the branch's
#     GPU timing tests, then bench_vs_tuner.py on the branch's timer.
#   2 on either: the fp16 SpMM first table benched with the branch's timer and with main's, in turn;
#     then on an H100 2:4 tuned there for the first time and benched, on an H200 `tune --untried`.
source scripts/gpu_env.sh >/dev/null || exit 1
[ -d /tmp/sdb ] || { mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/; }
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
echo "device: $dev; step $1"
T0=$(date +%s); left() { echo $((${CALL_SECONDS:-570} - $(date +%s) + T0)); }
QGT="env PYTHONPATH=$PWD/.qgt:$PYTHONPATH"; ln -sfn "$PWD/tuning_db" .qgt/tuning_db  # the shipped files, where paths.py looks
case "$1" in
  1)
    timeout -s KILL 270 python3 benchmarks/session70/graph_rep.py $OUT/graph-rep.csv 210 > $OUT/graph-rep.log 2>&1
    echo "graph_rep rc=$?"; tail -3 $OUT/graph-rep.log
    (cd .qgt && $QGT timeout -s KILL 90 python3 -m pytest -m gpu tests/test_timing.py -q -p no:cacheprovider) \
      > $OUT/qgt-tests.log 2>&1; echo "branch gpu timing tests rc=$?"; tail -2 $OUT/qgt-tests.log
    (cd /tmp && $QGT python3 -c "import stuning.tuning.timing as t; assert hasattr(t, 'graph_ms'), t.__file__") || exit 1
    $QGT timeout -s KILL $(($(left) - 5)) python3 benchmarks/session70/bench_vs_tuner.py $OUT/bench-vs-tuner-qgt.csv \
      $(($(left) - 70)) > $OUT/bench-vs-tuner-qgt.log 2>&1; echo "probe rc=$?"; tail -4 $OUT/bench-vs-tuner-qgt.log ;;
  2)
    for t in qgt main; do
      run=$([ $t = qgt ] && echo "$QGT" || echo env)
      $run timeout -s KILL 200 stuning bench --suite first-table --configs auto --ops spmm --dtypes fp16 \
        --max-seconds 150 --out /tmp/bench-$t > $OUT/bench-spmm-fp16-$t.log 2>&1
      echo "bench $t rc=$?"; cp /tmp/bench-$t/results.csv $OUT/spmm-fp16-$t.csv; tail -3 $OUT/bench-spmm-fp16-$t.log
    done
    case $dev in
      *H100*) CALL_SECONDS=$(left) bash benchmarks/session70/call.sh 3 ;;  # its 2:4 tune and bench (not run: an H200 came)
      *H200*)
        timeout -s KILL $(($(left) - 10)) stuning tune --untried --seconds 4 --max-seconds $(($(left) - 70)) --json \
          > $OUT/tune-untried.json 2> $OUT/tune-untried.log; echo "untried rc=$?" ;;
    esac
    cp /tmp/sdb/nvidia-h*.json $OUT/ ;;
  *) echo "no step $1" ;;
esac
ls $OUT
