"""How well the cost model predicts what a tuning database measured, and refitting it on that.

The model ranks and prunes every search, so a fit that misjudges a kernel starves it: the shipped
H200 fit predicted the 2:4 warpgroup kernel 1.65x slower than it ran, and the Triton 2:4 kernel 1.7x
faster (BENCHMARKS.md 8h, 8i). ``stuning tune`` refits after its own tunes; pretunes and merged
databases do not, so ``stuning db refit`` refits a database file on all its measured entries. It
first judges the fit on entries it was not fitted to: one in ``HOLDOUT_EVERY`` (chosen by key) is
held out, the rest fitted, and both fits' errors on the held-out trials are reported.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import zlib
from pathlib import Path

from stuning.db import DBEntry, TuningDB, load_document
from stuning.tuning.cost_model import Coefficients, CostModel
from stuning.tuning.features import ProblemFeatures
from stuning.tuning.registry import family

HOLDOUT_EVERY = 4


@dataclasses.dataclass(frozen=True)
class PredictionReport:
    """One op's predictions against measured trials: the median of |log(predicted / measured)| over
    the trials, and the share of entries (two timed configs or more) whose fastest timed config is
    the one the model predicts fastest among them."""

    entries: int
    trials: int
    median_abs_log_error: float | None
    picks_best: float | None


def held_out(key: str) -> bool:
    """Whether a refit's check leaves this entry out of the fit (a fixed choice by key)."""
    return zlib.crc32(key.encode()) % HOLDOUT_EVERY == 0


def _timed(entries: dict[str, DBEntry]):
    """(op, features, [(config, time_us), ...]) of every measured entry with a timed config."""
    for entry in entries.values():
        if not entry.measured:
            continue
        fam = family(entry.op)
        timed = [(fam.config_from_dict(t.config), t.time_us) for t in entry.timed_configs if t.time_us]
        if timed:
            yield entry.op, ProblemFeatures(entry.op, entry.dtype, dict(entry.features)), timed


def timed_trials(entries: dict[str, DBEntry]) -> dict[str, list[tuple[ProblemFeatures, object, float]]]:
    """Every measured entry's timed configs as (features, config, time_us), by op."""
    by_op: dict[str, list] = {}
    for op, features, timed in _timed(entries):
        by_op.setdefault(op, []).extend((features, c, t) for c, t in timed)
    return by_op


def fit_all(model: CostModel, entries: dict[str, DBEntry]) -> dict[str, Coefficients]:
    """Each op's coefficients fitted to the entries' timed configs, from (and pulled toward) the
    model's current fit; ``model`` keeps the new ones."""
    return {op: model.fit(op, samples, incremental=True) for op, samples in timed_trials(entries).items()}


def prediction_report(model: CostModel, entries: dict[str, DBEntry]) -> dict[str, PredictionReport]:
    errors: dict[str, list[float]] = {}
    picks: dict[str, list[bool]] = {}
    counts: dict[str, int] = {}
    for op, features, timed in _timed(entries):
        predicted = [model.predict_us(features, c) for c, _ in timed]
        errors.setdefault(op, []).extend(abs(math.log(p / t)) for p, (_, t) in zip(predicted, timed, strict=True))
        counts[op] = counts.get(op, 0) + 1
        if len(timed) > 1:
            fastest = min(range(len(timed)), key=lambda i: timed[i][1])
            picks.setdefault(op, []).append(min(range(len(timed)), key=predicted.__getitem__) == fastest)
    return {op: PredictionReport(counts[op], len(errs), statistics.median(errs),
                                 sum(picks[op]) / len(picks[op]) if picks.get(op) else None)
            for op, errs in sorted(errors.items())}


def open_file(path: Path) -> TuningDB:
    """The database in ``path`` alone, its entries judged current, and its header kept, in the
    environment they were tuned in (the file's device and versions), whatever this machine has."""
    from stuning.db import db_file_name
    from stuning.tuning.session import local_environment

    document = load_document(path)
    device = document["device"]["name"]
    if path.name != db_file_name(device):
        raise ValueError(f"{path}: a database of {device!r} must be named {db_file_name(device)}")
    versions = {k: v for k, v in document["versions"].items() if k in ("triton", "torch", "cuda", "stuning")}
    env = dataclasses.replace(local_environment(), device=device, **versions)
    return TuningDB.open(device, search_path=[path.parent], env=env, write_dir=path.parent)


def holdout_check(db: TuningDB) -> tuple[dict[str, DBEntry], CostModel, CostModel]:
    """The held-out measured entries of ``db``, the model with its stored fit, and that model
    refitted on the other measured entries: what a refit is judged by."""
    from stuning.tuning.session import model_for, target_spec

    spec = target_spec(db.device_name)
    entries = {k: e for k, e in db.entries(include_stale=False).items() if e.measured}
    test = {k: e for k, e in entries.items() if held_out(k)}
    refit = model_for(db, spec)
    fit_all(refit, {k: e for k, e in entries.items() if k not in test})
    return test, model_for(db, spec), refit


def refit_file(path: Path) -> dict[str, dict[str, PredictionReport]]:
    """Refit the cost model stored in the database file ``path`` on its measured entries and save
    it there; returns, per op, the held-out check: the stored fit's report ('before') and a fit on
    the other entries' ('after'), both on the held-out entries."""
    from stuning.tuning.driver import refit_model

    db = open_file(path)
    test, stored, refit = holdout_check(db)
    before, after = prediction_report(stored, test), prediction_report(refit, test)
    refit_model(db)  # on every measured entry, saved
    return {op: {"before": before[op], "after": after.get(op, before[op])} for op in before}
