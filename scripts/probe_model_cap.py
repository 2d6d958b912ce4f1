"""The cost model's pick over a whole SpMM config space, with its effects capped in different ways,
timed against each entry's tuned config on the GPU (BENCHMARKS.md 8p; ``--dtype`` other than fp16: 8y).

``scripts/bench_lookup.py`` times the model's pick as the library makes it; this times the picks of
variants of ``Coefficients.effect_offset`` on the same problems, in the same run: the summed effects
uncapped, capped at ``EFFECT_CAP`` values, and capped except each kernel's own effect
('kernel=scatter'). For every measured SpMM entry of the database in ``--dtype`` (fp16 unless
given) it rebuilds the problem (bench_lookup.rebuild), checks every config against the fp32
reference before timing it, and prints per variant the geomean and the worst of its pick's time over
the entry's own config's.

    python3 scripts/probe_model_cap.py [--seconds 330] [--variants uncapped,cap0.2,...] [--dtype float32] [--out DIR]
        [--compare OLD_DB_FILE]    # also an old fit's pick, timed in the same run (label 'compare')
        [--picks PICKS_CSV]        # also the picks a --write-picks run wrote (label 'picks')
    python3 scripts/probe_model_cap.py --write-picks PICKS_CSV [--db DB_FILE] [--dtype ...]   # no GPU

``--compare`` ranks with an old fit but today's cost terms; where the terms changed, an old
checkout's own picks come from ``--write-picks`` run on that checkout (``PYTHONPATH=OLD_TREE``), which
ranks each entry's space and writes its pick untimed.

Writes ``variants.csv`` (one row per entry and variant) under ``--out`` (or $OUT).
``TRITON_INTERPRET=1 python3 scripts/probe_model_cap.py --smoke 2`` runs two entries on the CPU at
toy sizes, untimed, to check the script.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import random
from pathlib import Path

import pandas as pd
import torch
from bench_lookup import rebuild, time_once, within_seconds

import stuning.tuning.cost_model.base as cost_base

LIBRARY_OFFSET, LIBRARY_CAP = cost_base.Coefficients.effect_offset, cost_base.EFFECT_CAP


def _beside_kernel(self, config) -> float:
    """The cap on every effect but the kernel's own ('kernel=sell'), which is taken whole."""
    names = cost_base.config_features(config)
    own = sum(self.effects.get(n, 0.0) for n in names if n.startswith("kernel=") and "," not in n)
    rest = sum(self.effects.get(n, 0.0) for n in names) - own
    return own + min(cost_base.EFFECT_CAP, max(-cost_base.EFFECT_CAP, rest))


DEFAULT_VARIANTS = "uncapped,cap0.2,cap0.3,cap0.5,cap0.2-beside-kernel"


def variant(label: str):
    """(effect_offset, EFFECT_CAP) of a label: 'uncapped', 'cap<X>' or 'cap<X>-beside-kernel'."""
    if label == "uncapped":
        return LIBRARY_OFFSET, math.inf
    cap, beside = label.removeprefix("cap").removesuffix("-beside-kernel"), label.endswith("-beside-kernel")
    return (_beside_kernel if beside else LIBRARY_OFFSET), float(cap)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=330.0, help="stop starting entries after this")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS, help="comma-separated: uncapped, cap<X>, "
                    "cap<X>-beside-kernel")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"),
                    help="the entries' dtype")
    ap.add_argument("--compare", type=Path, default=None,
                    help="a database file whose fitted coefficients pick too (label 'compare'): an old fit "
                    "timed beside the current one")
    ap.add_argument("--picks", type=Path, default=None,
                    help="a CSV of key,config that --write-picks wrote: those picks are timed too (label 'picks')")
    ap.add_argument("--write-picks", type=Path, default=None,
                    help="write the library's pick of every entry (key,config) to this CSV, untimed, and stop")
    ap.add_argument("--db", type=Path, default=None, help="the database file to read (default: the shipped one)")
    ap.add_argument("--smoke", type=int, default=0, help="this many entries, toy sizes, on the CPU, untimed")
    args = ap.parse_args(argv)
    variants = {label: variant(label) for label in args.variants.split(",")}
    if not torch.cuda.is_available() and not args.smoke and args.write_picks is None:
        print("probe_model_cap.py: no CUDA device (it times configs)")
        return 0
    from stuning.db import TuningDB
    from stuning.tuning.features import ProblemFeatures
    from stuning.tuning.model_check import open_file
    from stuning.tuning.objective import KernelObjective
    from stuning.tuning.problems import Problem
    from stuning.tuning.registry import family
    from stuning.tuning.session import model_for, open_db, target_spec

    if args.db is not None:
        db = open_file(args.db)
    else:
        db = TuningDB.open("nvidia-h200") if args.smoke else open_db()  # the shipped file, read anywhere
    model = model_for(db, target_spec("nvidia-h200"))
    compare = None
    if args.compare is not None:
        compare = model_for(open_file(args.compare), target_spec("nvidia-h200"))
    fam = family("spmm")
    entries = {k: e for k, e in db.entries(include_stale=bool(args.smoke)).items()
               if e.measured and e.op == "spmm" and e.dtype == args.dtype}
    if args.write_picks is not None:
        return write_picks(args.write_picks, model, fam, entries)
    given = {}
    if args.picks is not None:
        given = {row.key: fam.config_from_dict(ast.literal_eval(row.config))
                 for row in pd.read_csv(args.picks).itertuples()}
    order = sorted(entries)
    random.Random(0).shuffle(order)
    order = order[: args.smoke] if args.smoke else order
    device, cap = ("cpu", 48) if args.smoke else ("cuda", None)
    rows = []
    try:
        for i, key in within_seconds(order, args.seconds):
            entry = entries[key]
            features = ProblemFeatures("spmm", entry.dtype, dict(entry.features))
            picks = {"own": fam.repair(fam.config_from_dict(entry.best.config), features)}
            space = fam.space(features)
            for label, (offset, effect_cap) in variants.items():
                cost_base.Coefficients.effect_offset, cost_base.EFFECT_CAP = offset, effect_cap
                picks[label] = model.rank(features, space)[0][0]
            cost_base.Coefficients.effect_offset, cost_base.EFFECT_CAP = LIBRARY_OFFSET, LIBRARY_CAP
            if compare is not None:
                picks["compare"] = compare.rank(features, space)[0][0]
            if key in given:
                picks["picks"] = given[key]
            run, ref, _ = rebuild("spmm", entry.features, entry.dtype, seed=i, device=device, cap=cap)
            objective = KernelObjective(Problem(None, features, run, ref, {}),
                                        timer=(lambda fn: (fn(), 1.0)[1]) if args.smoke else None)
            timed = {}
            for label, config in picks.items():
                us = time_once(objective, timed, config, f"{key} {label}")
                rows.append({"key": key, "label": label, "kernel": config.kernel, "config": config.as_dict(),
                             "us": us, "n": entry.features["n"], "density": entry.features["density"]})
            print(f"[{i + 1}/{len(order)}] {key}: "
                  + ", ".join(f"{r['label']} {r['us']:.1f}" for r in rows if r["key"] == key), flush=True)
    finally:
        cost_base.Coefficients.effect_offset, cost_base.EFFECT_CAP = LIBRARY_OFFSET, LIBRARY_CAP
    df = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "variants.csv", index=False)
    times = df.pivot_table(index="key", columns="label", values="us", aggfunc="first")
    table = []
    for label in [*variants, *(["compare"] if compare is not None else []), *(["picks"] if given else [])]:
        ratio = (times[label] / times["own"]).dropna()
        table.append({"variant": label, "entries": len(ratio), "geomean": math.exp(ratio.map(math.log).mean()),
                      "worst": ratio.max(), "over 1.5x": int((ratio > 1.5).sum())})
    print(pd.DataFrame(table).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


def write_picks(path: Path, model, fam, entries) -> int:
    import stuning.kernels.spmm_scatter as scatter_kernel

    from stuning.tuning.features import ProblemFeatures
    from stuning.tuning.registry import budget_of
    from stuning.tuning.session import target_spec

    # The H200's space wherever this runs: the scatter kernel is listed even where this Triton lacks
    # its Gluon API (nothing is launched here; the GPU's image has it).
    budget = budget_of(target_spec("nvidia-h200"))
    scatter_kernel.available = lambda: True
    rows = []
    for key in sorted(entries):
        features = ProblemFeatures("spmm", entries[key].dtype, dict(entries[key].features))
        rows.append({"key": key, "config": model.rank(features, fam.space(features, budget))[0][0].as_dict()})
    pd.DataFrame(rows, columns=["key", "config"]).to_csv(path, index=False)
    print(f"probe_model_cap.py: {len(rows)} picks written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
