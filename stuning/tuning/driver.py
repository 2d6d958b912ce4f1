"""Tune suite cases into the database: what ``stuning tune`` and the benchmarks run."""

from __future__ import annotations

import dataclasses
import time
import warnings

import torch

from stuning.kernels.target import DeviceBudget, device_budget, interpreting
from stuning.suite import SDDMMCase, Semi24Case, SpMMCase
from stuning.tuning.coverage import untried_kernels
from stuning.tuning.features import NEAREST_FEATURES, ProblemFeatures
from stuning.tuning.model_check import fit_all
from stuning.tuning.objective import KernelObjective
from stuning.tuning.precompile import precompile
from stuning.tuning.problems import Problem, build_problem, spmm_problem
from stuning.tuning.registry import budget_of, family
from stuning.tuning.search import STRATEGIES, Budget
from stuning.tuning.session import key_for, model_for, open_db, outcome_to_entry, target_spec
from stuning.tuning.synthetic_timer import synthetic_timer
from stuning.tuning.timing import bench_us
from stuning.tuning.tuner import TuneOutcome, default_budget, seeded_ranking, tune

PRECOMPILE_TOP = 16  # the model's favourites, compiled ahead of the search
PRECOMPILE_TIMEOUT_S = 600.0
# A worker process spends ~3 s importing torch and building inputs, then seconds per compile (a 2:4
# wgmma kernel takes several): under this limit the workers would be stopped before they finish,
# and the search compiles as it goes instead. On the H200, --seconds 5 with workers timed one config.
PRECOMPILE_MIN_SECONDS = 20.0
PRECOMPILE_SHARE = 0.5  # of a time limit, the most compiling ahead may take: the rest times configs
SUITE_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
ENTRY_SEEDS = 8  # random matrices tried for an untried entry's key (entry_problem)


def can_measure() -> bool:
    return torch.cuda.is_available() and not interpreting()


def measuring_device() -> str:
    """Where problems are built to be tuned: the GPU when kernels can be timed there."""
    return "cuda" if can_measure() else "cpu"


def require_measuring(strategy: str) -> None:
    if STRATEGIES[strategy].measures and not can_measure() and synthetic_timer() is None:
        raise RuntimeError(
            f"strategy {strategy!r} times kernels and needs a CUDA GPU; without one use --strategy model "
            "(the cost model's choice, stored as a prediction)"
        )


def seeds_from_db(db, features: ProblemFeatures, budget: DeviceBudget | None = None) -> tuple[list, list]:
    """Configs the database suggests (other Triton versions and devices included): every stored
    config of the problem's own entry, to try first, and the best of each of the nearest other
    entries, to try alternately with the model's favourites (``tuner.seeded_ranking``).

    An own entry whose search never tried a kernel the space has on ``budget``'s device (default:
    this one) gives only its best: its other configs are of the old kernels, and a short search
    spent on them would never reach the new one (BENCHMARKS.md 8c). Its configs of a kernel rebuilt
    since are seeds too: they were the best of that kernel's old form."""
    fam = family(features.op)
    own_key = key_for(features)
    own, nearby = [], []
    for entry in db.seeds(features.op, features.dtype, features.values, k=5,
                          feature_names=NEAREST_FEATURES[features.op]):
        mine = key_for(ProblemFeatures(entry.op, entry.dtype, dict(entry.features))) == own_key
        untried = untried_kernels(entry, budget or device_budget()) if mine else []
        kept = [t for t in entry.top_k if not untried or t.config.get("kernel") in untried] if mine else []
        for timed in [entry.best, *kept]:
            try:
                config = fam.repair(fam.config_from_dict(timed.config), features)
            except (TypeError, ValueError):
                continue
            if config not in own and config not in nearby:
                (own if mine else nearby).append(config)
    return own, nearby


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
    return tune_problem(
        build_problem(case, seed=seed), strategy=strategy, budget=budget, db=db, device_name=device_name,
        check=check, precompile_as=case, seed=seed,
    )


def tune_problem(
    problem: Problem,
    *,
    strategy: str = "model+optuna",
    budget: Budget | None = None,
    db=None,
    device_name: str | None = None,
    check: bool = True,
    precompile_as=None,
    seed: int = 0,
    strategy_options: dict | None = None,
) -> tuple[TuneOutcome, str]:
    """Tune a built problem (a suite case's, or one on a given matrix such as a model's weight) the
    way ``tune_case`` does, store the result in ``db`` (saved), and return (outcome, key).

    ``precompile_as``: the suite case whose inputs the parallel precompile workers build; compiled
    kernels depend on shapes and dtypes only, so a case of the same shape serves a given matrix.
    ``strategy_options``: passed to the search strategy (e.g. the Optuna storage of a shared search).
    With ``$STUNING_SYNTHETIC_TIMER`` set, configs are "timed" by that function (tests, benchmarks).

    Configs that the key's entry records as failed in this environment are neither precompiled nor
    tried; this run's failures are stored with the result, so no run pays for them again.
    """
    require_measuring(strategy)
    measuring = STRATEGIES[strategy].measures
    if measuring:
        device_name = None
    spec = target_spec(device_name)
    db = db if db is not None else open_db(spec.name if device_name else None)
    features = problem.features
    model = model_for(db, spec)
    seeds, nearby = seeds_from_db(db, features, budget_of(spec))
    key = key_for(features)
    known_failures = known_failures_of(db, key)
    objective = None
    timer = synthetic_timer() if measuring else None
    if timer is not None:
        objective = lambda config: timer(features, config)  # no kernel runs, so nothing to compile
    elif measuring:
        objective = KernelObjective(problem)
        # The configs the search starts with compile in parallel processes while nothing else runs.
        # That is part of the problem's time limit: a user's --seconds bounds the wall time.
        started = time.perf_counter()
        fam = family(features.op)
        space = fam.space(features, budget_of(spec))  # the space tune() searches, so the default budget is its
        budget = budget or default_budget(len(space))
        failing = [f.config for f in known_failures]
        first = [c for c, _ in seeded_ranking(model.rank(features, space), seeds, nearby)[:PRECOMPILE_TOP]
                 if c.as_dict() not in failing]
        precompile(precompile_as or case_like(features), first[:precompile_width(budget)], seed=seed,
                   timeout_s=precompile_timeout(budget))
        budget = budget.spent(time.perf_counter() - started)
    outcome = tune(
        features, objective=objective, strategy=strategy, device=spec, model=model, budget=budget, seeds=seeds,
        nearby=nearby, exclude=known_failures, strategy_options=strategy_options,
    )
    if check and not measuring:
        KernelObjective(problem).check(outcome.best_config)
    if measuring and timer is None and problem.dense_run is not None:
        outcome = dataclasses.replace(outcome, dense_us=dense_baseline_us(problem))
    db.put(outcome_to_entry(outcome), key)
    db.save()
    return outcome, key


def dense_baseline_us(problem: Problem) -> float | None:
    """The problem done dense, timed like the configs; None if it cannot run (a dense copy too large
    for the GPU's memory, say): a missing baseline must not lose the tuning result."""
    try:
        return bench_us(problem.dense_run)[0]
    except Exception as e:  # noqa: BLE001 - any failure of the baseline is reported and skipped
        warnings.warn(f"dense baseline of {problem.case!r} not timed: {type(e).__name__}: {e}", stacklevel=2)
        return None


def precompile_width(budget: Budget) -> int:
    """How many configs to compile ahead: no more than the search may time (seeds and the model's
    favourites come first), since compiling costs seconds per config."""
    if budget.max_seconds is not None and budget.max_seconds < PRECOMPILE_MIN_SECONDS:
        return 0  # the workers would be stopped before they finish: the search compiles as it goes
    if budget.max_trials is None:
        return PRECOMPILE_TOP
    return max(1, min(PRECOMPILE_TOP, budget.max_trials))


def precompile_timeout(budget: Budget) -> float:
    """How long the workers may compile before they are stopped."""
    if budget.max_seconds is None:
        return PRECOMPILE_TIMEOUT_S
    return budget.max_seconds * PRECOMPILE_SHARE


def known_failures_of(db, key: str) -> list:
    """The failed configs recorded under ``key`` in this environment. Another Triton version's or
    device's failures are not excluded: a different compiler or GPU may well run them."""
    entry = db.get(key)  # current-environment entries only
    return list(entry.failed) if entry is not None else []


def case_like(features: ProblemFeatures):
    """A suite case with the problem's shapes, dtype and operand layout (what compiled kernels are
    specialized on)."""
    v, dtype = features.values, SUITE_DTYPES[features.dtype]
    if features.op == "spmm":
        return SpMMCase(v["m"], v["k"], v["n"], 1.0 - v["density"], v["row_cv"], dtype)
    if features.op == "semi24":
        return Semi24Case(v["m"], v["k"], v["n"], dtype)
    return SDDMMCase(v["m"], v["n"], v["k"], 1.0 - v["density"], dtype, k_strided=bool(v.get("a_t", 0)))


def entry_problem(key: str, entry, *, seed: int = 0) -> tuple[Problem | None, str | None]:
    """A problem keyed ``key`` on random inputs rebuilt from the entry's features, or (None, why not).

    SpMM problems are rebuilt from shape, density, row-length cv and B's layout; SDDMM ones from
    shape, density and A's layout, on a mask of even rows (a skewed mask, as attention's, lands on
    another key). Row lengths are random, so a few rows (a CNN layer's 32) may land on another cv
    bucket: the first of ``ENTRY_SEEDS`` seeds whose matrix has the entry's key is taken, and none is
    tuned if none has, since its result would be stored beside the entry rather than replace it. 2:4
    entries are mostly a layer's (X^T, keyed bt=1), which random inputs do not reproduce:
    ``stuning pretune`` re-tunes them with their model.
    """
    if entry.op not in ("spmm", "sddmm"):
        return None, f"a {entry.op} entry: `stuning pretune` re-tunes it with its model"
    features = ProblemFeatures(entry.op, entry.dtype, dict(entry.features))
    keys = []
    for s in range(seed, seed + ENTRY_SEEDS):
        if entry.op == "spmm":
            problem = spmm_problem(case_like(features), device=measuring_device(), seed=s,
                                   b_transposed=bool(features.values.get("b_t", 0)))
        else:
            problem = build_problem(case_like(features), device=measuring_device(), seed=s)
        keys.append(key_for(problem.features))
        if keys[-1] == key:
            return problem, None
        del problem
    return None, f"random inputs of its features were keyed {', '.join(sorted(set(keys)))}"


def refit_model(db, device_name: str | None = None) -> dict:
    """Fit each op's cost-model coefficients to every measured entry and store them in ``db``."""
    spec = target_spec(device_name or db.device_name)
    fitted = {op: c.as_dict() for op, c in fit_all(model_for(db, spec), db.entries(include_stale=False)).items()}
    if fitted:
        db.update_model_coefficients(fitted)
        db.save()
    return fitted
