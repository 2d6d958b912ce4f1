"""``stuning.pretune``: tune every distinct sparse product of a model once, ahead of serving it.

A problem is what the tuning database keys on (op, dtype, shape, bucketed sparsity features, token
bucket), so layers that share a key (the same projection in every block, pruned alike) are tuned
once, on the first such layer's weight. Each result is saved as soon as it is found, and problems
already in the database are skipped: an interrupted run picks up where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from stuning.db.entry import speedup_over_dense
from stuning.db.environment import timer_revision
from stuning.kernels.target import interpreting
from stuning.nn.weights import SparseWeight
from stuning.tuning.registry import TORCH_DTYPES
from stuning.tuning.timing import TIMER_REVISION

DEFAULT_TOKENS = (16, 128, 512, 2048)

TUNED, DONE, UNSUPPORTED, FAILED = "tuned", "skipped", "unsupported", "failed"
LEFT = "not started"  # max_seconds came first; a rerun tunes it


@dataclass
class PretuneProblem:
    key: str
    op: str
    shape: tuple[int, int]
    tokens: int
    dtype: str
    layers: list[str]  # every layer sharing the key; the first one's weight is what is tuned
    x_transposed: bool = False  # the layers read X through a transposed view (SparseLinear.reads_x_transposed)
    # The layers write Y^T through a transposed out= (SparseLinear.writes_y_transposed); where layers
    # of both kinds share a key, the first one's way is tuned.
    y_transposed: bool = False
    status: str = ""  # tuned | skipped (already in the database) | unsupported | failed | not started
    config: dict | None = None
    measured: bool = False
    time_us: float | None = None
    predicted_us: float | None = None
    dense_us: float | None = None  # the layer's dense product at these tokens, timed in the same run
    seconds: float = 0.0
    note: str = ""

    @property
    def speedup_vs_dense(self) -> float | None:
        return speedup_over_dense(self.dense_us, self.time_us)

    def fill_from(self, entry, status: str) -> None:
        """Take the result a database entry holds for this problem."""
        self.status, self.config, self.measured = status, dict(entry.best.config), entry.measured
        self.time_us, self.predicted_us, self.dense_us = entry.best.time_us, entry.predicted_us, entry.dense_us

    def to_dict(self) -> dict:
        return {**asdict(self), "shape": list(self.shape), "speedup_vs_dense": self.speedup_vs_dense}


@dataclass
class PretuneReport:
    strategy: str
    device: str  # the database's device
    database: str  # the file written (or that would be)
    problems: list[PretuneProblem] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(p.status == status for p in self.problems)

    @property
    def tuned(self) -> int:
        return self.count(TUNED)

    @property
    def skipped(self) -> int:
        return self.count(DONE)

    @property
    def unsupported(self) -> int:
        return self.count(UNSUPPORTED)

    @property
    def failed(self) -> int:
        return self.count(FAILED)

    @property
    def not_started(self) -> int:
        return self.count(LEFT)

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "device": self.device, "database": self.database,
                "seconds": round(self.seconds, 3), "tuned": self.tuned, "skipped": self.skipped,
                "unsupported": self.unsupported, "failed": self.failed, "not_started": self.not_started,
                "problems": [p.to_dict() for p in self.problems]}


def sparse_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The layers whose weight is a ``SparseWeight`` (``SparseLinear``, ``SparseConv2d``, any later one)."""
    return [(name, m) for name, m in model.named_modules()
            if isinstance(getattr(m, "sparse_weight", None), SparseWeight)]


def _check_tokens(tokens) -> list[int]:
    values = [tokens] if isinstance(tokens, int) else list(tokens)
    if not values or not all(isinstance(t, int) and t > 0 for t in values):
        raise ValueError(f"pretune: tokens must be positive integers, got {tokens!r}")
    return sorted(set(values))


def _open(db, device_name: str | None):
    from stuning.db import TuningDB
    from stuning.tuning.session import open_db

    if isinstance(db, TuningDB):
        return db
    if db is None:
        return open_db(device_name)
    if isinstance(db, (str, Path)):
        directory = Path(db)
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"pretune: db must be a directory (the database's file goes in it), got file {db}")
        return open_db(device_name, search_path=[directory], write_dir=directory)
    raise TypeError(f"pretune: db must be a TuningDB, a directory or None, got {type(db).__name__}")


def _columns(model: nn.Module, tokens, input_shapes) -> list[int] | dict[str, list[int]]:
    """The N values to tune: ``tokens`` for every layer, or each layer's own from ``input_shapes``."""
    if input_shapes is not None:
        if tokens is not None:
            raise ValueError("pretune: give tokens (the N of every layer) or input_shapes, not both")
        from stuning.nn.shapes import gemm_columns

        return gemm_columns(model, input_shapes)
    if tokens is None:
        from stuning.nn.conv import SparseConv2d

        if any(isinstance(m, SparseConv2d) for _, m in sparse_layers(model)):
            raise ValueError("pretune: a convolution's N (batch x H_out x W_out) depends on the input: pass "
                             "input_shapes=[(B, C, H, W), ...] (or tokens= the N values themselves)")
        tokens = DEFAULT_TOKENS
    return _check_tokens(tokens)


def collect_problems(model: nn.Module, tokens: Iterable[int] | dict[str, Iterable[int]],
                     dtype: torch.dtype | None = None) -> tuple[list[PretuneProblem], dict[str, SparseWeight]]:
    """The distinct problems of ``model`` at each token count (or each layer's, keyed by its name),
    and the weight each is tuned on."""
    from stuning.tuning.features import dtype_name
    from stuning.tuning.session import key_for

    layers = sparse_layers(model)
    if not layers:
        raise ValueError("pretune: the model has no sparse layers; run stuning.sparsify(model, ...) first")
    problems: dict[str, PretuneProblem] = {}
    weights: dict[str, SparseWeight] = {}
    for name, layer in layers:
        w: SparseWeight = layer.sparse_weight
        wanted = dtype or w.dtype
        for t in tokens.get(name, ()) if isinstance(tokens, dict) else tokens:
            x_transposed = layer.reads_x_transposed(t, wanted)
            features = w.features(t, wanted, x_transposed=x_transposed)
            key = key_for(features)
            if key in problems:
                problems[key].layers.append(name)
                continue
            problems[key] = PretuneProblem(key, w.op, w.shape, t, dtype_name(wanted), [name],
                                           x_transposed=x_transposed, y_transposed=layer.writes_y_transposed())
            weights[key] = w
            if wanted not in w.kernel_dtypes:
                problems[key].status = UNSUPPORTED
                problems[key].note = f"the {w.format} kernel has no {wanted} version"
    return list(problems.values()), weights


def pretune(model: nn.Module, *, tokens: Iterable[int] | int | None = None, input_shapes=None, db=None,
            budget=None, strategy: str = "model+optuna", device: str | None = None, dtype: torch.dtype | None = None,
            check: bool = True, progress: bool = True, seed: int = 0, workers=None,
            storage: str | None = None, refresh: bool = False, max_seconds: float | None = None) -> PretuneReport:
    """Tune the sparse layers of ``model`` (see ``stuning.sparsify``) at each token count in ``tokens``.

    ``tokens``: the N of every layer's ``W @ X`` (a linear layer's tokens: batch x sequence; default
    ``DEFAULT_TOKENS``). ``input_shapes``: instead, the shapes of the inputs the model will be served
    (e.g. ``[(1, 3, 224, 224), (8, 3, 224, 224)]``), from which each layer's own N is found by a
    forward pass on meta tensors (nothing computed); a convolution's N = batch x H_out x W_out, so a
    model with ``SparseConv2d`` layers needs ``input_shapes`` (or ``tokens`` given as those N).

    ``db``: a ``TuningDB``, a directory (its database file for the device is read and written; point
    ``$STUNING_DB_DIR`` at it when serving), or ``None`` for the device's default database.
    ``budget``: a ``stuning.tuning.search.Budget`` per problem (default: the tuner's). ``strategy``:
    ``model`` (no GPU needed: stores the cost model's prediction), ``model+optuna`` or ``exhaustive``
    (both time kernels on this GPU). ``device``: the target of ``model`` tuning (e.g. ``"h100"``).
    ``dtype``: tune as if the weights were of this dtype (e.g. an fp32 model to be served in fp16).
    ``check`` runs each chosen config once against a reference before it is stored. A problem that
    cannot be tuned (no valid config, every config failing) is reported as ``failed`` and the others
    go on; at run time it gets the kernel's heuristic config. ``refresh`` searches again the problems
    whose stored measurements would otherwise answer (after an upgrade widened a config space), the
    stored configs timed first as seeds. ``max_seconds``: no problem starts after this long (a
    worker's first always does); those left are reported ``not started``, and a rerun tunes them.

    ``workers``: tune in this many processes, one per GPU ("auto": every visible GPU); ``storage``:
    an Optuna storage URL (a journal file, or an RDB URL such as PostgreSQL) holding the work list
    and every search, which the same call on other machines joins and a rerun resumes. See
    ``stuning.nn.shared_pretune``.
    """
    from stuning.ops.selection import SELECTOR
    from stuning.tuning.driver import can_measure, measuring_device, require_measuring
    from stuning.tuning.search import STRATEGIES
    from stuning.tuning.session import target_spec

    require_measuring(strategy)
    if max_seconds is not None and not max_seconds > 0:
        raise ValueError(f"pretune: max_seconds must be positive, got {max_seconds}")
    measuring = STRATEGIES[strategy].measures
    problems, weights = collect_problems(model, _columns(model, tokens, input_shapes), dtype)
    device_name = target_spec(device).name if device and not measuring else None
    tuning_db = _open(db, device_name)
    if workers is not None or storage is not None:
        from stuning.nn.shared_pretune import pretune_shared

        return pretune_shared(model, problems, weights, tuning_db, strategy=strategy, budget=budget,
                              device_name=device_name, check=check, progress=progress, seed=seed, workers=workers,
                              storage=storage, refresh=refresh, max_seconds=max_seconds)
    report = PretuneReport(strategy, tuning_db.device_name, str(tuning_db.write_path), problems)
    run_device = measuring_device()
    can_check = check and (can_measure() or interpreting())
    start = time.perf_counter()
    started = False
    with pretune_progress(progress) as bar:
        task = bar.add_task(f"pretune ({strategy})", total=len(problems))
        for p in problems:
            bar.update(task, description=f"{p.layers[0]} {p.op} n={p.tokens}")
            if p.status == UNSUPPORTED:
                pass
            elif started and past(start, max_seconds) and not answers(tuning_db.get(p.key), measuring, refresh):
                p.status = LEFT
            else:
                tune_one(p, weights[p.key], tuning_db, measuring, strategy=strategy, budget=budget,
                          device_name=device_name, check=can_check, run_device=run_device, seed=seed,
                          refresh=refresh)
                started = started or p.status != DONE
            bar.advance(task)
    report.seconds = time.perf_counter() - start
    refit_after(tuning_db, problems, measuring)
    if report.tuned:
        # Forget the configs chosen before this run, so the layers look the new entries up.
        SELECTOR.reset()
        for _, layer in sparse_layers(model):
            layer.sparse_weight.matrix.cache.clear()
    return report


def past(start: float, max_seconds: float | None) -> bool:
    """Whether ``max_seconds`` (None: no limit) have passed since ``start`` (``time.perf_counter()``)."""
    return max_seconds is not None and time.perf_counter() - start > max_seconds


def refit_after(tuning_db, problems: list[PretuneProblem], measuring: bool) -> None:
    """Refit the database's cost model on its measured entries once a measuring pretune stored new
    ones, as ``stuning tune`` does: a shipped fit that no pretune had updated misjudged whole kernels
    by 1.7x (BENCHMARKS.md 8i)."""
    if measuring and any(p.status == TUNED for p in problems):
        from stuning.tuning.driver import refit_model

        refit_model(tuning_db)


def answers(held, measuring: bool, refresh: bool = False) -> bool:
    """Whether the stored entry ``held`` (or None) already answers a pretune run.

    A prediction does not answer a measuring run; a measurement answers any run, unless an older
    timer took it (its times do not compare) or its search never tried a kernel the problem's space
    has on this device now (``stuning.tuning.coverage``): the search then runs again with its
    configs as seeds (only its best in the second case). A measuring ``refresh`` run takes nothing
    as answered.
    """
    if held is None or (refresh and measuring):
        return False
    if not measuring:
        return True
    from stuning.kernels.target import device_budget
    from stuning.tuning.coverage import untried_kernels

    return (held.measured and timer_revision(held.env) >= int(TIMER_REVISION)
            and not untried_kernels(held, device_budget()))


def tune_one(p: PretuneProblem, weight: SparseWeight, db, measuring: bool, *, run_device, refresh: bool = False,
             **options) -> None:
    from stuning.tuning.driver import tune_problem

    held = db.get(p.key)
    if answers(held, measuring, refresh):
        p.fill_from(held, DONE)
        return
    from stuning.tuning.search import TrialFailure

    problem = weight.tuning_problem(p.tokens, dtype=TORCH_DTYPES[p.dtype], device=run_device, seed=options["seed"],
                                    x_transposed=p.x_transposed, y_transposed=p.y_transposed)
    try:
        outcome, key = tune_problem(problem, db=db, **options)
    except (ValueError, RuntimeError, TrialFailure) as e:
        # One problem without a valid or working config (the run time then uses the kernel's
        # heuristic) must not cost the others their tuning.
        p.status, p.note = FAILED, " ".join(str(e).split())[:200]
        return
    if key != p.key:
        raise RuntimeError(f"pretune: the problem tuned under {key}, not {p.key}: features differ on {run_device}")
    p.status, p.config, p.measured = TUNED, outcome.best_config.as_dict(), outcome.measured
    p.time_us, p.predicted_us, p.seconds = outcome.best_time_us, outcome.predicted_us, round(outcome.seconds, 3)
    p.dense_us = outcome.dense_us


def pretune_progress(enabled: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True, quiet=not enabled), transient=False)
