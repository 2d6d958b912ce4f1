"""Analytic cost models, one module per kernel family, combined by fitted ``Coefficients``."""

from __future__ import annotations

import dataclasses
import hashlib

from stuning.tuning.cost_model.base import Coefficients, CostTerms, fit_coefficients
from stuning.tuning.device import DeviceSpec
from stuning.tuning.features import ProblemFeatures


def problem_id(features: ProblemFeatures) -> tuple:
    """What tells one problem's trials from another's in a fit."""
    return (features.op, features.dtype, repr(sorted(features.values.items())))


def trials_digest(samples) -> str:
    """A digest of (features, config, time_us) trials, in any order: what a fit was made on."""
    rows = sorted(f"{problem_id(f)}|{config_sort_key(c)}|{t!r}" for f, c, t in samples)
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


def config_sort_key(config) -> str:
    """Deterministic tie-breaker between configs."""
    return repr(config)


class CostModel:
    """Predicts a config's time on a device and ranks a config space with it."""

    def __init__(self, device: DeviceSpec, coefficients: dict[str, Coefficients] | None = None):
        self.device = device
        self.coefficients = dict(coefficients or {})

    def terms(self, features: ProblemFeatures, config) -> CostTerms:
        from stuning.tuning.registry import family

        return family(features.op).terms(features, config, self.device)

    def predict_us(self, features: ProblemFeatures, config) -> float:
        coef = self.coefficients.get(features.op, Coefficients())
        return coef.predict_us(self.terms(features, config), config)

    def rank(self, features: ProblemFeatures, configs: list) -> list[tuple[object, float]]:
        """Configs with their predictions, fastest first; ties broken by the config's text."""
        scored = [(c, self.predict_us(features, c)) for c in configs]
        return sorted(scored, key=lambda cp: (cp[1], config_sort_key(cp[0])))

    def prune(self, ranked: list[tuple[object, float]], *, keep: int, within: float) -> list[tuple[object, float]]:
        """The hopeful part of a ranking: at most ``keep`` configs, none predicted over ``within``
        times the best."""
        if not ranked:
            return []
        best = ranked[0][1]
        return [cp for cp in ranked[:keep] if cp[1] <= best * within]

    def fit(self, op: str, samples: list[tuple[ProblemFeatures, object, float]], *, incremental: bool = False
            ) -> Coefficients:
        """Fit this op's coefficients to measured (features, config, time_us) trials; ``incremental``
        starts from (and is pulled toward) the current fit instead of the analytic prior.

        An incremental fit on the very trials the current fit was made on keeps it: each such fit
        would step further from the prior (the ridge toward the last fit wears off), and after four
        refits of unchanged trials the shipped H200 SDDMM fit had turned a recorded ranking around
        (BENCHMARKS.md 8k)."""
        digest = trials_digest(samples)
        prior = self.coefficients.get(op) if incremental else None
        if prior is not None and prior.trials == digest:
            return prior
        terms = [self.terms(f, c) for f, c, _ in samples]
        coef = fit_coefficients(terms, [t for _, _, t in samples], [c for _, c, _ in samples], prior=prior,
                                problems=[problem_id(f) for f, _, _ in samples])
        coef = dataclasses.replace(coef, trials=digest)
        self.coefficients[op] = coef
        return coef


__all__ = ["CostModel", "CostTerms", "Coefficients", "fit_coefficients", "config_sort_key"]
