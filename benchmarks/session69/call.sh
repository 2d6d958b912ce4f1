# Session 69's device calls; `bash benchmarks/session69/call.sh STEP` after carrying .whl. The
# scratch database (/tmp/sdb) lives as long as the machine stays warm; every call returns it.
#   1 on an H100: the whole `pytest -m gpu` (gpu_tests below), then, in what is left of 560 s, the
#     fp32 SpMM first table's last eight problems without an H100 entry tuned.
#   1 on an H200: session 68's phase 0 (the fp32 SpMM first table benched with and without the H100's
#     file: the sibling stand-ins timed), then the whole `pytest -m gpu` in what is left of 560 s.
#   2 on an H100 (not run yet): scripts/gpu_tests.sh on a small selection (its first run on a GPU),
#     then the bf16 SpMM first table (the cuSPARSE ratio the fp16/bf16 target names; 9r timed only
#     its decode rows there) and the bf16 attention SDDMM suite benched.
source scripts/gpu_env.sh >/dev/null || exit 1
[ -d /tmp/sdb ] || { mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/; }
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
echo "device: $dev; step ${1:-1}"
T0=$(date +%s); left() { echo $((${CALL_SECONDS:-560} - $(date +%s) + T0)); }
gpu_tests() {  # three shards side by side (correctness only: they share the GPU), then the two timing tests alone
  python3 -m pytest -m gpu --collect-only -q -p no:cacheprovider 2>/dev/null | grep "::" |
    grep -v "tests/test_timing.py" > /tmp/ids
  split -n r/3 -d /tmp/ids /tmp/shard
  for s in /tmp/shard0*; do
    timeout -s KILL $(($(left) - 40)) python3 -m pytest -q -p no:cacheprovider -rf $(cat $s) > $OUT/pytest-${s##*/}.log 2>&1 &
  done
  wait
  timeout -s KILL 30 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_timing.py > $OUT/pytest-timing.log 2>&1
  for f in $OUT/pytest-*.log; do echo "${f##*/}: $(tail -1 $f)"; done
  for f in $OUT/pytest-*.log; do echo "== ${f##*/}"; cat $f; done > $OUT/pytest.log && rm $OUT/pytest-*.log
}
case "$dev:${1:-1}" in
  *H100*:1) gpu_tests
    f32="stuning tune --suite first-table --op spmm --dtype fp32 --seconds 4"
    if (( $(left) > 90 )); then
      { timeout -s KILL $(($(left) / 2)) $f32 --shape 4096x11008 --n 128,2048 --sparsity 0.7 --max-seconds $(($(left) / 2 - 25))
        timeout -s KILL $(left) $f32 --n 16 --sparsity 0.7 --max-seconds $(($(left) - 25))
      } > $OUT/tune.log 2>&1; echo "tunes done"
    fi ;;
  *H200*:1) bash benchmarks/session68/call.sh 0; rm -f $OUT/nvidia-h*.json; gpu_tests ;;
  *H100*:2) OUT=/tmp/gt bash scripts/gpu_tests.sh tests/test_fp16_split.py tests/test_nn.py tests/test_timing.py
    for f in /tmp/gt/*.log; do echo "== ${f##*/}"; cat $f; done > $OUT/gpu-tests.log
    for spec in "spmm-bf16 first-table 150 --ops spmm" "sddmm-bf16 full 120 --ops sddmm --shapes attention"; do
      set -- $spec
      timeout -s KILL $(($3 + 40)) stuning bench --suite $2 --configs auto --max-seconds $3 --dtypes bf16 "${@:4}" \
        --out /tmp/bench-$1 > $OUT/bench-$1.log 2>&1
      echo "bench $1 rc=$?"; cp /tmp/bench-$1/results.csv $OUT/$1.csv; tail -4 $OUT/bench-$1.log
    done ;;
  *) echo "no step ${1:-1} for $dev" ;;
esac
case $dev in *H100*) cp /tmp/sdb/nvidia-h100*.json $OUT/ ;; esac; ls $OUT
