"""Problems x configs -> tidy rows of ``stuning sweep``: one row per (problem, config).

Per problem the configs come from the op's config space (``registry.family(op).space``): all of
them, a seeded random sample of ``configs``, or the cost model's top ``configs`` (``rank="model"``);
the kernel's default heuristic is always added, so every problem has its untuned baseline. Every
config is checked against the reference before it is timed (``KernelObjective``); one that does not
compile, runs out of resources or computes a wrong result is a row with that status, never a
crash. Each row carries the cost model's predicted time and rank next to the measured time.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stuning.bench import error_text
from stuning.bench.runner import case_columns
from stuning.tuning.objective import KernelObjective, classify_failure
from stuning.tuning.problems import build_problem
from stuning.tuning.registry import family
from stuning.tuning.search import TrialFailure

RANKS = ("random", "model")
STATUS_OK = "ok"


@dataclass(frozen=True)
class SweepSettings:
    configs: int | None = None  # per problem: the whole space (None) or this many
    rank: str = "random"  # how ``configs`` are picked: a seeded sample, or the model's best
    seed: int = 0
    precompile: bool = False  # compile the configs in parallel processes first (on a GPU)


def pick_configs(space: list, ranked: list[tuple[object, float]], heuristic, settings: SweepSettings,
                 rng: random.Random) -> list[tuple[object, str]]:
    """(config, source) pairs: the chosen part of ``space`` and the heuristic, each config once."""
    if settings.configs is None or settings.configs >= len(space):
        chosen, source = list(space), "space"
    elif settings.rank == "model":
        chosen, source = [c for c, _ in ranked[: settings.configs]], "model top"
    else:
        chosen, source = rng.sample(space, settings.configs), "sample"
    picked = [(c, "heuristic" if c == heuristic else source) for c in chosen]
    if heuristic not in chosen:
        picked.append((heuristic, "heuristic"))
    return picked


def sweep_case(case, model, settings: SweepSettings, timer: Callable, *,
               on_config: Callable[[int, int], None] = lambda done, total: None) -> list[dict]:
    """The rows of one problem. ``timer`` maps a callable to (us, method); ``model`` is a CostModel."""
    base = case_columns(case)
    try:
        problem = build_problem(case, seed=settings.seed)
        features = problem.features
        fam = family(case.op)
        space = fam.space(features)
        ranked = model.rank(features, space)
        heuristic = fam.default(features)
    except Exception as e:
        return [{**base, "status": "error", "message": error_text(e, 400)}]
    base["nnz"] = features.values.get("nnz", case.m * case.k // 2)
    base["space"] = len(space)
    model_rank = {c: i + 1 for i, (c, _) in enumerate(ranked)}
    picked = pick_configs(space, ranked, heuristic, settings, random.Random(f"{settings.seed}:{case.name}"))
    if settings.precompile:
        from stuning.tuning.precompile import precompile

        precompile(case, [c for c, _ in picked], seed=settings.seed)
    objective = KernelObjective(problem)
    rows = []
    for i, (config, source) in enumerate(picked):
        row = {**base, "config": json.dumps(config.as_dict()), "source": source,
               "heuristic": config == heuristic, **{f"cfg_{k}": v for k, v in config.as_dict().items()},
               "predicted_us": model.predict_us(features, config), "model_rank": model_rank.get(config)}
        t0 = time.perf_counter()
        row.update(_measure(objective, config, timer))
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        on_config(i + 1, len(picked))
    return rows


def _measure(objective: KernelObjective, config, timer: Callable) -> dict:
    try:
        objective.check(config)
        time_us, method = timer(objective.timed(config))
    except TrialFailure as e:
        return {"status": e.status, "message": e.message}
    except Exception as e:  # a timing failure (a launch that cannot be captured, say)
        failure = classify_failure(e)
        return {"status": failure.status, "message": failure.message}
    return {"status": STATUS_OK, "time_us": time_us, "timing": method}


def tidy(rows: list[dict], env: dict) -> pd.DataFrame:
    """The rows as a frame, with each ok row's measured rank within its problem (1 = fastest) and
    its speedup over the problem's heuristic config."""
    df = pd.DataFrame(rows)
    for key, val in env.items():
        df[key] = val
    if df.empty:
        return df
    for col in ("time_us", "predicted_us", "model_rank", "heuristic", "message", "timing"):
        if col not in df:
            df[col] = None
    df["time_us"] = df["time_us"].astype(float)
    df["heuristic"] = df["heuristic"].eq(True)  # a problem that failed to build has no config
    ok = df["status"] == STATUS_OK
    df["rank"] = df["time_us"].where(ok).groupby(df["name"]).rank(method="first")
    heuristic_us = df["time_us"].where(df["heuristic"] & ok).groupby(df["name"])
    df["speedup_vs_heuristic"] = heuristic_us.transform("min") / df["time_us"].where(ok)
    lead = ["op", "name", "dtype", "m", "k", "n", "sparsity", "skew_cv", "family", "nnz", "space", "config",
            "source", "heuristic", "status", "time_us", "predicted_us", "rank", "model_rank", "speedup_vs_heuristic",
            "timing", "message", "seconds"]
    params = [c for c in df if c.startswith("cfg_")]
    for c in [*params, "rank", "model_rank"]:
        # Integers stay integers where some rows lack them (other ops' parameters, failed configs).
        values = df[c].dropna()
        if len(values) and all(isinstance(v, int | float) and not isinstance(v, bool) and float(v).is_integer()
                               for v in values):
            df[c] = df[c].astype("Int64")
    cols = [c for c in lead if c in df] + params + [c for c in df if c not in lead and c not in params]
    return df[cols].sort_values(["op", "name", "rank", "model_rank"], kind="stable").reset_index(drop=True)


def keep_top(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """The ``k`` fastest ok rows of every problem (fewer where fewer configs ran)."""
    ok = df[df["status"] == STATUS_OK]
    return ok.sort_values(["name", "time_us"], kind="stable").groupby("name", sort=False).head(k).sort_values(
        ["op", "name", "time_us"], kind="stable").reset_index(drop=True)


def spearman(x, y) -> float:
    """Rank correlation of two series (ties by average rank); NaN under 3 pairs."""
    pairs = pd.DataFrame({"x": list(x), "y": list(y)}).dropna()
    if len(pairs) < 3:
        return float("nan")
    rx, ry = pairs["x"].rank().to_numpy(), pairs["y"].rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def problem_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per problem: configs run and failed, the best measured config, the heuristic's time, the
    model's pick (the lowest prediction among the configs run) and how it measured."""
    out = []
    for name, g in df.groupby("name", sort=False):
        ok = g[g["status"] == STATUS_OK]
        rec = {"op": g["op"].iloc[0], "name": name, "dtype": g["dtype"].iloc[0], "configs": len(g),
               "ok": len(ok), "failed": int((g["status"] != STATUS_OK).sum()),
               "wrong": int((g["status"] == "wrong").sum())}
        if len(ok):
            best = ok.loc[ok["time_us"].idxmin()]
            pick = ok.loc[ok["predicted_us"].astype(float).idxmin()]
            heur = ok[ok["heuristic"]]
            rec.update({
                "best_us": float(best["time_us"]), "best_config": best["config"],
                "heuristic_us": float(heur["time_us"].iloc[0]) if len(heur) else None,
                "model_pick_us": float(pick["time_us"]),
                "spearman": spearman(ok["predicted_us"], ok["time_us"]),
            })
            rec["best_vs_heuristic"] = rec["heuristic_us"] / rec["best_us"] if rec["heuristic_us"] else None
            rec["model_pick_vs_best"] = rec["best_us"] / rec["model_pick_us"]
        out.append(rec)
    return pd.DataFrame(out)
