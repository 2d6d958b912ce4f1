# Session 66, call 1 (H100): the H200's shipped entries borrowed by the H100 (how "sibling") against
# the H100's lookup without them (the cost model's picks, or fp16 entries for bf16), on the first
# table's rows the H100 has no entries of its own for: 2:4 (fp16, bf16), fp32 SpMM, bf16 SpMM decode,
# and fp16 SpMM at 70% (12 of its 30 rows untuned on the H100: run B answers them with the nearest).
# Run A reads the shipped databases as they are; run B the same with nvidia-h200.json moved away.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb /tmp/csv  # the device returns eight files: the CSVs come back as one tar
bench() {  # $1: run name; the rest: filters
  local run=$1; shift
  timeout -s KILL 150 stuning bench --suite first-table --configs auto --max-seconds 110 "$@" \
    --out /tmp/bench-$run >> $OUT/bench.log 2>&1
  echo "$run rc=$?" | tee -a $OUT/bench.log
  cp /tmp/bench-$run/results.csv /tmp/csv/$run.csv 2>/dev/null
}
for ab in A B; do
  [ $ab = B ] && mv tuning_db/nvidia-h200.json /tmp/ && rm -f /tmp/sdb/*.json
  bench semi24-$ab --ops semi24
  bench spmm-fp32-$ab --ops spmm --dtypes fp32
  bench spmm-bf16-decode-$ab --ops spmm --dtypes bf16 --ns 16,128
  bench spmm-fp16-70-$ab --ops spmm --dtypes fp16 --sparsities 0.7
done
mv /tmp/nvidia-h200.json tuning_db/
python3 - <<'PY'
import os, pandas as pd, numpy as np
out = "/tmp/csv"
g = lambda s: float(np.exp(np.log(s).mean()))
for name in ("semi24", "spmm-fp32", "spmm-bf16-decode", "spmm-fp16-70"):
    a, b = (pd.read_csv(f"{out}/{name}-{x}.csv") for x in "AB")
    j = a.merge(b, on="name", suffixes=("_a", "_b"))
    print(name, len(j), "rows; sources A:", dict(a.config_source.value_counts()), "B:", dict(b.config_source.value_counts()))
    print(f"  A (sibling) / B time: geomean {g(j.time_us_a / j.time_us_b):.3f}, worst {(j.time_us_a / j.time_us_b).max():.2f}, best {(j.time_us_a / j.time_us_b).min():.2f}")
    print(f"  x dense A {g(a.speedup_vs_dense):.3f}  B {g(b.speedup_vs_dense):.3f}; wrong A {int((a.ok != True).sum())} B {int((b.ok != True).sum())}")
PY
tar czf $OUT/csv.tar.gz -C /tmp/csv .
