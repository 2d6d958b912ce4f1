"""What every search strategy takes and returns.

A strategy gets the candidate configs ranked by the cost model and, when it measures, an objective
that times one config. It returns every trial it made. Objectives raise ``TrialFailure`` for a
config that does not compile, runs out of resources or computes a wrong result; a
``RecordingObjective`` remembers those (and every time) so nothing is tried twice.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from stuning.tuning.cost_model import config_sort_key

STATUS_OK = "ok"
STATUS_PREDICTED = "predicted"  # a model-only result: never measured
# Failures that belong to the config on this compiler and device, so the database records them and
# later runs in the same environment skip them. Anything else ("error") may be transient (memory held
# by another process, a driver hiccup) and is tried again next time.
RECORDED_STATUSES = frozenset({"compile_error", "out_of_resources", "wrong"})


class TrialFailure(Exception):
    """A config that cannot be timed; ``status`` says why (compile_error, out_of_resources, wrong)."""

    def __init__(self, status: str, message: str = ""):
        super().__init__(f"{status}: {message}" if message else status)
        self.status = status
        self.message = message


@dataclass
class Trial:
    config: object
    time_us: float | None
    status: str = STATUS_OK
    predicted_us: float | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK and self.time_us is not None


@dataclass
class Budget:
    max_trials: int | None = None  # configs actually timed
    max_seconds: float | None = None

    def exhausted(self, timed: int, started: float, *, succeeded: int | None = None) -> bool:
        """Whether to stop. The clock never stops a search before a config has run (``succeeded``,
        default ``timed``), so a budget spent elsewhere (compiling ahead) still gives an answer."""
        if self.max_trials is not None and timed >= self.max_trials:
            return True
        ran = timed if succeeded is None else succeeded
        return self.max_seconds is not None and ran > 0 and time.perf_counter() - started >= self.max_seconds

    def spent(self, seconds: float) -> Budget:
        """This budget with ``seconds`` of its time already used."""
        if self.max_seconds is None:
            return self
        return Budget(self.max_trials, max(0.0, self.max_seconds - seconds))


class RecordingObjective:
    """Wraps ``config -> time_us``: caches results and failures, counts distinct timed configs."""

    def __init__(self, fn: Callable[[object], float]):
        self.fn = fn
        self.results: dict[object, Trial] = {}

    @property
    def timed(self) -> int:
        return len(self.results)

    @property
    def succeeded(self) -> int:
        return sum(t.ok for t in self.results.values())

    def __call__(self, config, predicted_us: float | None = None) -> Trial:
        if config in self.results:
            return self.results[config]
        try:
            t = float(self.fn(config))
            trial = Trial(config, t, STATUS_OK, predicted_us)
        except TrialFailure as e:
            trial = Trial(config, None, e.status, predicted_us, e.message)
        self.results[config] = trial
        return trial


@dataclass
class SearchResult:
    strategy: str
    trials: list[Trial]
    measured: bool
    seconds: float
    extra: dict = field(default_factory=dict)

    def ranked(self) -> list[Trial]:
        """Successful trials, fastest first (by measured time, else by prediction), ties by config."""
        ok = [t for t in self.trials if t.ok or (not self.measured and t.status == STATUS_PREDICTED)]

        def key(t: Trial):
            value = t.time_us if self.measured else t.predicted_us
            return (value if value is not None else float("inf"), config_sort_key(t.config))

        return sorted(ok, key=key)

    @property
    def best(self) -> Trial | None:
        r = self.ranked()
        return r[0] if r else None

    def top_k(self, k: int) -> list[Trial]:
        return self.ranked()[:k]

    @property
    def timed(self) -> int:
        return sum(1 for t in self.trials if t.status != STATUS_PREDICTED)


class SearchStrategy(ABC):
    """One way of choosing configs to time. Subclasses set ``name`` and ``measures``."""

    name: str = ""
    measures: bool = True

    @abstractmethod
    def search(
        self,
        ranked: list[tuple[object, float]],
        objective: RecordingObjective | None,
        budget: Budget,
    ) -> SearchResult:
        """``ranked``: (config, predicted_us), fastest predicted first."""
