"""Tune suite cases into the database: what ``stuning tune`` and the benchmarks run."""

from __future__ import annotations

import torch

from stuning.kernels.target import interpreting
from stuning.tuning.features import NEAREST_FEATURES, ProblemFeatures
from stuning.tuning.objective import KernelObjective
from stuning.tuning.precompile import precompile
from stuning.tuning.problems import build_problem
from stuning.tuning.registry import family
from stuning.tuning.search import STRATEGIES, Budget
from stuning.tuning.session import key_for, model_for, open_db, outcome_to_entry, target_spec
from stuning.tuning.tuner import TuneOutcome, tune

PRECOMPILE_TOP = 16  # the model's favourites, compiled ahead of the search


def can_measure() -> bool:
    return torch.cuda.is_available() and not interpreting()


def require_measuring(strategy: str) -> None:
    if STRATEGIES[strategy].measures and not can_measure():
        raise RuntimeError(
            f"strategy {strategy!r} times kernels and needs a CUDA GPU; without one use --strategy model "
            "(the cost model's choice, stored as a prediction)"
        )


def seeds_from_db(db, features: ProblemFeatures) -> list:
    """Configs of the nearest entries (other Triton versions and devices included) to try first."""
    fam = family(features.op)
    out = []
    for entry in db.seeds(features.op, features.dtype, features.values, k=5,
                          feature_names=NEAREST_FEATURES[features.op]):
        for timed in [entry.best, *entry.top_k]:
            try:
                config = fam.repair(fam.config_from_dict(timed.config), features)
            except (TypeError, ValueError):
                continue
            if config not in out:
                out.append(config)
    return out


def tune_case(
    case,
    *,
    strategy: str = "model+optuna",
    budget: Budget | None = None,
    db=None,
    device_name: str | None = None,
    seed: int = 0,
    check: bool = True,
) -> tuple[TuneOutcome, str]:
    """Tune one suite case, store the result in ``db`` (saved), and return (outcome, key).

    ``device_name`` names a target device for model-only tuning (e.g. 'h100'); measured tuning is
    always for the local GPU. ``check`` runs the chosen config once against the reference (in the
    interpreter when there is no GPU) before anything is stored.
    """
    require_measuring(strategy)
    measuring = STRATEGIES[strategy].measures
    if measuring:
        device_name = None
    spec = target_spec(device_name)
    db = db if db is not None else open_db(spec.name if device_name else None)
    problem = build_problem(case, seed=seed)
    model = model_for(db, spec)
    seeds = seeds_from_db(db, problem.features)
    objective = None
    if measuring:
        objective = KernelObjective(problem.run, problem.reference, problem.features.dtype)
        # The configs the search starts with compile in parallel processes while nothing else runs.
        fam = family(case.op)
        first = seeds + [c for c, _ in model.rank(problem.features, fam.space(problem.features))[:PRECOMPILE_TOP]]
        precompile(case, first, seed=seed)
    outcome = tune(
        problem.features, objective=objective, strategy=strategy, device=spec, model=model,
        budget=budget, seeds=seeds,
    )
    if check and not measuring:
        KernelObjective(problem.run, problem.reference, problem.features.dtype).check(outcome.best_config)
    key = key_for(problem.features)
    db.put(outcome_to_entry(outcome), key)
    db.save()
    return outcome, key


def refit_model(db, device_name: str | None = None) -> dict:
    """Fit each op's cost-model coefficients to every measured entry and store them in ``db``."""
    spec = target_spec(device_name or db.device_name)
    model = model_for(db, spec)
    fitted = {}
    by_op: dict[str, list] = {}
    for entry in db.entries(include_stale=False).values():
        if not entry.measured:
            continue
        features = ProblemFeatures(entry.op, entry.dtype, dict(entry.features))
        fam = family(entry.op)
        for timed in entry.top_k:
            if timed.time_us is not None:
                by_op.setdefault(entry.op, []).append((features, fam.config_from_dict(timed.config), timed.time_us))
    for op, samples in by_op.items():
        fitted[op] = model.fit(op, samples, incremental=True).as_dict()
    if fitted:
        db.update_model_coefficients(fitted)
        db.save()
    return fitted
