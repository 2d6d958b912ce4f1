#!/usr/bin/env bash
# The whole `pytest -m gpu` in one device call: the collected tests split into shards run side by
# side on the one GPU, then the tests that time the GPU alone.
#
#   bash scripts/gpu_tests.sh [pytest args that select]   # e.g. tests/test_gpu.py -k sddmm
#
# Logs go under $PHASE_OUT (set by gpu_check.sh), else $OUT, else results/gpu-tests.
#
# Run one after another, the suite takes about 12 minutes on an H100 or H200 (BENCHMARKS.md 9m), more
# than a device call's 10; most of it is Triton compiling on the CPU, so three shards on 16 cores took
# 4.6 minutes (9t). Sharing the GPU is harmless for tests that compare results, but not for those that
# time it (tests/test_timing.py), which run after the shards, with the GPU to themselves.
#   GPU_TEST_SHARDS   shards run side by side (default 3)
#   GPU_TEST_SECONDS  a shard is killed after this long (default 480)
#   PYTHON            the interpreter (default python3)
# Exit status: 0 when every shard and the timing tests passed, 1 otherwise.
set -u
OUT=${PHASE_OUT:-${OUT:-results/gpu-tests}}
SHARDS=${GPU_TEST_SHARDS:-3}
SECONDS_EACH=${GPU_TEST_SECONDS:-480}
TIMED=tests/test_timing.py
PY=${PYTHON:-python3}
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 1

ids=$(mktemp)
# The arguments select tests at collection only: the shards get node ids, so a file named there is
# not run again whole by every shard.
"$PY" -m pytest -m gpu --collect-only -q -p no:cacheprovider "$@" 2>/dev/null | grep "::" >"$ids"
if [ ! -s "$ids" ]; then
  echo "gpu_tests.sh: pytest -m gpu $* collected no tests" >&2
  exit 1
fi
grep "^$TIMED::" "$ids" >"$ids.timed"
grep -v "^$TIMED::" "$ids" >"$ids.shared"
status=0
if [ -s "$ids.shared" ]; then
  split -n "r/$SHARDS" -d "$ids.shared" "$ids.shard"
  pids=()
  for shard in "$ids".shard*; do
    [ -s "$shard" ] || continue
    n=${shard##*.shard}
    # Node ids hold no spaces (no parametrize id here does), so word splitting passes them whole.
    # shellcheck disable=SC2046
    timeout -s KILL "$SECONDS_EACH" "$PY" -m pytest -q -p no:cacheprovider -rf $(cat "$shard") \
      >"$OUT/shard$n.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
fi
if [ -s "$ids.timed" ]; then
  # shellcheck disable=SC2046
  timeout -s KILL 120 "$PY" -m pytest -q -p no:cacheprovider -rf $(cat "$ids.timed") >"$OUT/timed.log" 2>&1 ||
    status=1
fi
rm -f "$ids" "$ids".*
for log in "$OUT"/shard*.log "$OUT"/timed.log; do
  [ -f "$log" ] || continue
  last=$(tail -n 1 "$log")
  case $last in
  *passed* | *failed* | *error* | *skipped*) echo "$(basename "$log"): $last" ;;
  *) echo "$(basename "$log"): no pytest summary (killed at GPU_TEST_SECONDS=$SECONDS_EACH?)" ;;
  esac
done
exit $status
