"""How good is the tuner? The exhaustive oracle against model, model+optuna and the heuristic.

For each problem: every valid config is compiled (in parallel processes), checked against the
reference and timed (the oracle); its five fastest are then re-timed with the full timer, in
alternation with the tuner's and the heuristic's picks, so the ratios compare like with like. The
strategies are replayed on the oracle's timings, so each is judged on the same measurements: the
speed of its pick relative to the oracle's best, how many configs it had to time, and what that
would have cost in compile + timing seconds. The cost model's Spearman rank correlation with the
measured times and whether its top-10 holds the best are reported per op, before and after fitting
its coefficients to these trials.

Measuring writes one folder per problem under ``--out/problems`` and skips problems already there,
so a long run can be split over several GPU sessions (``--ops``, ``--max-seconds``); ``--report``
then builds the tables, plots and fit from those folders on any machine.

Usage (on a GPU, then anywhere):
    python3 scripts/bench_tuner.py --preset tuner-suite --ops spmm --out results/tuner --db-out results/tuner/db
    python3 scripts/bench_tuner.py --preset tuner-suite --out results/tuner --report
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import pandas as pd
import torch

from stuning.suite import SDDMMCase, Semi24Case, SpMMCase, sddmm_suite, semi24_suite, spmm_suite
from stuning.tuning.cost_model import CostModel
from stuning.tuning.device import local_spec
from stuning.tuning.features import ProblemFeatures
from stuning.tuning.objective import KernelObjective
from stuning.tuning.precompile import precompile
from stuning.tuning.problems import build_problem
from stuning.tuning.registry import budget_of, family
from stuning.tuning.search import ModelOptunaSearch, RecordingObjective, TrialFailure
from stuning.tuning.session import key_for, model_for, open_db, outcome_to_entry
from stuning.tuning.timing import bench_us, retime_alternating
from stuning.tuning.tuner import TuneOutcome, default_budget


def _stratified(suite, dtypes, per_dtype: int, seed: int) -> list:
    """A seeded uniform sample of the standard suite, the same count per dtype (other problems each)."""
    return [c for i, dt in enumerate(dtypes) for c in suite(dtypes=[dt], sample=per_dtype, seed=seed + i)]


PRESETS = {
    # The benchmark: 40 problems of the standard suite, every op and dtype.
    "tuner-suite": (
        _stratified(spmm_suite, ["fp32", "fp16", "bf16"], 5, 11) + [SpMMCase(4096, 4096, 16, 0.95, 0.0, "fp16")]
        + _stratified(lambda **kw: sddmm_suite(families=["attention"], **kw), ["fp32", "fp16", "bf16"], 2, 11)
        + _stratified(lambda **kw: sddmm_suite(families=["wgrad"], **kw), ["fp32", "fp16", "bf16"], 2, 11)
        + _stratified(semi24_suite, ["fp16", "bf16"], 6, 11)
    ),
    # Three ops, three dtypes, decode and prefill widths, uniform and skewed rows.
    "tuner-small": [
        SpMMCase(4096, 4096, 16, 0.9, 0.0, "fp16"), SpMMCase(4096, 4096, 128, 0.95, 0.4, "bf16"),
        SpMMCase(3072, 768, 2048, 0.98, 0.0, "fp16"), SpMMCase(768, 3072, 49, 0.9, 0.4, "fp32"),
        SDDMMCase(2048, 2048, 64, 0.95, "fp16", "attention"), SDDMMCase(1024, 1024, 128, 0.9, "bf16", "attention"),
        SDDMMCase(768, 3072, 256, 0.9, "fp32"),
        Semi24Case(4096, 4096, 16, "fp16"), Semi24Case(11008, 4096, 128, "bf16"), Semi24Case(4096, 4096, 2048, "fp16"),
    ],
    # Problems the first shipped fit never saw (other shapes, sparsities, widths), to validate it.
    "tuner-validate": [
        SpMMCase(11008, 4096, 16, 0.95, 0.0, "bf16"), SpMMCase(2048, 512, 512, 0.8, 0.4, "fp16"),
        SpMMCase(4096, 11008, 196, 0.98, 0.0, "fp32"), SpMMCase(512, 512, 8192, 0.9, 0.0, "bf16"),
        SDDMMCase(4096, 4096, 64, 0.98, "bf16", "attention"), SDDMMCase(3072, 768, 2048, 0.95, "fp16"),
        SDDMMCase(2048, 2048, 128, 0.8, "fp32", "attention"),
        Semi24Case(11008, 4096, 16, "bf16"), Semi24Case(768, 3072, 512, "fp16"), Semi24Case(4096, 11008, 100, "fp16"),
    ],
    # For a CPU check of this script through the interpreter (--smoke).
    "smoke": [SpMMCase(32, 64, 16, 0.8, 0.0, "fp16"), SDDMMCase(32, 32, 16, 0.8, "fp32"),
              Semi24Case(32, 64, 16, "bf16")],
}
ORACLE_RETIME = 5  # the oracle's fastest, re-timed with the full timer


def quick_timer(fn) -> float:
    # The oracle times every config: short runs, still medians with L2 flushed (graphs when short).
    if not torch.cuda.is_available():
        return wall_timer(fn)
    return bench_us(fn, warmup_ms=2, rep_ms=6)[0]


def wall_timer(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def final_timer(fn) -> float:
    return bench_us(fn)[0] if torch.cuda.is_available() else wall_timer(fn)


def sweep(case, space, *, workers: int, seconds: float) -> tuple[pd.DataFrame, object]:
    """The oracle: every config checked and timed, in a fixed random order (so a sweep cut short by
    ``seconds`` is a uniform sample, not the model's favourites). Returns its table and the problem."""
    space = list(space)
    random.Random(0).shuffle(space)
    t0 = time.perf_counter()
    if torch.cuda.is_available():
        precompile(case, space, workers=workers)
    compile_s = time.perf_counter() - t0
    problem = build_problem(case)
    objective = KernelObjective(problem, timer=quick_timer)
    rows = []
    start = time.perf_counter()
    for config in space:
        if time.perf_counter() - start > seconds:
            break
        c0 = time.perf_counter()
        try:
            t, status, msg = objective(config), "ok", ""
        except TrialFailure as e:
            t, status, msg = None, e.status, e.message
        rows.append({"config": config, "time_us": t, "status": status, "message": msg,
                     "wall_s": time.perf_counter() - c0 + compile_s / len(space)})
    return pd.DataFrame(rows), problem


def replay(table: pd.DataFrame):
    times = {r.config: r.time_us for r in table.itertuples()}

    def fn(config):
        t = times.get(config)
        if t is None or (isinstance(t, float) and math.isnan(t)):
            raise TrialFailure("failed_in_oracle")
        return t

    return fn


def spearman(a, b) -> float:
    return float(pd.Series(a).rank().corr(pd.Series(b).rank()))


def geomean(s) -> float:
    s = pd.Series(s).dropna()
    return float(math.exp(s.map(math.log).mean())) if len(s) else float("nan")


def measure_problem(case, model: CostModel, device, args, db) -> dict | None:
    """The oracle sweep of one problem and the strategies replayed on it; writes its folder."""
    fam = family(case.op)
    features = build_problem(case).features
    space = fam.space(features, budget_of(device))
    ranked = model.rank(features, space)
    table, problem = sweep(case, [c for c, _ in ranked], workers=args.workers, seconds=args.oracle_seconds)
    predicted = dict(ranked)
    table["predicted_us"] = [predicted[c] for c in table["config"]]
    ok = table[table.status == "ok"]
    if ok.empty:
        print(f"{case.name}: no config ran")
        return None
    replayed = ModelOptunaSearch().search(ranked, RecordingObjective(replay(table)), default_budget(len(space)))
    tuned = replayed.best.config
    visited = {t.config for t in replayed.trials}
    model_pick = next(c for c, _ in ranked if c in set(ok.config))
    heuristic = fam.default(features)
    checker = KernelObjective(problem)
    try:
        checker.check(heuristic)
        heuristic_ok = True
    except TrialFailure:
        heuristic_ok = False
    # The oracle's fastest few, the tuner's and the model's picks and the heuristic, re-timed in turn.
    finalists = list(ok.nsmallest(ORACLE_RETIME, "time_us").config)
    contenders = {("oracle", c) for c in finalists} | {("tuned", tuned), ("model", model_pick)}
    if heuristic_ok:
        contenders.add(("heuristic", heuristic))
    configs = {c for _, c in contenders}
    final = retime_alternating({c: checker.timed(c) for c in configs}, timer=final_timer)
    oracle_config = min(finalists, key=lambda c: (final[c], repr(c)))
    best_t = final[oracle_config]
    top10 = [c for c, _ in ranked[:10]]
    row = {
        "problem": case.name, "op": case.op, "dtype": case.dtype, "space": len(space),
        "oracle_complete": len(table) == len(space), "oracle_timed": int(len(table)),
        "oracle_failed": int((table.status != "ok").sum()), "oracle_us": best_t,
        "oracle_config": json.dumps(oracle_config.as_dict()),
        "tuned_us": final[tuned], "tuned_config": json.dumps(tuned.as_dict()), "tuned_timed": replayed.timed,
        "tuned_fraction": replayed.timed / len(table), "tuned_over_oracle_speed": best_t / final[tuned],
        "model_us": final[model_pick], "model_over_oracle_speed": best_t / final[model_pick],
        "heuristic_us": final[heuristic] if heuristic_ok else float("nan"),
        "tuned_speedup_vs_heuristic": final[heuristic] / final[tuned] if heuristic_ok else float("nan"),
        "spearman_model": spearman(ok.predicted_us, ok.time_us), "best_in_model_top10": oracle_config in top10,
        "oracle_seconds": float(table.wall_s.sum()),
        "tuned_seconds": float(table[table.config.isin(visited)].wall_s.sum()),
        "model_seconds": float(table[table.config == model_pick].wall_s.sum()),
    }
    # Flat files: the device tool brings back files at most three levels deep.
    folder = args.out / "problems"
    folder.mkdir(parents=True, exist_ok=True)
    trials = table.assign(problem=case.name, op=case.op, dtype=features.dtype, features=json.dumps(features.values),
                          config=table.config.map(lambda c: json.dumps(c.as_dict())))
    trials.to_csv(folder / f"{case.name}.trials.csv", index=False)
    (folder / f"{case.name}.json").write_text(json.dumps(row, indent=1, default=float))
    if db is not None:
        outcome = TuneOutcome(features, "exhaustive", True, device.name, oracle_config, best_t,
                              predicted[oracle_config],
                              [{"config": c.as_dict(), "time_us": final[c], "predicted_us": predicted[c]}
                               for c in sorted(finalists, key=lambda c: (final[c], repr(c)))],
                              int(len(table)), len(space), float(table.wall_s.sum()))
        db.put(outcome_to_entry(outcome), key_for(features))
        db.save()
    return row


def measure(args) -> None:
    device = local_spec()
    # --prior: the unfitted analytic model; default: the fit shipped in (or tuned into) the database.
    db = open_db(write_dir=args.db_out) if args.db_out else None
    model = CostModel(device) if args.prior else model_for(db or open_db(), device)
    print(f"cost model: {'analytic prior' if args.prior else 'fitted ' + str(sorted(model.coefficients))}")
    cases = [c for c in PRESETS[args.preset] if not args.ops or c.op in args.ops][: args.limit]
    started = time.perf_counter()
    for case in cases:
        if (args.out / "problems" / f"{case.name}.json").exists():
            continue  # measured by an earlier run
        if time.perf_counter() - started > args.max_seconds:
            print(f"time limit reached: {case.name} and later problems not run")
            break
        row = measure_problem(case, model, device, args, db)
        if row is not None:
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("_config")}, default=str), flush=True)


def report(args) -> None:
    """Tables, plots and a fit from the problem folders (no GPU needed)."""
    names = {c.name for c in PRESETS[args.preset]}
    rows = [json.loads(p.read_text()) for p in sorted((args.out / "problems").glob("*.json")) if p.stem in names]
    if not rows:
        raise SystemExit(f"no measured problems of preset {args.preset} under {args.out / 'problems'}")
    df = pd.DataFrame(rows)
    all_trials = pd.concat(pd.read_csv(args.out / "problems" / f"{r['problem']}.trials.csv") for r in rows)
    model = CostModel(local_spec()) if args.prior else model_for(open_db(), local_spec())
    # Fit the model's coefficients on these trials and report the in-sample rank correlation.
    fitted = {}
    for op, group in all_trials[all_trials.status == "ok"].groupby("op"):
        fam = family(op)
        samples = [(ProblemFeatures(op, r.dtype, json.loads(r.features)), fam.config_from_dict(json.loads(r.config)),
                    r.time_us) for r in group.itertuples()]
        fitted[op] = model.fit(op, samples).as_dict()
        by_problem = {}
        for (f, c, t), p in zip(samples, group.problem, strict=True):
            by_problem.setdefault(p, []).append((model.predict_us(f, c), t))
        rho = {p: spearman(*zip(*pt, strict=True)) for p, pt in by_problem.items()}
        df.loc[df.op == op, "spearman_fitted"] = df.loc[df.op == op, "problem"].map(rho)
    if args.db_out is not None:
        db = open_db(write_dir=args.db_out)
        db.update_model_coefficients(fitted)
        db.save()
    df.to_csv(args.out / "summary.csv", index=False)
    (args.out / "fitted.json").write_text(json.dumps(fitted, indent=2))
    per_op = df.groupby("op").agg(
        problems=("problem", "count"), tuned_over_oracle=("tuned_over_oracle_speed", geomean),
        worst=("tuned_over_oracle_speed", "min"), timed_max=("tuned_fraction", "max"),
        model_over_oracle=("model_over_oracle_speed", geomean), spearman_model=("spearman_model", "mean"),
        spearman_fitted=("spearman_fitted", "mean"), best_in_top10=("best_in_model_top10", "mean"),
        tuned_vs_heuristic=("tuned_speedup_vs_heuristic", geomean), oracle_s=("oracle_seconds", "mean"),
        tuned_s=("tuned_seconds", "mean"), model_s=("model_seconds", "mean"),
    )
    table = per_op.to_markdown(floatfmt=".3f") if _has_tabulate() else per_op.to_string(float_format="{:.3f}".format)
    (args.out / "per_op.md").write_text(table + "\n")
    _plot(df, args.out / "tuner.png")
    print(table)
    print(f"\nall {len(df)} problems: tuned/oracle speed geomean {geomean(df.tuned_over_oracle_speed):.3f} "
          f"(worst {df.tuned_over_oracle_speed.min():.3f}), max fraction timed {df.tuned_fraction.max():.3f}, "
          f"oracle complete for {int(df.oracle_complete.sum())}/{len(df)}; tuned vs heuristic geomean "
          f"{geomean(df.tuned_speedup_vs_heuristic):.2f}x")


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tuner-suite", choices=sorted(PRESETS))
    ap.add_argument("--ops", nargs="*", default=None, help="measure only these ops of the preset")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--oracle-seconds", type=float, default=600, help="cap on one problem's timing sweep")
    ap.add_argument("--max-seconds", type=float, default=480, help="stop starting problems after this")
    ap.add_argument("--out", type=Path, default=Path("results/tuner"))
    ap.add_argument("--db-out", type=Path, default=None, help="directory to write the measured database into")
    ap.add_argument("--smoke", action="store_true", help="tiny problems through the interpreter (no GPU)")
    ap.add_argument("--prior", action="store_true", help="rank with the unfitted analytic model")
    ap.add_argument("--report", action="store_true", help="only build tables, plots and the fit from --out")
    args = ap.parse_args()
    if args.smoke:
        args.preset = "smoke"
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        measure(args)
    report(args)


def _plot(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = df.sort_values(["op", "dtype", "problem"]).reset_index(drop=True)
    fig, ax = plt.subplots(2, 1, figsize=(max(10, 0.32 * len(df)), 8))
    x = range(len(df))
    ax[0].bar([i - 0.2 for i in x], df.tuned_over_oracle_speed, 0.4, label="model+optuna")
    ax[0].bar([i + 0.2 for i in x], df.model_over_oracle_speed, 0.4, label="model only")
    ax[0].axhline(0.95, color="k", lw=0.8, ls="--")
    ax[0].set_xticks(list(x), [], fontsize=6)
    ax[0].set_ylabel("speed relative to the exhaustive oracle")
    ax[0].legend()
    ax[1].bar(x, df.tuned_speedup_vs_heuristic)
    ax[1].axhline(1.0, color="k", lw=0.8)
    ax[1].set_yscale("log")
    ax[1].set_xticks(list(x), df.problem, rotation=80, fontsize=6)
    ax[1].set_ylabel("tuned speedup over the default heuristic")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
