# Session 66, call 1 (H100): the H200's shipped entries borrowed by the H100 (how "sibling") against
# the H100's lookup without them (the cost model's picks, or fp16 entries for bf16), on the first
# table's rows the H100 has no entries of its own for: 2:4 (fp16, bf16), fp32 SpMM, bf16 SpMM decode,
# and fp16 SpMM at 70% (12 of its 30 rows untuned on the H100: run B answers them with the nearest).
# Run A reads the shipped databases as they are; run B the same with nvidia-h200.json moved away.
# Usage: bash call1.sh [A] [B] (both by default; one per device call keeps each under 600 s);
# summary.py compares the two once both tars are back.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb /tmp/csv  # the device returns eight files: the CSVs come back as one tar
rm -f /tmp/csv/*.csv  # a warm machine keeps /tmp: run B's tar held run A's CSVs as well
bench() {  # $1: run name; the rest: filters
  local run=$1; shift
  timeout -s KILL $((${BENCH_SECONDS:-100} + 40)) stuning bench --suite first-table --configs auto --max-seconds ${BENCH_SECONDS:-100} "$@" \
    --out /tmp/bench-$run >> $OUT/bench.log 2>&1
  echo "$run rc=$?" | tee -a $OUT/bench.log
  cp /tmp/bench-$run/results.csv /tmp/csv/$run.csv 2>/dev/null
}
for ab in ${@:-A B}; do
  [ $ab = B ] && mv tuning_db/nvidia-h200.json /tmp/ && rm -f /tmp/sdb/*.json
  bench semi24-$ab --ops semi24
  bench spmm-fp32-$ab --ops spmm --dtypes fp32
  bench spmm-bf16-decode-$ab --ops spmm --dtypes bf16 --ns 16,128
  bench spmm-fp16-70-$ab --ops spmm --dtypes fp16 --sparsities 0.7
done
[ -f /tmp/nvidia-h200.json ] && mv /tmp/nvidia-h200.json tuning_db/
tar czf $OUT/csv-${1:-AB}.tar.gz -C /tmp/csv .
