"""The sweep's pieces: which configs run, failures as rows, the tidy frame, --top, the summary."""

from __future__ import annotations

import json
import math
import random

import pandas as pd
import pytest

from stuning.bench import sweep as sweep_module
from stuning.bench.sweep import SweepSettings, keep_top, pick_configs, problem_summary, spearman, sweep_case, tidy
from stuning.bench.timer import config_timer
from stuning.suite import SDDMMCase, SpMMCase
from stuning.tuning.cost_model import CostModel
from stuning.tuning.device import spec_for

SPACE = list(range(10, 20))  # stand-ins for configs: anything hashable and comparable
RANKED = [(c, float(100 - c)) for c in reversed(SPACE)]  # the model prefers larger numbers


@pytest.fixture(scope="module")
def model() -> CostModel:
    return CostModel(spec_for("h100"))


def test_pick_configs_sample_is_seeded_and_adds_the_heuristic():
    settings = SweepSettings(configs=3, seed=1)
    picked = pick_configs(SPACE, RANKED, 99, settings, random.Random("1:p"))
    assert picked == pick_configs(SPACE, RANKED, 99, settings, random.Random("1:p"))
    assert len(picked) == 4 and picked[-1] == (99, "heuristic")
    assert {source for _, source in picked[:3]} == {"sample"}


def test_pick_configs_model_top_and_whole_space():
    picked = pick_configs(SPACE, RANKED, 19, SweepSettings(configs=3, rank="model"), random.Random(0))
    assert picked == [(19, "heuristic"), (18, "model top"), (17, "model top")]  # the heuristic is not run twice
    whole = pick_configs(SPACE, RANKED, 12, SweepSettings(), random.Random(0))
    assert [c for c, _ in whole] == SPACE and dict(whole)[12] == "heuristic"


def test_sweep_case_rows(model):
    case = SpMMCase(32, 64, 16, 0.8, 0.0, "fp16")
    rows = sweep_case(case, model, SweepSettings(configs=2, seed=3), config_timer(on_gpu=False))
    assert len(rows) in (2, 3)  # two sampled, plus the heuristic unless it was sampled
    assert all(r["status"] == "ok" and r["time_us"] > 0 and r["predicted_us"] > 0 for r in rows)
    assert sum(r["heuristic"] for r in rows) == 1
    assert len({r["config"] for r in rows}) == len(rows)


def test_failing_configs_are_rows_with_a_status(model, monkeypatch):
    """A config that computes garbage is 'wrong', one that raises is 'error'; nothing stops the sweep."""
    real_build = sweep_module.build_problem

    def build_with_bad_configs(case, **kw):
        problem = real_build(case, **kw)
        run = problem.run

        def run_some_wrong(config, out=None):
            if config.num_warps == 2:
                raise RuntimeError("launch failed")
            out = run(config, out)
            return out.mul_(2) if config.num_stages == 1 else out

        problem.run = run_some_wrong
        return problem

    monkeypatch.setattr(sweep_module, "build_problem", build_with_bad_configs)
    case = SDDMMCase(32, 32, 16, 0.8, "fp32")
    rows = sweep_case(case, model, SweepSettings(configs=12), config_timer(on_gpu=False))
    assert {r["status"] for r in rows} == {"ok", "wrong", "error"}
    for r in rows:
        cfg = json.loads(r["config"])
        expected = "error" if cfg["num_warps"] == 2 else "wrong" if cfg["num_stages"] == 1 else "ok"
        assert r["status"] == expected, r
        assert (r.get("time_us") is not None) == (expected == "ok")
        assert r["predicted_us"] > 0


def test_a_problem_that_cannot_be_built_is_one_error_row(model, monkeypatch):
    def broken(case, **kw):
        raise MemoryError("no room")

    monkeypatch.setattr(sweep_module, "build_problem", broken)
    (row,) = sweep_case(SpMMCase(32, 64, 16, 0.8, 0.0, "fp16"), model, SweepSettings(), config_timer(on_gpu=False))
    assert row["status"] == "error" and "no room" in row["message"]
    df = tidy([row], {})
    assert problem_summary(df).iloc[0]["ok"] == 0


def _synthetic_rows() -> list[dict]:
    rows = []
    for name, times in (("a", [5.0, 1.0, 3.0, None, 2.0]), ("b", [4.0, None])):
        for i, t in enumerate(times):
            rows.append({"op": "spmm", "name": name, "dtype": "fp16", "config": json.dumps({"i": i}), "cfg_i": i,
                         "heuristic": i == 0, "status": "ok" if t is not None else "wrong", "time_us": t,
                         "predicted_us": 10.0 - i, "model_rank": i + 1})
    return rows


def test_tidy_ranks_and_speedups():
    df = tidy(_synthetic_rows(), {"device": "d"})
    a = df[df["name"] == "a"].set_index("cfg_i")
    assert a.loc[1, "rank"] == 1 and a.loc[0, "rank"] == 4 and pd.isna(a.loc[3, "rank"])
    assert a.loc[1, "speedup_vs_heuristic"] == pytest.approx(5.0)
    assert str(df["cfg_i"].dtype) == "Int64" and str(df["rank"].dtype) == "Int64"
    assert df.groupby(["name", "config"]).size().max() == 1  # one row per problem x config


@pytest.mark.parametrize("k", [1, 2, 3])
def test_keep_top_keeps_exactly_the_best_ok_rows(k):
    top = keep_top(tidy(_synthetic_rows(), {}), k)
    assert (top["status"] == "ok").all()
    assert list(top[top["name"] == "a"]["time_us"]) == [1.0, 2.0, 3.0][:k]
    assert list(top[top["name"] == "b"]["time_us"]) == [4.0]  # fewer ok configs than k


def test_problem_summary():
    summary = problem_summary(tidy(_synthetic_rows(), {})).set_index("name")
    a = summary.loc["a"]
    assert (a["configs"], a["ok"], a["failed"], a["wrong"]) == (5, 4, 1, 1)
    assert a["best_us"] == 1.0 and a["heuristic_us"] == 5.0 and a["best_vs_heuristic"] == pytest.approx(5.0)
    assert a["model_pick_us"] == 2.0  # the lowest prediction among the configs that ran (i = 4)
    assert a["model_pick_vs_best"] == pytest.approx(0.5)


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 2], [1, 2]))
