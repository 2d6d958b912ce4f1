"""The shipped H200 cost model against configs timed apart on the H200, replayed with no GPU.

tests/data/h200_spmm_lookup_picks.csv.gz holds fp16 SpMM problems of the shipped database with
configs timed on each (scripts/bench_lookup.py and the BENCHMARKS.md 8p runs: each entry's own
config, the cost model's picks with and without capped effects, its neighbours' configs), only
those two or more times slower or faster than another config of the same problem. Whichever of
two such configs the model predicts faster is the one it would choose, so it should be the faster
one: the uncapped fit ordered 31% of the pairs right (it chose sliced ELL where the scatter kernel
ran 7-13x faster); the capped fit orders far more right.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest

import stuning.tuning.cost_model.base as cost_base
from stuning.db import TuningDB
from stuning.tuning.features import ProblemFeatures
from stuning.tuning.registry import family
from stuning.tuning.session import model_for, target_spec

DATA = Path(__file__).parent / "data" / "h200_spmm_lookup_picks.csv.gz"


@pytest.fixture(scope="module")
def shipped_model():
    return model_for(TuningDB.open("nvidia-h200"), target_spec("nvidia-h200"))


def _pairs(min_ratio: float):
    """(features, faster config, slower config, ratio) of every two configs of a problem timed at
    least ``min_ratio`` apart."""
    fam = family("spmm")
    out = []
    for _, g in pd.read_csv(DATA).groupby("key"):
        features = ProblemFeatures("spmm", "float16", json.loads(g.features.iloc[0]))
        timed = [(fam.config_from_dict(json.loads(c)), t) for c, t in zip(g.config, g.us, strict=True)]
        for (c1, t1), (c2, t2) in itertools.combinations(timed, 2):
            (fast, tf), (slow, ts) = sorted([(c1, t1), (c2, t2)], key=lambda ct: ct[1])
            if ts / tf >= min_ratio:
                out.append((features, fast, slow, ts / tf))
    return out


def _ordered_right(model, pairs) -> float:
    return sum(model.predict_us(f, fast) < model.predict_us(f, slow) for f, fast, slow, _ in pairs) / len(pairs)


@pytest.mark.parametrize(("min_ratio", "share"), [(2.0, 0.75), (4.0, 0.9)])
def test_shipped_model_predicts_the_faster_of_configs_timed_far_apart(shipped_model, min_ratio, share):
    pairs = _pairs(min_ratio)
    assert len(pairs) > 150
    # With EFFECT_CAP 0.3: 81% of the pairs 2x apart, 96% of those 4x apart (8p); 97% / 99% once
    # refitted with the other kernels' trials (8q), some of them timed on these problems.
    assert _ordered_right(shipped_model, pairs) >= share


def test_the_cap_removes_most_of_the_uncapped_fits_wrong_orders(shipped_model, monkeypatch):
    pairs = _pairs(4.0)
    capped = _ordered_right(shipped_model, pairs)
    monkeypatch.setattr(cost_base, "EFFECT_CAP", float("inf"))
    # Uncapped, the share ordered right rises with each refit's entries: 33% in 8p, 52% (8q), 72%
    # (8w), 82% (8x), 100% once the fit saw its own misses (9f); capped, 98-99.5% each time. So the
    # claim is relative, not a fixed gap: the cap leaves at most half of the uncapped fit's wrong
    # orders (8x: 1.5% of 18%), and where the uncapped fit has none, at most 1% (9f: 0.5%).
    assert 1.0 - capped <= max(0.5 * (1.0 - _ordered_right(shipped_model, pairs)), 0.01)


def test_a_config_s_summed_effects_move_its_prediction_by_at_most_the_cap():
    terms = cost_base.CostTerms(mem_us=10.0, compute_us=1.0, overhead_us=0.0)
    config = {"a": 1, "b": 2, "c": 3}
    names = cost_base.config_features(config)
    plain = cost_base.Coefficients().predict_us(terms, config)
    for sign in (-1, 1):
        stacked = cost_base.Coefficients(effects=dict.fromkeys(names, sign * 0.5))  # 6 effects: 3.0 summed
        assert stacked.predict_us(terms, config) == pytest.approx(plain * math.exp(sign * cost_base.EFFECT_CAP))
    small = cost_base.Coefficients(effects={names[0]: 0.1})
    assert small.predict_us(terms, config) == pytest.approx(plain * math.exp(0.1))
