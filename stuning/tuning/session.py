"""Where tuning meets the database: this machine's environment, keys, and entries from outcomes."""

from __future__ import annotations

import functools

import torch

from stuning.db import DBEntry, Environment, TimedConfig, TuningDB, make_key
from stuning.kernels.target import interpreting
from stuning.tuning.cost_model import Coefficients, CostModel
from stuning.tuning.device import DeviceSpec, local_spec, spec_for
from stuning.tuning.features import ProblemFeatures
from stuning.tuning.registry import KERNEL_REVISIONS
from stuning.tuning.search.base import RECORDED_STATUSES
from stuning.tuning.timing import TIMER_REVISION

# The database "device" of runs through Triton's CPU interpreter: predictions only, never timings.
INTERPRETER_DEVICE = "Triton interpreter (CPU)"


def local_device_name() -> str:
    if torch.cuda.is_available() and not interpreting():
        return torch.cuda.get_device_name()
    return INTERPRETER_DEVICE


@functools.cache
def local_environment() -> Environment:
    name = local_device_name()
    if name == INTERPRETER_DEVICE:
        return Environment.detect(name, kernel_revisions=kernel_revisions(), timer=TIMER_REVISION)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return Environment.detect(
        name, cuda=torch.version.cuda, compute_capability=(props.major, props.minor),
        sm_count=props.multi_processor_count, kernel_revisions=kernel_revisions(), timer=TIMER_REVISION,
    )


def kernel_revisions() -> tuple[tuple[str, str], ...]:
    return tuple(sorted(KERNEL_REVISIONS.items()))


def target_spec(device_name: str | None = None) -> DeviceSpec:
    """The cost model's device: a named target, else this GPU, else the default (H100) spec."""
    if device_name and device_name != INTERPRETER_DEVICE:
        return spec_for(device_name)
    return local_spec()


def resolve_device_name(name: str) -> str:
    """The database device a user means: a name with a database file on the search path as it is
    ('NVIDIA H100 80GB HBM3'), else the device table's name for it ('h100' -> 'NVIDIA H100 SXM')."""
    from stuning.db import db_file_name, default_search_path

    if name == local_device_name() or any((d / db_file_name(name)).is_file() for d in default_search_path()):
        return name
    try:
        return spec_for(name).name
    except ValueError:
        return name


def open_db(device_name: str | None = None, **options) -> TuningDB:
    """The tuning database of ``device_name`` (default: this machine's device)."""
    name = resolve_device_name(device_name) if device_name else local_device_name()
    env = (local_environment() if name == local_device_name()
           else Environment.detect(name, kernel_revisions=kernel_revisions(), timer=TIMER_REVISION))
    return TuningDB.open(name, env=env, **options)


# The shipped database whose fitted coefficients stand in for a device that has none of its own:
# the parameter effects they hold (narrow loads, cross-warp reductions) are Triton's more than the GPU's.
REFERENCE_DB = "NVIDIA H100 80GB HBM3"


@functools.lru_cache(maxsize=1)
def reference_coefficients() -> dict:
    from stuning.db import db_file_name, load_document
    from stuning.db.paths import shipped_dir

    path = shipped_dir() / db_file_name(REFERENCE_DB)
    try:
        return dict(load_document(path).get("model_coefficients", {}))
    except (OSError, ValueError):
        return {}


def model_for(db: TuningDB, device: DeviceSpec) -> CostModel:
    """A cost model on the database's calibrated ceilings and fitted coefficients; ops it has no fit
    for use the reference device's shipped fit."""
    if db.calibration:
        device = device.with_calibration(db.calibration)
    fitted = {**reference_coefficients(), **(db.model_coefficients or {})}
    return CostModel(device, {op: Coefficients.from_dict(c) for op, c in fitted.items()})


def key_for(features: ProblemFeatures) -> str:
    return make_key(features.op, features.dtype, features.key_features())


def outcome_to_entry(outcome) -> DBEntry:
    """A database entry from a ``TuneOutcome``; model-only outcomes are marked as predictions.

    The outcome's failures of a recorded kind (compile_error, out_of_resources, wrong) go into the
    entry's ``failed``; they include the stored ones the run excluded, and TuningDB.put unites them
    with whatever else is held for the key in this environment.
    """
    top = [TimedConfig(t["config"], t["time_us"] if outcome.measured else None) for t in outcome.top_k]
    return DBEntry(
        op=outcome.features.op,
        dtype=outcome.features.dtype,
        features=dict(outcome.features.values),
        best=TimedConfig(outcome.best_config.as_dict(), outcome.best_time_us if outcome.measured else None),
        top_k=top,
        predicted_us=outcome.predicted_us,
        measured=outcome.measured,
        tuner={"strategy": outcome.strategy, "trials": outcome.timed, "seconds": round(outcome.seconds, 3)}
        | ({"kernels": list(outcome.kernels)} if outcome.kernels else {}),
        failed=[f for f in outcome.failed if f.status in RECORDED_STATUSES],
        dense_us=outcome.dense_us if outcome.measured else None,
        other_kernels=[TimedConfig(t["config"], t["time_us"]) for t in outcome.other_kernels],
        model_picks=[TimedConfig(t["config"], t["time_us"]) for t in outcome.model_picks],
    )
