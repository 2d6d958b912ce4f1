"""``exhaustive``: time every candidate. The oracle the other strategies are judged against."""

from __future__ import annotations

import time

from stuning.tuning.search.base import Budget, RecordingObjective, SearchResult, SearchStrategy


class ExhaustiveSearch(SearchStrategy):
    name = "exhaustive"

    def search(self, ranked, objective: RecordingObjective | None, budget: Budget) -> SearchResult:
        if objective is None:
            raise ValueError("exhaustive search times every config: it needs an objective (a GPU)")
        start = time.perf_counter()
        # The oracle ignores trial budgets, but honours a time limit if one is given.
        limit = Budget(max_trials=None, max_seconds=budget.max_seconds)
        trials = []
        for config, predicted in ranked:
            if limit.exhausted(objective.timed, start, succeeded=objective.succeeded):
                break
            trials.append(objective(config, predicted))
        return SearchResult(self.name, trials, measured=True, seconds=time.perf_counter() - start)
