"""``model``: the cost model's ranking, nothing timed. Needs no GPU; results are predictions."""

from __future__ import annotations

import time

from stuning.tuning.search.base import (
    STATUS_PREDICTED,
    Budget,
    RecordingObjective,
    SearchResult,
    SearchStrategy,
    Trial,
)


class ModelSearch(SearchStrategy):
    name = "model"
    measures = False

    def __init__(self, top_k: int = 5):
        self.top_k = top_k

    def search(self, ranked, objective: RecordingObjective | None, budget: Budget) -> SearchResult:
        start = time.perf_counter()
        trials = [Trial(c, None, STATUS_PREDICTED, p) for c, p in ranked[: self.top_k]]
        return SearchResult(self.name, trials, measured=False, seconds=time.perf_counter() - start)
