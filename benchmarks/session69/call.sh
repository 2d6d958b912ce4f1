# Session 69's device calls; `bash benchmarks/session69/call.sh STEP` after carrying .whl. The
# scratch database (/tmp/sdb) lives as long as the machine stays warm; every call returns it.
#   1 on an H100: the whole `pytest -m gpu` (gpu_tests below), then the fp32 SpMM first table's last
#     eight problems without an H100 entry tuned, and that table benched.
#   1 on an H200: session 68's phase 0 (the fp32 SpMM first table benched with and without the H100's
#     file: the sibling stand-ins timed), then its phase 1 cut to 230 s (stale fp32 entries re-tuned).
#   2 on an H200: the whole `pytest -m gpu`, then the fp32 SpMM first table benched again.
source scripts/gpu_env.sh >/dev/null || exit 1
[ -d /tmp/sdb ] || { mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/; }
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
echo "device: $dev; step ${1:-1}"
gpu_tests() {  # three shards side by side (correctness only: they share the GPU), then the two timing tests alone
  python3 -m pytest -m gpu --collect-only -q -p no:cacheprovider 2>/dev/null | grep "::" |
    grep -v "tests/test_timing.py" > /tmp/ids
  split -n r/3 -d /tmp/ids /tmp/shard
  for s in /tmp/shard0*; do
    timeout -s KILL 380 python3 -m pytest -q -p no:cacheprovider -rf $(cat $s) > $OUT/pytest-${s##*/}.log 2>&1 &
  done
  wait
  timeout -s KILL 60 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_timing.py > $OUT/pytest-timing.log 2>&1
  for f in $OUT/pytest-*.log; do echo "${f##*/}: $(tail -1 $f)"; done
}
bench_fp32() {  # $1: seconds
  timeout -s KILL $(($1 + 40)) stuning bench --suite first-table --configs auto --max-seconds $1 --ops spmm \
    --dtypes fp32 --out /tmp/bench-spmm-fp32 > $OUT/bench-spmm-fp32.log 2>&1
  echo "bench rc=$?"; cp /tmp/bench-spmm-fp32/results.csv $OUT/spmm-fp32.csv; tail -4 $OUT/bench-spmm-fp32.log
}
case "$dev:${1:-1}" in
  *H100*:1) gpu_tests
    f32="stuning tune --suite first-table --op spmm --dtype fp32 --seconds 4"
    { timeout -s KILL 60 $f32 --shape 4096x11008 --n 128,2048 --sparsity 0.7 --max-seconds 35
      timeout -s KILL 70 $f32 --n 16 --sparsity 0.7 --max-seconds 50
    } > $OUT/tune.log 2>&1; echo "tunes done"
    bench_fp32 80 ;;
  *H200*:1) bash benchmarks/session68/call.sh 0
    timeout -s KILL 290 stuning tune --untried --op spmm --seconds 4 --max-seconds 230 --json \
      > $OUT/tune-untried-spmm.json 2> $OUT/tune-untried-spmm.log; echo "untried spmm rc=$?"
    stuning db untried --device "$dev" --op spmm --json 2>/dev/null |
      python3 -c "import json,sys; print(len(json.load(sys.stdin)['entries']), 'spmm entries still untried')" ;;
  *H200*:2) gpu_tests; bench_fp32 100 ;;
  *) echo "no step ${1:-1} for $dev" ;;
esac
cp /tmp/sdb/nvidia-h*.json $OUT/ 2>/dev/null; ls $OUT
