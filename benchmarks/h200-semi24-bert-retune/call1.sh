#!/usr/bin/env bash
# Session 58, device call 6 (this directory's call 1): the 2:4 entries of BERT's shapes at N >= 512 run
# 0.65-0.8x cuBLAS and date from 2026-11-25 searches of 4-5 s (7-22 configs timed). Search them again
# with 20 s each: the layers' X^T entries (bt=1) by pretune, X's by tune; then the bench on them.
set -u
source scripts/gpu_env.sh || exit 1
mkdir -p $OUT
timeout 250 stuning pretune --model stuning.nn.examples:bert_encoder --pattern 2:4 --tokens 512,2048,8192 \
  --dtype fp16 --seconds 20 --refresh --db $STUNING_DB_DIR --json > $OUT/pretune-bert.json 2> $OUT/pretune-bert.err
echo "pretune rc $?"
timeout 170 stuning tune --op semi24 --shape 768x768,768x3072,3072x768 --n 2048,8192 --dtype fp16 --seconds 20 \
  --json > $OUT/tune-semi24.json 2> $OUT/tune-semi24.err
echo "tune rc $?"; cp $STUNING_DB_DIR/*.json $OUT/
timeout 90 stuning bench --suite full --ops semi24 --shapes bert --dtypes fp16 --ns 512,2048,8192 --configs auto \
  --out $OUT/bench-semi24 > $OUT/bench.txt 2>&1; echo "bench rc $?"
grep -A8 "Geomean speedups per op and dtype" $OUT/bench-semi24/summary.md
python3 - <<'PY'
import json, os
out = os.environ["OUT"]
for name in ("pretune-bert.json", "tune-semi24.json"):
    try:
        d = json.load(open(f"{out}/{name}"))
    except Exception as e:
        print(name, "unreadable:", e); continue
    rows = d.get("results", d if isinstance(d, list) else [])
    for r in rows:
        if isinstance(r, dict):
            print(name[:7], r.get("key"), round(r.get("time_us") or 0, 1), "dense", round(r.get("dense_us") or 0, 1), r.get("timed"))
PY
