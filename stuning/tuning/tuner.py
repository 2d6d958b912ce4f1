"""One tuning run: features -> config space -> cost model -> search -> re-timed winner."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from stuning.db import FailedConfig, TimedConfig
from stuning.db.entry import other_kernel_bests, speedup_over_dense, union_failed
from stuning.tuning.cost_model import CostModel
from stuning.tuning.coverage import space_kernels
from stuning.tuning.device import DeviceSpec, local_spec
from stuning.tuning.features import ProblemFeatures
from stuning.tuning.objective import KernelObjective
from stuning.tuning.registry import budget_of, family
from stuning.tuning.search import DEFAULT_STRATEGY, Budget, RecordingObjective, make_strategy
from stuning.tuning.timing import retime_alternating

TOP_K = 5  # configs kept per database entry
# Configs re-timed after a search: all it keeps, since a search's quick timings (SCREEN_TIMING) can
# be a few percent off and rank close finalists either way.
RETIME_TOP = TOP_K
# Of the cost model's own first-ranked configs, how many an entry keeps (as the search timed them)
# when they are not among its top k: the model's misses, which a refit otherwise never sees.
MODEL_PICKS = 2


@dataclass
class TuneOutcome:
    features: ProblemFeatures
    strategy: str
    measured: bool
    device: str
    best_config: object
    best_time_us: float | None
    predicted_us: float
    top_k: list[dict]  # {config, time_us, predicted_us}
    timed: int  # configs timed
    space: int  # configs in the valid space
    seconds: float
    failures: dict = field(default_factory=dict)  # status -> count, this run's
    # [FailedConfig]: this run's failures (every status) united with the excluded records passed in.
    failed: list = field(default_factory=list)
    dense_us: float | None = None  # the problem done dense, timed after the search (measuring runs)
    kernels: tuple = ()  # the kernels the valid space held, sorted: what the search could pick from
    # [{config, time_us}]: of each kernel timed with no config in top_k, its fastest (measuring runs)
    other_kernels: list = field(default_factory=list)
    # [{config, time_us}]: the model's first MODEL_PICKS configs, timed but not in top_k (measuring runs)
    model_picks: list = field(default_factory=list)

    @property
    def speedup_vs_dense(self) -> float | None:
        return speedup_over_dense(self.dense_us, self.best_time_us)


def default_budget(space: int) -> Budget:
    """A seventh of the space (so a search times under 15% of what an exhaustive one would), at
    least 8 configs and at most 96, and two minutes."""
    return Budget(max_trials=min(96, max(8, math.floor(space / 7))), max_seconds=120.0)


def seeded_ranking(ranked: list[tuple[object, float]], seeds: Iterable = (), nearby: Iterable = ()
                   ) -> list[tuple[object, float]]:
    """The order a search takes configs in: ``seeds`` first, then ``nearby`` alternating one for one
    with the rest of the model's ranking; configs outside the ranked space are dropped. Every kernel
    of the space that neither names joins ``nearby``, ahead of it, with the model's favourite config
    of that kernel, so that each kernel is timed within the first few trials.

    A neighbour's best config can be a poor guess (one tuned at N = 16 for a problem at N = 128):
    with all of them first, a short search timed nothing but them (BENCHMARKS.md 7g). The model can
    misjudge a whole kernel (the 2:4 warpgroup kernel at 44 us where it ran 9 us, BENCHMARKS.md 8h):
    ranked by the model alone, none of its configs would be timed."""
    preds = dict(ranked)
    order = [c for c in dict.fromkeys(seeds) if c in preds]
    taken = set(order)
    near = [c for c in dict.fromkeys(nearby) if c in preds and c not in taken]
    named = {_kernel(c) for c in order + near}
    favourites: dict = {}
    for c, _ in ranked:
        if _kernel(c) not in named:
            favourites.setdefault(_kernel(c), c)
    near = list(favourites.values()) + near
    taken.update(near)
    model = [c for c, _ in ranked if c not in taken]
    for i in range(max(len(near), len(model))):
        order += near[i:i + 1] + model[i:i + 1]
    return [(c, preds[c]) for c in order]


def _kernel(config) -> str | None:
    return getattr(config, "kernel", None)


def tune(
    features: ProblemFeatures,
    *,
    objective=None,
    strategy: str = DEFAULT_STRATEGY,
    device: DeviceSpec | None = None,
    model: CostModel | None = None,
    budget: Budget | None = None,
    seeds: list | None = None,
    nearby: list | None = None,
    strategy_options: dict | None = None,
    exclude: Iterable | None = None,
) -> TuneOutcome:
    """Tune one problem. ``objective``: ``config -> time_us`` (a ``KernelObjective`` on a GPU); needed
    by every strategy but ``model``. ``seeds``: configs to try first (e.g. the problem's own entry
    in an older database); ``nearby``: neighbouring problems' configs, tried alternately with the
    model's favourites (see ``seeded_ranking``).

    ``exclude``: configs known to fail here (``FailedConfig`` records from the database, config
    dicts or configs). They are never compiled, timed or picked, so they do not count as timed, and
    the records come back in the outcome's ``failed`` for the database to keep.
    """
    start = time.perf_counter()
    device = device or local_spec()
    model = model or CostModel(device)
    fam = family(features.op)
    space = fam.space(features, budget_of(device))
    if not space:
        raise ValueError(f"no valid {features.op} config for {features.key_features()} on {device.name}")
    model_ranked = model.rank(features, space)
    ranked = seeded_ranking(model_ranked, seeds or (), nearby or ())
    excluded, carried = _exclusions(exclude)
    if excluded:
        ranked = [cp for cp in ranked if _name(cp[0].as_dict()) not in excluded]
        if not ranked:
            raise RuntimeError(
                f"every valid {features.op} config for {features.key_features()} is recorded as failing in "
                "this environment (the entry's 'failed' list); remove the entry to try them again"
            )
    searcher = make_strategy(strategy, **(strategy_options or {}))
    recorder = RecordingObjective(objective) if objective is not None else None
    result = searcher.search(ranked, recorder, budget or default_budget(len(space)))

    top = result.top_k(TOP_K)
    if not top:
        statuses = Counter(t.status for t in result.trials)
        raise RuntimeError(f"every {features.op} config tried failed ({dict(statuses)})")
    times = {t.config: t.time_us for t in top}
    if result.measured and isinstance(objective, KernelObjective) and len(top) > 1:
        # The kept configs are re-timed in turn, so drift between early and late trials cannot pick them.
        contenders = [t.config for t in top[:RETIME_TOP]]
        medians = retime_alternating(
            {c: objective.timed(c) for c in contenders}, timer=objective.retimer
        )
        times.update(medians)
    preds = dict(ranked)
    order = sorted(
        top,
        key=lambda t: (times[t.config] if result.measured else preds[t.config], repr(t.config)),
    )
    best = order[0].config
    failed = [t for t in result.trials if not t.ok and result.measured]
    return TuneOutcome(
        features=features,
        strategy=strategy,
        measured=result.measured,
        device=device.name,
        best_config=best,
        best_time_us=times[best] if result.measured else None,
        predicted_us=preds[best],
        top_k=[
            {"config": t.config.as_dict(), "time_us": times[t.config] if result.measured else None,
             "predicted_us": preds[t.config]}
            for t in order
        ],
        timed=result.timed,
        space=len(space),
        kernels=space_kernels(space),
        seconds=time.perf_counter() - start,
        failures=dict(Counter(t.status for t in failed)),
        other_kernels=_other_kernels(result, order) if result.measured else [],
        model_picks=_model_picks(result, [c for c, _ in model_ranked if c in preds], order) if result.measured else [],
        failed=union_failed([*(FailedConfig.make(t.config.as_dict(), t.status, t.message) for t in failed),
                             *carried]),
    )


def _other_kernels(result, top) -> list[dict]:
    """Of each kernel the search timed with no config in ``top``, its fastest trial (search timings,
    not re-timed: they only tell a refit how far behind that kernel was)."""
    bests = other_kernel_bests([TimedConfig(t.config.as_dict(), t.time_us) for t in result.ranked()],
                               [TimedConfig(t.config.as_dict()) for t in top])
    return [b.to_json() for b in bests]


def _model_picks(result, model_order: list, top) -> list[dict]:
    """Of the model's first ``MODEL_PICKS`` configs (its own order, seeds aside), those the search
    timed that ``top`` leaves out, at their search timings: what the model's favourites cost where
    it was wrong (BENCHMARKS.md 9f)."""
    timed = {t.config: t.time_us for t in result.trials if t.ok}
    shown = {t.config for t in top}
    return [{"config": c.as_dict(), "time_us": timed[c]} for c in model_order[:MODEL_PICKS]
            if c in timed and c not in shown]


def _exclusions(exclude: Iterable | None) -> tuple[set[str], list[FailedConfig]]:
    """The excluded configs' names (exact field sets: a record from another config layout matches
    nothing, rather than being read with defaults as some other config), and the records to carry."""
    names, records = set(), []
    for item in exclude or ():
        if isinstance(item, FailedConfig):
            records.append(item)
            item = item.config
        names.add(_name(item if isinstance(item, dict) else item.as_dict()))
    return names, records


def _name(config: dict) -> str:
    return json.dumps(config, sort_keys=True)
