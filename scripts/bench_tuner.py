"""How good is the tuner? The exhaustive oracle against model, model+optuna and the heuristic.

For each problem: every valid config is compiled (in parallel processes), checked against the
reference and timed (the oracle). The strategies are then replayed on the oracle's timings, so
each is judged on the same measurements: the speed of its pick relative to the oracle's best, how
many configs it had to time, and what that would have cost in compile + timing seconds. The cost
model's Spearman rank correlation with the measured times and whether its top-10 holds the best
are reported per op, before and after fitting its coefficients to these trials.

Usage (on a GPU):
    python3 scripts/bench_tuner.py --preset tuner-small --out results/tuner --db-out tuning_db
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

from stuning.suite import SDDMMCase, Semi24Case, SpMMCase
from stuning.tuning.cost_model import CostModel
from stuning.tuning.device import local_spec
from stuning.tuning.features import ProblemFeatures
from stuning.tuning.objective import KernelObjective
from stuning.tuning.precompile import precompile
from stuning.tuning.problems import build_problem
from stuning.tuning.registry import budget_of, family
from stuning.tuning.search import ModelOptunaSearch, RecordingObjective, TrialFailure
from stuning.tuning.session import key_for, model_for, open_db, outcome_to_entry
from stuning.tuning.timing import bench_us
from stuning.tuning.tuner import TuneOutcome, default_budget

PRESETS = {
    # Three ops, three dtypes, decode and prefill widths, uniform and skewed rows.
    "tuner-small": [
        SpMMCase(4096, 4096, 16, 0.9, 0.0, "fp16"), SpMMCase(4096, 4096, 128, 0.95, 0.4, "bf16"),
        SpMMCase(3072, 768, 2048, 0.98, 0.0, "fp16"), SpMMCase(768, 3072, 49, 0.9, 0.4, "fp32"),
        SDDMMCase(2048, 2048, 64, 0.95, "fp16", "attention"), SDDMMCase(1024, 1024, 128, 0.9, "bf16", "attention"),
        SDDMMCase(768, 3072, 256, 0.9, "fp32"),
        Semi24Case(4096, 4096, 16, "fp16"), Semi24Case(11008, 4096, 128, "bf16"), Semi24Case(4096, 4096, 2048, "fp16"),
    ],
    # Problems the shipped fit never saw (other shapes, sparsities, widths), to validate it.
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


def quick_timer(fn) -> float:
    # The oracle sweep times every config: short runs, still medians with L2 flushed.
    if not torch.cuda.is_available():
        return wall_timer(fn)
    import triton.testing

    return triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median") * 1e3


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
    objective = KernelObjective(problem.run, problem.reference, problem.features.dtype, timer=quick_timer)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tuner-small", choices=sorted(PRESETS))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--oracle-seconds", type=float, default=240, help="cap on one problem's timing sweep")
    ap.add_argument("--max-seconds", type=float, default=480, help="stop starting problems after this")
    ap.add_argument("--oracle-max-configs", type=int, default=0,
                    help="time at most this many configs per problem (0: the whole space)")
    ap.add_argument("--out", type=Path, default=Path("results/tuner"))
    ap.add_argument("--db-out", type=Path, default=None, help="directory to write the measured database into")
    ap.add_argument("--smoke", action="store_true", help="tiny problems through the interpreter (no GPU)")
    ap.add_argument("--prior", action="store_true", help="rank with the unfitted analytic model")
    args = ap.parse_args()
    if args.smoke:
        args.preset = "smoke"
    args.out.mkdir(parents=True, exist_ok=True)
    device = local_spec()
    # --prior: the unfitted analytic model; default: the fit shipped in (or tuned into) the database.
    db = open_db(write_dir=args.db_out) if args.db_out else open_db()
    model = CostModel(device) if args.prior else model_for(db, device)
    print(f"cost model: {'analytic prior' if args.prior else 'fitted ' + str(sorted(model.coefficients))}")
    cases = PRESETS[args.preset][: args.limit]
    summary, trials, started = [], [], time.perf_counter()
    for case in cases:
        if time.perf_counter() - started > args.max_seconds:
            print(f"time limit reached: {case.name} and later problems not run")
            break
        fam = family(case.op)
        features = build_problem(case).features
        space = fam.space(features, budget_of(device))
        ranked = model.rank(features, space)
        candidates = [c for c, _ in ranked]
        if args.oracle_max_configs and len(candidates) > args.oracle_max_configs:
            # A sampled oracle: the model's top 10 and a uniform sample of the rest (reported as such).
            rest = random.Random(1).sample(candidates[10:], args.oracle_max_configs - 10)
            candidates = candidates[:10] + rest
            ranked = [(c, p) for c, p in ranked if c in set(candidates)]
        table, problem = sweep(case, candidates, workers=args.workers, seconds=args.oracle_seconds)
        table["predicted_us"] = [dict(ranked)[c] for c in table["config"]]
        ok = table[table.status == "ok"]
        if ok.empty:
            print(f"{case.name}: no config ran")
            continue
        oracle = ok.loc[ok.time_us.idxmin()]
        # Strategies replayed on the oracle's measurements.
        replayed = ModelOptunaSearch().search(ranked, RecordingObjective(replay(table)),
                                              default_budget(len(space)))
        tuned = replayed.best
        visited = {t.config for t in replayed.trials}
        tuned_cost = float(table[table.config.isin(visited)].wall_s.sum())
        model_pick = next((c for c, _ in ranked if c in set(ok.config)), None)
        model_time = float(ok.set_index("config").time_us[model_pick])
        heuristic = fam.default(features)
        try:
            check = KernelObjective(problem.run, problem.reference, problem.features.dtype, timer=final_timer)
            h_time = check(heuristic)
        except TrialFailure:
            h_time = float("nan")
        best_t = final_timer(lambda c=oracle.config, p=problem: p.run(c))
        tuned_t = final_timer(lambda c=tuned.config, p=problem: p.run(c))
        top10 = [c for c, _ in ranked[:10]]
        row = {
            "problem": case.name, "op": case.op, "dtype": case.dtype, "space": len(space),
            "oracle_complete": len(table) == len(space),
            "oracle_timed": int(len(table)), "oracle_us": best_t, "oracle_config": oracle.config.as_dict(),
            "tuned_us": tuned_t, "tuned_timed": replayed.timed, "tuned_fraction": replayed.timed / len(table),
            "tuned_over_oracle_speed": best_t / tuned_t, "model_us": model_time,
            "model_over_oracle_speed": float(oracle.time_us) / model_time, "heuristic_us": h_time,
            "tuned_speedup_vs_heuristic": h_time / tuned_t, "spearman_model": spearman(ok.predicted_us, ok.time_us),
            "best_in_model_top10": oracle.config in top10, "oracle_seconds": float(table.wall_s.sum()),
            "tuned_seconds": tuned_cost, "model_seconds": float(table.wall_s.mean()),
        }
        summary.append(row)
        trials.append(table.assign(problem=case.name, op=case.op, dtype=features.dtype,
                                   features=json.dumps(features.values)))
        print(json.dumps({k: v for k, v in row.items() if k != "oracle_config"}, default=str), flush=True)
        if db is not None:
            outcome = TuneOutcome(features, "exhaustive", True, device.name, oracle.config, best_t,
                                  dict(ranked)[oracle.config],
                                  [{"config": r.config.as_dict(), "time_us": r.time_us, "predicted_us": r.predicted_us}
                                   for r in ok.nsmallest(5, "time_us").itertuples()],
                                  int(len(table)), len(space), float(table.wall_s.sum()))
            db.put(outcome_to_entry(outcome), key_for(features))
            db.save()

    if not summary:
        return
    df = pd.DataFrame(summary)
    all_trials = pd.concat(trials)
    # Fit the model's coefficients on these trials and report the in-sample rank correlation.
    fitted = {}
    for op, group in all_trials[all_trials.status == "ok"].groupby("op"):
        samples = [(ProblemFeatures(op, r.dtype, json.loads(r.features)), r.config, r.time_us)
                   for r in group.itertuples()]
        fitted[op] = model.fit(op, samples).as_dict()
        preds = [model.predict_us(f, c) for f, c, _ in samples]
        df.loc[df.op == op, "spearman_fitted_op"] = spearman(preds, [t for _, _, t in samples])
    if db is not None:
        db.update_model_coefficients(fitted)
        db.save()
    all_trials.assign(config=all_trials.config.map(lambda c: json.dumps(c.as_dict()))).to_csv(
        args.out / "trials.csv", index=False)
    df.to_csv(args.out / "summary.csv", index=False)
    geo = lambda s: float(math.exp(s.map(math.log).mean()))  # noqa: E731
    per_op = df.groupby("op").agg(
        problems=("problem", "count"), tuned_over_oracle=("tuned_over_oracle_speed", geo),
        tuned_fraction=("tuned_fraction", "max"), model_over_oracle=("model_over_oracle_speed", geo),
        spearman_model=("spearman_model", "mean"), best_in_top10=("best_in_model_top10", "mean"),
        tuned_vs_heuristic=("tuned_speedup_vs_heuristic", geo), oracle_s=("oracle_seconds", "mean"),
        tuned_s=("tuned_seconds", "mean"),
    )
    (args.out / "fitted.json").write_text(json.dumps(fitted, indent=2))
    _plot(df, args.out / "tuner.png")
    print("\n" + per_op.to_string(float_format=lambda v: f"{v:.3f}"))
    device_name = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU interpreter"
    print(f"\nall problems: tuned/oracle speed geomean {geo(df.tuned_over_oracle_speed):.3f}, "
          f"max fraction timed {df.tuned_fraction.max():.3f}, device {device_name}")


def _plot(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(13, 4.5))
    x = range(len(df))
    ax[0].bar([i - 0.2 for i in x], df.tuned_over_oracle_speed, 0.4, label="model+optuna")
    ax[0].bar([i + 0.2 for i in x], df.model_over_oracle_speed, 0.4, label="model only")
    ax[0].axhline(0.95, color="k", lw=0.8, ls="--")
    ax[0].set_xticks(list(x), df.problem, rotation=70, fontsize=7)
    ax[0].set_ylabel("speed relative to the exhaustive oracle")
    ax[0].legend()
    ax[1].bar(x, df.tuned_speedup_vs_heuristic)
    ax[1].axhline(1.0, color="k", lw=0.8)
    ax[1].set_xticks(list(x), df.problem, rotation=70, fontsize=7)
    ax[1].set_ylabel("tuned speedup over the default heuristic")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
