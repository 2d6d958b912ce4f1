"""The contract every search strategy keeps, run on each, against replayed (synthetic) timings.

The objective is a deterministic table of times over a real config space (SpMM's, for a
Llama-sized problem) with a known optimum; no GPU is involved.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from stuning.tuning.cost_model import CostModel
from stuning.tuning.device import spec_for
from stuning.tuning.features import synthetic_spmm_features
from stuning.tuning.registry import budget_of, family
from stuning.tuning.search import (
    STRATEGIES,
    Budget,
    ExhaustiveSearch,
    ModelOptunaSearch,
    ModelSearch,
    RecordingObjective,
    TrialFailure,
    make_strategy,
)

DEVICE = spec_for("h100")
FEATURES = synthetic_spmm_features(4096, 4096, 128, 0.1, "float16", row_cv=0.4)
# Decode width: CSR configs prefetch and sliced-ELL ones cannot, so the space is not a product of
# its fields' values (a sampler drawing each field alone can name a config no kernel takes).
NARROW = synthetic_spmm_features(4096, 4096, 16, 0.05, "float16", row_cv=0.4)


@pytest.fixture(scope="module")
def ranked():
    space = family("spmm").space(FEATURES, budget_of(DEVICE))
    return CostModel(DEVICE).rank(FEATURES, space)


@pytest.fixture(scope="module")
def narrow_ranked():
    space = family("spmm").space(NARROW, budget_of(DEVICE))
    assert {(c.kernel, c.prefetch) for c in space} == {("csr", True), ("sell", False)}
    return CostModel(DEVICE).rank(NARROW, space)


class ReplayedTimings:
    """A recorded-timings stand-in: a fixed landscape over the space (the model's prediction times up
    to 30% structured noise), its known optimum, and a few configs that 'fail to compile'."""

    def __init__(self, ranked, seed: int = 7):
        configs = [c for c, _ in ranked]
        # Follow the model's ranking loosely, as real timings do, with deterministic noise.
        self.table = {}
        for c, pred in ranked:
            noise = 1.0 + 0.3 * ((hash((c.rows, c.nnz_step, c.block_n, c.vec, seed)) % 1000) / 1000.0)
            self.table[c] = pred * noise
        self.failing = {configs[i] for i in range(1, len(configs), 97)}
        self.optimum = min((c for c in configs if c not in self.failing), key=self.table.__getitem__)
        self.calls: dict = {}

    def __call__(self, config) -> float:
        self.calls[config] = self.calls.get(config, 0) + 1
        if config in self.failing:
            raise TrialFailure("compile_error", "replayed failure")
        return self.table[config]


def _run(name, ranked, budget):
    timings = ReplayedTimings(ranked)
    strategy = make_strategy(name)
    objective = RecordingObjective(timings) if strategy.measures else None
    return strategy, timings, strategy.search(ranked, objective, budget)


@pytest.mark.parametrize("name", list(STRATEGIES))
class TestStrategyContract:
    def test_result_shape(self, name, ranked):
        strategy, _, result = _run(name, ranked, Budget(max_trials=40))
        assert result.strategy == name == strategy.name
        assert result.measured == strategy.measures
        assert result.best is not None
        candidates = {c for c, _ in ranked}
        assert all(t.config in candidates for t in result.trials)

    def test_never_times_a_config_twice(self, name, ranked):
        _, timings, _ = _run(name, ranked[:300], Budget(max_trials=60))
        assert all(n == 1 for n in timings.calls.values())

    def test_failures_recorded_never_best(self, name, ranked):
        _, timings, result = _run(name, ranked[:300], Budget(max_trials=300))
        failed = [t for t in result.trials if not t.ok and t.status != "predicted"]
        if result.measured:
            assert {t.config for t in failed} == timings.failing & {t.config for t in result.trials}
        assert result.best.config not in timings.failing or not result.measured

    def test_times_only_configs_of_a_space_that_is_not_a_product(self, name, narrow_ranked):
        _, timings, result = _run(name, narrow_ranked, Budget(max_trials=60))
        candidates = {c for c, _ in narrow_ranked}
        assert all(t.config in candidates for t in result.trials)
        assert set(timings.calls) <= candidates and result.best.config in candidates

    def test_deterministic(self, name, ranked):
        a = _run(name, ranked[:200], Budget(max_trials=30))[2]
        b = _run(name, ranked[:200], Budget(max_trials=30))[2]
        assert [t.config for t in a.trials] == [t.config for t in b.trials]
        assert a.best.config == b.best.config


def test_the_clock_never_stops_a_search_before_its_first_config():
    spent = Budget(max_trials=10, max_seconds=5.0).spent(7.0)
    assert spent == Budget(max_trials=10, max_seconds=0.0)
    assert not spent.exhausted(0, started=0.0) and spent.exhausted(1, started=0.0)
    assert Budget(max_trials=10).spent(7.0) == Budget(max_trials=10)


@pytest.mark.parametrize("name", ["model+optuna"])
def test_trial_budget_respected(name, ranked):
    _, timings, result = _run(name, ranked, Budget(max_trials=25))
    assert len(timings.calls) <= 25
    assert result.timed <= 25


def test_exhaustive_finds_the_known_optimum(ranked):
    sub = ranked[:400]
    timings = ReplayedTimings(sub)
    result = ExhaustiveSearch().search(sub, RecordingObjective(timings), Budget(max_trials=5))
    assert result.best.config == timings.optimum  # the oracle ignores trial budgets
    assert len(timings.calls) == len(sub)


def test_model_only_times_nothing(ranked):
    result = ModelSearch(top_k=3).search(ranked, None, Budget())
    assert not result.measured and result.timed == 0
    assert [t.config for t in result.trials] == [c for c, _ in ranked[:3]]
    assert all(t.time_us is None and t.predicted_us is not None for t in result.trials)


def test_model_optuna_near_oracle_at_a_fraction_of_its_cost(ranked):
    # Several landscapes: on any one the optimum may sit just past the model's top k by chance.
    found = []
    for seed in range(8):
        timings = ReplayedTimings(ranked, seed=seed)
        oracle = timings.table[timings.optimum]
        budget = Budget(max_trials=math.ceil(0.05 * len(ranked)))
        result = ModelOptunaSearch().search(ranked, RecordingObjective(timings), budget)
        assert len(timings.calls) <= 0.15 * len(ranked)
        found.append(oracle / result.best.time_us)
    assert min(found) >= 0.95 and sorted(found)[len(found) // 2] >= 0.98, found


def test_model_optuna_climbs_to_a_neighbour_outside_the_survivors(ranked):
    """The budget's last quarter times the best config's one-field neighbours from the whole space:
    an optimum the model ranks far down (outside what TPE samples) but one change from the model's
    favourite is found."""
    search = ModelOptunaSearch()
    survivors = {c for c, _ in search.survivors(ranked)}
    favourite = ranked[0][0]
    fields = [f.name for f in dataclasses.fields(favourite)]
    optimum = next(c for c, _ in ranked if c not in survivors
                   and sum(getattr(c, f) != getattr(favourite, f) for f in fields) == 1)
    table = dict(ranked)
    table[optimum] = 0.5 * ranked[0][1]
    result = search.search(ranked, RecordingObjective(table.__getitem__), Budget(max_trials=60))
    assert result.best.config == optimum
    assert result.extra["neighbours"] > 0
    # Without the climb the same search misses it.
    alone = ModelOptunaSearch(neighbour_share=0.0).search(ranked, RecordingObjective(table.__getitem__),
                                                          Budget(max_trials=60))
    assert alone.best.config != optimum


def test_model_optuna_climbs_each_kernel_kind_near_the_best(narrow_ranked):
    """Another kernel kind timed within 10% of the best is climbed too: its optimum, two fields from
    the leader (a value the leader's kind lacks, as the sparse-MMA 2:4 kernel's 16 splits), is found."""
    search = ModelOptunaSearch()
    leader = narrow_ranked[0][0]
    runner = next((c, p) for c, p in narrow_ranked if c.kernel != leader.kernel)
    # The runner second in the ranking, so the seeded head times it whatever else the model ranks.
    narrow_ranked = [narrow_ranked[0], runner] + [r for r in narrow_ranked[1:] if r != runner]
    runner = runner[0]
    survivors = {c for c, _ in search.survivors(narrow_ranked)}
    fields = [f.name for f in dataclasses.fields(leader)]

    def apart(a, b):
        return sum(getattr(a, f) != getattr(b, f) for f in fields)

    optimum = next(c for c, _ in narrow_ranked if c.kernel == runner.kernel and c not in survivors
                   and apart(c, runner) == 1 and apart(c, leader) > 1)
    table = dict(narrow_ranked)
    table[runner] = 1.05 * table[leader]
    table[optimum] = 0.8 * table[leader]
    result = search.search(narrow_ranked, RecordingObjective(table.__getitem__), Budget(max_trials=60))
    assert runner in {t.config for t in result.trials}
    assert result.best.config == optimum
    # Climbing the leader alone (the tie at 1.0: no other kind qualifies) misses it.
    alone = ModelOptunaSearch(kind_tie=1.0).search(narrow_ranked, RecordingObjective(table.__getitem__),
                                                   Budget(max_trials=60))
    assert runner in {t.config for t in alone.trials}
    assert alone.best.config != optimum


def test_model_optuna_times_the_seeded_head_whatever_the_model_predicts(ranked):
    """A neighbouring entry's config, which ``seeded_ranking`` puts in the head, is timed even where the
    model predicts it far slower than its favourite (a kernel the model misjudges), and wins where it
    is the fastest; beyond the head, such configs stay pruned."""
    from stuning.tuning.tuner import seeded_ranking

    search = ModelOptunaSearch()
    best = min(p for _, p in ranked)
    misjudged = next(c for c, p in ranked if p > 2 * search.within * best)
    order = seeded_ranking(ranked, nearby=[misjudged])
    assert misjudged in [c for c, _ in order[: search.top_k]]
    assert misjudged in {c for c, _ in search.survivors(order)}
    assert misjudged not in {c for c, _ in search.survivors(ranked)}
    table = dict(ranked)
    table[misjudged] = 0.5 * best
    result = search.search(order, RecordingObjective(table.__getitem__), Budget(max_trials=12))
    assert result.best.config == misjudged


def test_every_kernel_of_the_space_is_timed_in_the_head(narrow_ranked):
    """Unseeded, each kernel's model favourite joins the head: a kernel the model misjudges (every
    config of it predicted 10x slower) is timed once, and wins where it is the fastest."""
    from stuning.tuning.tuner import seeded_ranking

    leader = narrow_ranked[0][0]
    misjudged = sorted(((c, p if c.kernel == leader.kernel else 10 * p) for c, p in narrow_ranked),
                       key=lambda cp: cp[1])
    other = next(c for c, _ in misjudged if c.kernel != leader.kernel)
    search = ModelOptunaSearch()
    order = seeded_ranking(misjudged)
    assert {c.kernel for c, _ in order[:3]} == {"csr", "sell"}
    assert other in {c for c, _ in search.survivors(order)}
    assert other not in {c for c, _ in search.survivors(misjudged)}
    table = dict(misjudged)
    table[other] = 0.5 * misjudged[0][1]
    result = search.search(order, RecordingObjective(table.__getitem__), Budget(max_trials=12))
    assert result.best.config == other


def test_model_optuna_enqueues_model_top_k_first(ranked):
    timings = ReplayedTimings(ranked)
    result = ModelOptunaSearch(top_k=6).search(ranked, RecordingObjective(timings), Budget(max_trials=20))
    assert [t.config for t in result.trials[:6]] == [c for c, _ in ranked[:6]]


def test_measuring_strategies_need_an_objective(ranked):
    for cls in (ExhaustiveSearch, ModelOptunaSearch):
        with pytest.raises(ValueError, match="objective"):
            cls().search(ranked, None, Budget())


def test_unknown_strategy():
    with pytest.raises(ValueError, match="unknown strategy"):
        make_strategy("annealing")
