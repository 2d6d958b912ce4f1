"""Search strategies, one module each, sharing the contract in ``base``."""

from __future__ import annotations

from stuning.tuning.search.base import (
    Budget,
    RecordingObjective,
    SearchResult,
    SearchStrategy,
    Trial,
    TrialFailure,
)
from stuning.tuning.search.exhaustive import ExhaustiveSearch
from stuning.tuning.search.model import ModelSearch
from stuning.tuning.search.model_optuna import ModelOptunaSearch

STRATEGIES = {"model": ModelSearch, "model+optuna": ModelOptunaSearch, "exhaustive": ExhaustiveSearch}
DEFAULT_STRATEGY = "model+optuna"


def make_strategy(name: str, **kwargs) -> SearchStrategy:
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](**kwargs)


__all__ = [
    "Budget", "RecordingObjective", "SearchResult", "SearchStrategy", "Trial", "TrialFailure",
    "ExhaustiveSearch", "ModelSearch", "ModelOptunaSearch", "STRATEGIES", "DEFAULT_STRATEGY", "make_strategy",
]
