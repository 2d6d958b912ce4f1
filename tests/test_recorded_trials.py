"""The tuner on timings recorded on an H200 (scripts/bench_tuner.py), replayed with no GPU.

tests/data/h200_trials.csv.gz holds, for the forty problems of the `tuner-suite` preset (all three
ops and dtypes), every config of each config space with its measured median time (the oracle's
sweep; BENCHMARKS.md has the live run). For each problem the cost model is
fitted on the *other* problems' trials (leave one problem out), then it ranks the held-out
problem's space and model+optuna searches it with those recorded times as the objective.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from stuning.tuning.cost_model import CostModel
from stuning.tuning.device import spec_for
from stuning.tuning.features import ProblemFeatures, synthetic_spmm_features
from stuning.tuning.registry import family
from stuning.tuning.search import ModelOptunaSearch, RecordingObjective, TrialFailure
from stuning.tuning.tuner import default_budget

DATA = Path(__file__).parent / "data" / "h200_trials.csv.gz"
H200 = spec_for("NVIDIA H200")


@pytest.fixture(scope="module")
def trials() -> pd.DataFrame:
    t = pd.read_csv(DATA)
    return t[t.status == "ok"]


def _samples(trials: pd.DataFrame, op: str) -> list:
    fam = family(op)
    return [
        (r.problem, ProblemFeatures(op, r.dtype, json.loads(r.features)), fam.config_from_dict(json.loads(r.config)),
         r.time_us)
        for r in trials[trials.op == op].itertuples()
    ]


def _spearman(a, b) -> float:
    return float(pd.Series(a).rank().corr(pd.Series(b).rank()))


def _held_out(samples, held):
    fitted = CostModel(H200)
    fitted.fit(samples[0][1].op, [(f, c, t) for p, f, c, t in samples if p != held])
    test = [(f, c, t) for p, f, c, t in samples if p == held]
    return fitted, test


@pytest.mark.parametrize("op", ["spmm", "sddmm", "semi24"])
def test_fitted_model_ranks_unseen_problems_better_than_the_prior(trials, op):
    samples = _samples(trials, op)
    prior = CostModel(H200)
    fitted_rho, prior_rho = [], []
    for held in sorted({s[0] for s in samples}):
        fitted, test = _held_out(samples, held)
        times = [t for _, _, t in test]
        fitted_rho.append(_spearman([fitted.predict_us(f, c) for f, c, _ in test], times))
        prior_rho.append(_spearman([prior.predict_us(f, c) for f, c, _ in test], times))
    # Over trimmed spaces (every config plausible) ranks are close; on these recordings the
    # held-out rank correlation is 0.42 (spmm), 0.47 (sddmm), 0.63 (2:4) fitted, about 0 prior.
    assert sum(fitted_rho) / len(fitted_rho) > 0.35
    assert sum(fitted_rho) / len(fitted_rho) > sum(prior_rho) / len(prior_rho) + 0.2


def _unprefetched(config):
    return dataclasses.replace(config, prefetch=False) if getattr(config, "prefetch", False) else config


def _search_ratios(samples, op):
    ratios = []
    for held in sorted({s[0] for s in samples}):
        fitted, test = _held_out(samples, held)
        features = test[0][0]
        # The recording predates the tiled SDDMM kernel: the search sees the kernels it has times
        # for (re-record with scripts/bench_tuner.py to replay the union space).
        recorded_kernels = {getattr(c, "kernel", None) for _, c, _ in test}
        space = [c for c in family(op).space(features, None) if getattr(c, "kernel", None) in recorded_kernels]
        # It also predates prefetching at decode widths, which the cost model does not rank on:
        # the space is searched as the plain loops that were timed.
        space = list(dict.fromkeys(_unprefetched(c) for c in space))
        # The oracle is the best recorded config of the space the search sees.
        in_space = set(space)
        table = {c: t for _, c, t in test if c in in_space}
        ranked = fitted.rank(features, space)

        def recorded(config, table=table):
            if config not in table:
                raise TrialFailure("not_recorded")
            return table[config]

        result = ModelOptunaSearch().search(ranked, RecordingObjective(recorded), default_budget(len(space)))
        assert result.timed <= 0.15 * len(space)
        ratios.append(min(table.values()) / result.best.time_us)
    return ratios


def _geomean(xs) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def test_model_optuna_near_the_oracle_at_a_fraction_of_its_cost(trials):
    """The issue's criterion on replayed timings: over all problems, the tuned configs reach a
    geomean of 0.95 of the oracle's speed while timing at most 15% of the space. (A config the
    recorded sweep lacks counts as a failed trial.)"""
    per_op = {op: _search_ratios(_samples(trials, op), op) for op in ("spmm", "sddmm", "semi24")}
    everything = [r for rs in per_op.values() for r in rs]
    assert _geomean(everything) >= 0.95, per_op
    # 2:4 at wide N is where the fitted model generalises worst; no op falls far behind.
    assert all(_geomean(rs) >= 0.85 for rs in per_op.values()), per_op


STEP_PROBE = Path(__file__).parent / "data" / "h200_spmm_step_probe.csv.gz"


def _decode_probe_problems():
    """scripts/probe_spmm_latency.py on the H200 at N = 16 (uniform rows, fp16): a grid of CSR
    configs (rows 1-4, steps 16-128, with and without prefetch) timed on 768 x 3072 (90%, 95% zeros)
    and 4096 x 4096 (90, 95, 98%)."""
    probe = pd.read_csv(STEP_PROBE)
    probe = probe[(probe.n == 16) & (probe.config != "cublas")]
    fam = family("spmm")
    for (m, k, n, sparsity), rows in probe.groupby(["m", "k", "n", "sparsity"]):
        density = 1.0 - sparsity
        features = synthetic_spmm_features(int(m), int(k), int(n), density, "float16",
                                           row_cv=math.sqrt(sparsity / (k * density)))  # binomial row lengths
        yield (m, k, sparsity), features, [(fam.config_from_dict(json.loads(c)), t)
                                           for c, t in zip(rows.config, rows.time_us, strict=True)]


def _top5_miss(model, features, timed) -> float:
    """How much slower the best of the model's five favourite configs ran than the best of all."""
    ranked = sorted(timed, key=lambda ct: model.predict_us(features, ct[0]))
    return min(t for _, t in ranked[:5]) / min(t for _, t in timed)


@pytest.mark.parametrize("mem_latency_us", [H200.mem_latency_us, 0.0])
def test_the_step_chain_ranks_long_steps_where_few_programs_walk_long_rows(mem_latency_us):
    """At decode N with few rows (768: one wave of programs) time grows with the steps of the
    nonzero loop, not with bandwidth: the model must see that chain to rank 64- and 128-long steps
    first there, and must not push them where many programs hide it (4096 rows)."""
    model = CostModel(dataclasses.replace(H200, mem_latency_us=mem_latency_us))
    misses = {problem: _top5_miss(model, features, timed) for problem, features, timed in _decode_probe_problems()}
    assert len(misses) == 5
    few_rows = [miss for (m, _, _), miss in misses.items() if m == 768]
    many_rows = [miss for (m, _, _), miss in misses.items() if m == 4096]
    assert all(miss <= 1.05 for miss in many_rows), misses
    if mem_latency_us:
        assert all(miss <= 1.05 for miss in few_rows), misses
    else:  # without the chain, bandwidth alone favours short steps: 1.9x and 1.3x slower
        assert max(few_rows) > 1.25, misses
