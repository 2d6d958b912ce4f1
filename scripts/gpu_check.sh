#!/usr/bin/env bash
# One device call: the GPU tests, then the timings a kernel change moves, phase by phase.
#
#   bash scripts/gpu_check.sh tests semi24 spmm sddmm     # any subset, in this order
#
# Each phase writes its log (and its benchmark files) under $OUT/<phase>/ and one line to
# $OUT/phases.txt; a phase that fails does not stop the next, and no phase starts once
# GPU_CHECK_SECONDS (default 540: a call is cut at 600) have gone by. The table printed last is
# phases.txt. Needs a CUDA GPU; STUNING_DB_DIR decides where tuned configs go (a scratch dir is best:
# they are copied from it into tuning_db/ deliberately, not as a side effect).
set -u
OUT=${OUT:-results/gpu-check}
BUDGET=${GPU_CHECK_SECONDS:-540}
DB=${STUNING_DB_DIR:-/tmp/stuning-gpu-check-db}
export STUNING_DB_DIR=$DB
mkdir -p "$OUT"
START=$(date +%s)

phase() {
  local name=$1
  shift
  local dir="$OUT/$name" t0 rc
  if (($(date +%s) - START > BUDGET)); then
    echo "$name skipped (over ${BUDGET}s)" | tee -a "$OUT/phases.txt"
    return
  fi
  mkdir -p "$dir"
  t0=$(date +%s)
  (cd "$(dirname "$0")/.." && PHASE_OUT="$dir" "$@") >"$dir/log.txt" 2>&1
  rc=$?
  echo "$name rc=$rc $(($(date +%s) - t0))s $(tail -n 1 "$dir/log.txt" | cut -c1-120)" | tee -a "$OUT/phases.txt"
}

run_phase() {
  case $1 in
  tests)
    # Sharded side by side (scripts/gpu_tests.sh): one after another the suite outlasts a call.
    phase tests bash scripts/gpu_tests.sh
    ;;
  semi24)
    # The rebuilt kernel (current) against mode 1 (its predecessor) and a dense tile, one run.
    phase semi24-probe env PROBE_MODES=0,1 PROBE_CURRENT=1 PROBE_CONFIGS=16 OUT="$OUT/semi24-probe" \
      python3 scripts/probe_semi24_designs.py
    phase semi24-tune stuning tune --op semi24 --shape 4096x4096,11008x4096,4096x11008 --n 16,128,2048 \
      --dtype fp16 --strategy model+optuna --seconds ${TUNE_SECONDS:-6} --json
    phase semi24-bench sh -c 'stuning bench --suite first-table --ops semi24 --shapes llama7b --dtypes fp16,bf16 \
      --configs auto --out "$PHASE_OUT"'
    ;;
  spmm)
    phase spmm-tune stuning tune --op spmm --shape 4096x4096 --n 16,128 --sparsity 0.9,0.95,0.98 --dtype fp16 \
      --strategy model+optuna --seconds ${TUNE_SECONDS:-6} --json
    phase spmm-bench sh -c 'stuning bench --suite first-table --ops spmm --shapes 4096x4096 --ns 16,128,2048 \
      --sparsities 90,95,98 --dtypes fp16 --configs auto --out "$PHASE_OUT"'
    ;;
  sddmm)
    phase sddmm-tune stuning tune --op sddmm --shape 4096x4096 --n 64,128 --sparsity 0.8,0.9,0.95,0.98 \
      --dtype fp16 --strategy model+optuna --seconds ${TUNE_SECONDS:-6} --json
    phase sddmm-bench sh -c 'stuning bench --suite full --ops sddmm --shapes attention --ks 64,128 \
      --sparsities 80,90,95,98 --dtypes fp16,bf16 --configs auto --out "$PHASE_OUT"'
    ;;
  spmm-latency)
    # The CSR kernel's prefetch and longer steps against its plain loop and cuBLAS (decode sizes).
    phase spmm-latency env OUT="$OUT/spmm-latency" PROBE_SECONDS=${PROBE_SECONDS:-240} python3 scripts/probe_spmm_latency.py
    ;;
  *)
    echo "gpu_check.sh: unknown phase $1 (tests, semi24, spmm, sddmm, spmm-latency)" >&2
    exit 2
    ;;
  esac
}

[ $# -gt 0 ] || set -- tests semi24 spmm sddmm
for p in "$@"; do run_phase "$p"; done
echo "== phases ($(($(date +%s) - START))s)"
cat "$OUT/phases.txt"
