"""Leave-one-out replay of the database's answer for an unseen key, timed on the GPU.

A problem with no entry of its own gets the config of the nearest entry within a distance limit
(``stuning.ops.selection``), else the cost model's pick. Whether a neighbour beats the model
depends on how distance is measured. This takes each measured entry of an op (``--op``: SpMM or
SDDMM) out of the shipped database in turn, rebuilds its problem from its features (random inputs
of its shape, density and row skew), and times on it:
- its own config (what tuning it found: the reference every other time is divided by),
- the cost model's pick,
- the nearest other entry's config (repaired for the problem) under each distance in ``METRICS``,
- of the ``NEAREST_K`` nearest entries' configs, the one the cost model ranks first.
Every config is checked against the fp32 reference before it is timed (the tuner's check). The
policies (a distance and a limit, the model past it) are then scored offline: per policy the
geomean and the worst of its pick's time over the own config's, and how often it fell back.

    python3 scripts/bench_lookup.py [--op spmm] [--seconds 400] [--dtypes float16,float32] [--out DIR]
    python3 scripts/bench_lookup.py --op sddmm --natural-rows    # masks as thresholding makes them

``--natural-rows``: each entry's problem is rebuilt with every element of its sparse matrix (SDDMM:
its mask) kept independently, so row lengths are binomial, as thresholding (magnitude pruning, a
random attention mask) leaves them, where the entries' matrices have even or skewed rows. Such a
problem keys apart from the entry it was built from (its row skew differs), so nothing is left out:
that entry is "own", and every entry is a neighbour.

Writes ``lookup.csv`` (one row per entry and candidate) and ``policies.csv`` under ``--out`` (or
$OUT); prints the policy table last. ``TRITON_INTERPRET=1 python3 scripts/bench_lookup.py --smoke 3``
runs three entries on the CPU at toy sizes with no timing (every time 1 us), to check the script.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from pathlib import Path

import pandas as pd
import torch

from stuning.db.entry import RATIO, feature_distance
from stuning.tuning.features import NEAREST_FEATURES, ProblemFeatures

SIZES = ("m", "k", "n")
# How each candidate distance compares the features (``stuning.db.feature_distance``).
METRICS = {
    # The library's before BENCHMARKS.md 7q: log2(1 + x) of the sizes, density and row_cv.
    "log1p": (*SIZES, "density", "row_cv"),
    # Density as a ratio: 90% and 95% zeros are a factor of 2 apart, as N = 64 and 128 are.
    "log-density": {**dict.fromkeys((*SIZES, "density"), RATIO), "row_cv": None},
    # ... and row skew by difference, 0.25 as far as a doubling: SpMM's since 7q.
    "log-density+cv": {**dict.fromkeys((*SIZES, "density"), RATIO), "row_cv": 0.25},
}
LIMITS = (0.25, 0.5, 1.0, 1.5, 2.0, math.inf)
# One more policy: the configs of the NEAREST_K nearest entries (the library's distance), the one the
# cost model predicts fastest; where neighbours disagree on the kernel (a density at which the best
# kernel flips), the model arbitrates between them instead of searching the whole space.
NEAREST_K = 3
POLICIES = (*METRICS, f"{NEAREST_K}-model")


def rebuild(op: str, features: dict, dtype: str, seed: int, device: str, cap: int | None = None,
            natural_rows: bool = False):
    """(run, reference, features) on random inputs with the entry's sizes (each at most ``cap``),
    density, row skew and operand layout; for SpMM also its row padding. ``natural_rows``: each element of
    the sparse matrix (SDDMM's mask) kept independently, and the features those of the matrix made."""
    from stuning.formats import CSRMatrix
    from stuning.matrices import random_sparse
    from stuning.suite import SDDMMCase
    from stuning.tuning.features import spmm_features
    from stuning.tuning.launch import launch_spmm
    from stuning.tuning.problems import build_problem
    from stuning.tuning.registry import TORCH_DTYPES

    m, k, n = (min(int(features[f]), cap or math.inf) for f in SIZES)
    if op == "sddmm" and natural_rows:
        return natural_sddmm(m, n, k, features["density"], dtype, seed, device)
    if op == "sddmm":  # every shipped SDDMM entry has even rows, as the suite's masks
        short = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[dtype]  # the suite's names
        case = SDDMMCase(m, n, k, 1.0 - features["density"], short, k_strided=bool(features.get("a_t")))
        problem = build_problem(case, device=device, seed=seed)
        return problem.run, problem.reference, features
    dt = TORCH_DTYPES[dtype]
    gen = torch.Generator(device=device).manual_seed(seed)
    if natural_rows:
        keep = torch.rand(m, k, generator=gen, device=device) < features["density"]
        dense = torch.where(keep, torch.randn(m, k, generator=gen, device=device), 0.0).to(dt)
    else:
        dense = random_sparse(m, k, 1.0 - features["density"], skew_cv=features["row_cv"], dtype=dt, device=device,
                              generator=gen)
    a = CSRMatrix.from_dense(dense, pad_to=int(features.get("pad_to", 1)))
    shape = (n, k) if features.get("b_t") else (k, n)
    b = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dt)
    b = b.t() if features.get("b_t") else b
    if natural_rows:
        features = spmm_features(a, n, dt, b_transposed=bool(features.get("b_t"))).values
    return (lambda c, out=None: launch_spmm(a, b, c, out=out)), dense.float() @ b.float(), features


def natural_sddmm(m: int, n: int, k: int, density: float, dtype: str, seed: int, device: str):
    """An SDDMM problem whose mask keeps each element with probability ``density``: (run, reference,
    features of that mask)."""
    from stuning.formats import CSRMatrix
    from stuning.suite import SDDMMCase
    from stuning.tuning.problems import sddmm_problem_on
    from stuning.tuning.registry import TORCH_DTYPES

    gen = torch.Generator(device=device).manual_seed(seed)
    keep = torch.rand(m, n, generator=gen, device=device) < density
    mask = torch.where(keep, torch.randn(m, n, generator=gen, device=device), 0.0).to(TORCH_DTYPES[dtype])
    short = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[dtype]  # the suite's names
    problem = sddmm_problem_on(SDDMMCase(m, n, k, 1.0 - density, short), CSRMatrix.from_dense(mask), gen)
    return problem.run, problem.reference, problem.features.values


def candidates(key: str, entry, entries: dict, model, fam, problem_values: dict | None = None) -> dict[str, object]:
    """label -> config for one entry's problem: the entry's own, the model's, each metric's nearest
    other entry. ``problem_values``: the problem's features, where they are not the entry's (natural
    rows); then every entry, the own one too, is a neighbour."""
    keep_own = problem_values is not None
    values = problem_values if keep_own else entry.features
    features = ProblemFeatures(entry.op, entry.dtype, values)
    out = {"own": fam.repair(fam.config_from_dict(entry.config), features),
           "model": model.rank(features, fam.space(features))[0][0]}
    others = {k: e for k, e in entries.items() if (keep_own or k != key) and e.dtype == entry.dtype}
    for name, how in METRICS.items():
        dist, other = min(((feature_distance(values, e.features, how), k) for k, e in others.items()),
                          default=(None, None))
        if other is not None:
            out[f"near:{name}"] = fam.repair(fam.config_from_dict(others[other].config), features)
            out[f"dist:{name}"] = dist
    how = NEAREST_FEATURES[entry.op]
    nearest = sorted((feature_distance(values, e.features, how), k) for k, e in others.items())[:NEAREST_K]
    if nearest:
        configs = [fam.repair(fam.config_from_dict(others[k].config), features) for _, k in nearest]
        out[f"near:{NEAREST_K}-model"] = model.rank(features, configs)[0][0]
        out[f"dist:{NEAREST_K}-model"] = nearest[0][0]
    return out


def within_seconds(items: list, seconds: float):
    """(index, item) of ``items`` while under ``seconds`` since the first; says where it stopped."""
    started = time.perf_counter()
    for i, item in enumerate(items):
        if time.perf_counter() - started > seconds:
            print(f"stopped after {i} of {len(items)} entries: over {seconds:g} s")
            return
        yield i, item


def time_once(objective, timed: dict, config, what: str) -> float:
    """``objective``'s time for ``config``, timed once per distinct config (``timed``: by its text);
    NaN, reported as ``what``, for one that fails its check."""
    from stuning.tuning.search import TrialFailure

    name = repr(config)
    if name not in timed:
        try:
            timed[name] = objective(config)
        except TrialFailure as e:
            timed[name] = float("nan")
            print(f"{what}: {e.status}: {e.message}")
    return timed[name]


def score(df: pd.DataFrame) -> pd.DataFrame:
    """Each policy's geomean and worst time over the own config's, and its fallback rate."""
    rows = []
    per_entry = {key: g.set_index("label") for key, g in df.groupby("key")}
    for name in POLICIES:
        for limit in LIMITS:
            ratios, fell, seen = [], 0, 0
            for g in per_entry.values():
                if "own" not in g.index or not pd.notna(g.at["own", "us"]):
                    continue
                seen += 1
                use_near = f"near:{name}" in g.index and g.at[f"near:{name}", "distance"] <= limit
                fell += not use_near
                label = f"near:{name}" if use_near else "model"
                if pd.notna(g.at[label, "us"]):
                    ratios.append(g.at[label, "us"] / g.at["own", "us"])
            if ratios:
                rows.append({"metric": name, "limit": limit, "entries": len(ratios),
                             "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)), "worst": max(ratios),
                             "fallback": fell / seen})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=400.0, help="stop starting entries after this")
    ap.add_argument("--op", default="spmm", choices=["spmm", "sddmm"])
    ap.add_argument("--dtypes", default="float16,float32")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--smoke", type=int, default=0, help="this many entries, toy sizes, on the CPU, untimed")
    ap.add_argument("--natural-rows", action="store_true",
                    help="each element of the sparse matrix kept independently (see the module docstring)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() and not args.smoke:
        print("bench_lookup.py: no CUDA device (it times configs)")
        return 0
    device, cap = ("cpu", 48) if args.smoke else ("cuda", None)
    from stuning.ops.selection import SELECTOR
    from stuning.tuning.objective import KernelObjective
    from stuning.tuning.problems import Problem
    from stuning.tuning.registry import family

    fam = family(args.op)
    if args.smoke:  # the shipped H200 database, read on a machine that is not one
        from stuning.db import TuningDB
        from stuning.tuning.session import model_for, target_spec

        db = TuningDB.open("nvidia-h200")
        model = model_for(db, target_spec("nvidia-h200"))
    else:
        db, model = SELECTOR.db(), SELECTOR.model()
    entries = {k: e for k, e in db.entries(include_stale=bool(args.smoke)).items()
               if e.op == args.op and e.measured and e.dtype in args.dtypes.split(",")}
    order = sorted(entries)
    random.Random(0).shuffle(order)
    order = order[: args.smoke] if args.smoke else order
    rows = []
    for i, key in within_seconds(order, args.seconds):
        entry = entries[key]
        run, ref, values = rebuild(args.op, entry.features, entry.dtype, seed=i, device=device, cap=cap,
                                   natural_rows=args.natural_rows)
        found = candidates(key, entry, entries, model, fam, values if args.natural_rows else None)
        problem = Problem(None, ProblemFeatures(args.op, entry.dtype, values), run, ref, {})
        objective = KernelObjective(problem, timer=(lambda fn: (fn(), 1.0)[1]) if args.smoke else None)
        timed = {}
        for label, config in found.items():
            if label.startswith("dist:"):
                continue
            us = time_once(objective, timed, config, f"{key} {label}")
            metric = label.split(":", 1)[1] if ":" in label else None
            rows.append({"key": key, "dtype": entry.dtype, "label": label, "config": config.as_dict(),
                         "us": us, "distance": found.get(f"dist:{metric}") if metric else 0.0,
                         "recorded_us": entry.best.time_us})
        print(f"[{i + 1}/{len(order)}] {key}: " + ", ".join(
            f"{r['label']} {r['us']:.1f}" for r in rows if r["key"] == key), flush=True)
    df = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "lookup.csv", index=False)
    table = score(df)
    table.to_csv(out / "policies.csv", index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
