#!/usr/bin/env bash
# Session 59, device call 3: the layers' 2:4 entries (X^T in, Y^T out, key bt=1) were tuned while the
# epilogue stored Y^T in 2-byte pieces; search them again on 0b22573 (16-byte column stores).
set -u
source scripts/gpu_env.sh || exit 1
mkdir -p $OUT
for model in bert_encoder llama_mlp; do
  timeout 280 stuning pretune --model stuning.nn.examples:$model --pattern 2:4 --sparsity 0.5 --tokens 512,2048,8192 \
    --dtype fp16 --seconds 15 --refresh --db $STUNING_DB_DIR --json > $OUT/pretune-$model.json 2> $OUT/pretune-$model.err
  echo "pretune $model rc $?"; tail -n 2 $OUT/pretune-$model.err
done
cp $STUNING_DB_DIR/*.json $OUT/
python3 - <<'PY'
import json, os
out = os.environ["OUT"]
for name in ("pretune-bert_encoder.json", "pretune-llama_mlp.json"):
    try:
        d = json.load(open(f"{out}/{name}"))
    except Exception as e:
        print(name, "unreadable:", e); continue
    rows = d.get("results", d if isinstance(d, list) else [])
    for r in rows:
        if isinstance(r, dict):
            print(name[8:13], r.get("key"), round(r.get("time_us") or 0, 1), "dense", round(r.get("dense_us") or 0, 1), r.get("timed"))
PY
