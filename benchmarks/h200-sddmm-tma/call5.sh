#!/usr/bin/env bash
# Session 58, device call 5: call 4's attention bench ran stuning.sddmm's host side at 55-120 us a call
# (8y's call 8: 39-83) and the L = 1024 rows 8-18% slower on the same configs. A/B against 8y's code
# (5fafde4, unpacked into oldtree/ by `git archive`, kernels and tuning_db moved under stuning/):
# the host-time probe's SDDMM paths, then the 95/98% attention bench, new / old / new.
# oldtree/ was removed after the call. The bench's "old" run used today's code: `python3 -m` puts the
# checkout ahead of PYTHONPATH on sys.path (the probe, a script, did load the old tree).
set -u
source scripts/gpu_env.sh || exit 1
mkdir -p $OUT
OLD="env PYTHONPATH=$PWD/oldtree:$PYTHONPATH"
$OLD python3 -c "import stuning; print('old tree:', stuning.__file__)"
for side in new old; do
  run=""; [ $side = old ] && run="$OLD"
  script=scripts/probe_host_time.py  # the same probe on both sides
  mkdir -p $OUT/host-$side
  OUT=$OUT/host-$side PROBE_PATHS=sddmm timeout 90 $run python3 $script > $OUT/host-$side/out.txt 2>&1
  echo "host $side rc $?"; grep -v Warning $OUT/host-$side/out.txt | tail -n 8
done
for side in new old new2; do
  run=""; [ $side = old ] && run="$OLD"
  timeout 100 $run python3 -m stuning bench --suite full --ops sddmm --shapes attention --dtypes fp16 \
    --sparsities 95,98 --configs auto --out $OUT/bench-$side > $OUT/bench-$side.txt 2>&1; echo "bench $side rc $?"
done
python3 - <<'PY'
import os, pandas as pd
out = os.environ["OUT"]
t = {s: pd.read_csv(f"{out}/bench-{s}/results.csv").set_index(["m", "k", "sparsity"]) for s in ("new", "old", "new2")}
df = pd.DataFrame({f"{c}_{s}": t[s][c] for s in t for c in ("time_us", "host_us")})
df["dense"] = t["new"]["dense_us"]
df["same_cfg"] = (t["new"]["config"] == t["old"]["config"])
print(df.round(2).to_string())
PY
