"""``model+optuna`` (the default): the cost model prunes and seeds, Optuna's TPE searches the rest.

The ranking's first top-k (the seeded order of ``tuner.seeded_ranking``: the database's configs and
each kernel's favourite among the model's) are Optuna's first trials, whatever the model predicts
for them; the rest is pruned by the model. TPE then samples each config field as a categorical
over the values the survivors use. A sampled combination that is not a survivor is mapped to the
survivor that shares the most fields with it (untimed ones first), and the study is told what was
really timed, so its history stays true.

The last quarter of the budget (trials and seconds) goes to the winner's neighbours: untimed
configs of the whole ranked space that differ from the best timed one in one field, in the model's
order, the best updated after each (a hill climb). TPE samples each field on its own and from the
survivors' values only, so it can miss the one change that pays: a split of K into 3 instead of 4,
8% faster for 2:4 at 11008 x 4096, ranked 95th of 600 by the model (BENCHMARKS.md 7l). Where another
kernel kind's best timed config is within ``kind_tie`` of the best, the climb alternates between the
kinds: a kind's better configs can lie two fields from the leader (2:4 at N = 16: the sparse-MMA
kernel's 16 splits, a field value the Hopper kernel does not have; BENCHMARKS.md 7t).

Given an Optuna ``storage`` and a ``study_name``, the study lives there: a search of the same study
by another process (after this one died, on any machine sharing the storage) resumes its trials
(see ``persistent_study``).
"""

from __future__ import annotations

import dataclasses
import math
import time

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from stuning.tuning.cost_model import config_sort_key
from stuning.tuning.search.base import Budget, RecordingObjective, SearchResult, SearchStrategy, Trial
from stuning.tuning.search.persistent_study import open_study, restore_trials, study_distributions, trial_attrs

# Optuna needs finite values: failed configs are told as this many times the worst time seen.
_FAILURE_PENALTY = 10.0


class ModelOptunaSearch(SearchStrategy):
    name = "model+optuna"

    def __init__(self, top_k: int = 8, keep_fraction: float = 0.3, within: float = 4.0, seed: int = 0,
                 storage=None, study_name: str | None = None, neighbour_share: float = 0.25,
                 kind_tie: float = 1.1):
        self.top_k = top_k
        self.neighbour_share = neighbour_share  # of the budget, for the best config's neighbours
        self.kind_tie = kind_tie  # other kernel kinds whose best is within this factor are climbed too
        self.keep_fraction = keep_fraction
        self.within = within
        self.seed = seed
        self.storage = storage  # an Optuna storage (and the study's name in it), or None: in memory
        self.study_name = study_name

    def survivors(self, ranked: list[tuple[object, float]]) -> list[tuple[object, float]]:
        """The first ``top_k`` of ``ranked`` whatever the model predicts for them, then the rest of
        the first ``keep_fraction`` predicted within ``within`` times the best.

        The head is the search's seeded start (the problem's stored configs, then neighbours' best
        alternating with the model's favourites: ``tuner.seeded_ranking``), and what the database
        measured outranks what the model predicts: a model off by 7x for one kernel (the 2:4
        warpgroup kernel at N = 512, predicted 44 us, the Triton one 6.5 us) dropped that kernel's
        seeds untimed, and the search kept a config 3.7x slower than dense (BENCHMARKS.md 8h)."""
        if not ranked:
            return []
        keep = max(self.top_k, math.ceil(self.keep_fraction * len(ranked)))
        best = min(p for _, p in ranked)
        return ranked[: self.top_k] + [cp for cp in ranked[self.top_k:keep] if cp[1] <= best * self.within]

    def search(self, ranked, objective: RecordingObjective | None, budget: Budget) -> SearchResult:
        if objective is None:
            raise ValueError("model+optuna times configs: it needs an objective (a GPU); use strategy 'model'")
        start = time.perf_counter()
        survivors = self.survivors(ranked)
        predicted = dict(survivors)
        names = [f.name for f in dataclasses.fields(survivors[0][0])]
        dists = {
            n: CategoricalDistribution(sorted({getattr(c, n) for c, _ in survivors}, key=repr)) for n in names
        }
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=max(4, self.top_k // 2))
        study = open_study(self.storage, self.study_name, sampler)
        config_type = type(survivors[0][0])
        trials: list[Trial] = restore_trials(study, config_type, objective, dict(ranked))
        dists = study_distributions(study, dists)
        if not study.get_trials(deepcopy=False):  # a resumed study keeps the queue it was given
            for config, _ in survivors[: self.top_k]:
                study.enqueue_trial({n: getattr(config, n) for n in names})

        worst = max((t.time_us for t in trials if t.ok), default=0.0)
        misses = 0
        sampling = _share(budget, 1.0 - self.neighbour_share)

        def sample_more() -> bool:
            # TPE's share ends early only once something ran: a climb needs a best to start from.
            if budget.exhausted(objective.timed, start, succeeded=objective.succeeded):
                return False
            return not (objective.succeeded and sampling.exhausted(objective.timed, start))

        while len(trials) < len(survivors) and sample_more():
            asked = study.ask(dists)
            try:
                sampled = config_type(**asked.params)
            except ValueError:  # TPE samples each parameter alone: a mix no kernel takes (sell + prefetch)
                sampled = None
            config = sampled if sampled in predicted else self._nearest(asked.params, survivors, objective)
            if config in objective.results:
                # Every survivor near this sample is timed already: let TPE move on.
                study.tell(asked, state=TrialState.PRUNED)
                misses += 1
                if misses > 4 * len(survivors):
                    break
                continue
            try:
                trial = objective(config, predicted[config])
            except BaseException:
                # An interrupt says nothing about the config: a failed trial without a status is one
                # a resumed search may time again (a crash leaves it running: see persistent_study).
                study.tell(asked, state=TrialState.FAIL)
                raise
            trials.append(trial)
            if trial.ok:
                worst = max(worst, trial.time_us)
            value = trial.time_us if trial.ok else _FAILURE_PENALTY * max(worst, 1.0)
            if config == sampled:
                for name, attr in trial_attrs(trial).items():
                    asked.set_user_attr(name, attr)
                study.tell(asked, value)
            else:
                study.tell(asked, state=TrialState.PRUNED)
                study.add_trial(create_trial(params={n: getattr(config, n) for n in names}, distributions=dists,
                                             value=value, user_attrs=trial_attrs(trial)))
        climbed = self._climb(ranked, trials, objective, budget, start, self.kind_tie)
        return SearchResult(
            self.name,
            trials,
            measured=True,
            seconds=time.perf_counter() - start,
            extra={"space": len(ranked), "survivors": len(survivors), "neighbours": climbed},
        )

    @staticmethod
    def _climb(ranked, trials: list[Trial], objective: RecordingObjective, budget: Budget, start: float,
               kind_tie: float) -> int:
        """Time untimed one-field neighbours (model order) of the best config, and in turn of each
        other kernel kind's best within ``kind_tie`` of it, each start updated after every trial,
        until the budget ends or none is left; returns how many were timed. Not told to the study,
        whose distributions may not hold their values: a search resumed from a stored study may time
        them again."""
        climbed = 0
        while not budget.exhausted(objective.timed, start, succeeded=objective.succeeded):
            ok = [t for t in objective.results.values() if t.ok]
            if not ok:
                return climbed
            steps = [next(((c, p) for c, p in ranked if c not in objective.results and _one_apart(c, best)), None)
                     for best in _climb_starts(ok, kind_tie)]
            steps = [step for step in steps if step is not None]
            if not steps:
                return climbed
            trials.append(objective(*steps[climbed % len(steps)]))
            climbed += 1
        return climbed

    @staticmethod
    def _nearest(params: dict, survivors, objective: RecordingObjective):
        def score(cp):
            config, pred = cp
            shared = sum(getattr(config, n) == v for n, v in params.items())
            return (config in objective.results, -shared, pred, config_sort_key(config))

        return min(survivors, key=score)[0]


def _climb_starts(ok: list[Trial], kind_tie: float) -> list:
    """The best timed config, then the best of each other kernel kind (a config's ``kernel`` field)
    timed within ``kind_tie`` of it, fastest first."""
    ranked = sorted(ok, key=lambda t: (t.time_us, config_sort_key(t.config)))
    best_time = ranked[0].time_us
    starts, kinds = [], set()
    for t in ranked:
        kind = getattr(t.config, "kernel", None)
        if kind in kinds or (starts and t.time_us > kind_tie * best_time):
            continue
        kinds.add(kind)
        starts.append(t.config)
    return starts


def _share(budget: Budget, fraction: float) -> Budget:
    """``fraction`` of ``budget``'s trials and seconds (at least one trial)."""
    return Budget(
        None if budget.max_trials is None else max(1, math.floor(fraction * budget.max_trials)),
        None if budget.max_seconds is None else fraction * budget.max_seconds,
    )


def _one_apart(a, b) -> bool:
    """Whether two configs of one type differ in exactly one field."""
    return sum(getattr(a, f.name) != getattr(b, f.name) for f in dataclasses.fields(a)) == 1
