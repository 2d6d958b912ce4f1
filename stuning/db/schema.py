"""The tuning-database file format, in one place: constants, an empty document, validation.

A database file is one JSON object per device::

    {
      "schema_version": 1,
      "device": {"name": str, "compute_capability": [major, minor] | null, "sm_count": int | null},
      "versions": {"triton": str | null, "torch": ..., "cuda": ..., "stuning": ...},
      "objective": str,                       # what time_us means
      "parameter_keys": {op: [config field names]},
      "calibration": {...},                   # measured ceilings (filled by a calibrate command)
      "model_coefficients": {...},            # fitted cost-model coefficients
      "entries": {key: entry}
    }

and an entry is::

    {
      "op": str, "dtype": str, "features": {name: number},
      "best": {"config": {name: scalar}, "time_us": number | null},
      "top_k": [{"config": ..., "time_us": ...}, ...],
      "predicted_us": number | null,
      "measured": bool,                       # false: a model-only result, every time_us is null
      "tuner": {"strategy": str, "trials": int, "seconds": number,
                "kernels": [str, ...]},       # optional: the kernels the searched space held
      "env": {"device": str | null, "triton": str | null, "torch": str | null,
              "kernel": str,                  # optional: the op's kernel revision, absent for "1"
              "timer": str},                  # optional: the timer's revision, absent for "1"
      "updated": ISO-8601 timestamp,
      "failed": [{"config": ..., "status": str, "message": str}, ...],  # optional, omitted when empty
      "other_kernels": [{"config": ..., "time_us": ...}, ...],           # optional, omitted when empty
      "model_picks": [{"config": ..., "time_us": ...}, ...]              # optional, omitted when empty
    }

``failed`` lists the configs that could not be timed in the entry's env (status compile_error,
out_of_resources, wrong, ...; message one short line); tuning in that env skips them.

``other_kernels`` holds, of each kernel the search timed that has no config in ``top_k``, its fastest
timed config (fastest first). The top five are one kernel's near-best configs; a cost model fitted on
them alone never sees how slow the losing kernels run, and picks them (BENCHMARKS.md 8p, 8q).

``model_picks`` holds configs the cost model ranked first for the problem, as timed, kept whatever
their time (slowest first, at most ``MODEL_PICKS_KEPT``): where the model was wrong, the fastest
configs alone never show it, and a refit kept picking a config 4.6x slower than the entry's
(BENCHMARKS.md 8y, 9f).

Validation is strict (unknown fields are errors too): the files are machine-written and reviewed in
diffs, so a misspelt field must fail loudly rather than be dropped on the next write.
"""

from __future__ import annotations

import math
from datetime import datetime

SCHEMA_VERSION = 1
DEFAULT_OBJECTIVE = "median kernel time in microseconds (triton.testing.do_bench, L2 flushed)"
TOP_K = 5  # configs kept per entry

HEADER_FIELDS = (
    "schema_version", "device", "versions", "objective",
    "parameter_keys", "calibration", "model_coefficients", "entries",
)
DEVICE_FIELDS = ("name", "compute_capability", "sm_count")
VERSION_FIELDS = ("triton", "torch", "cuda", "stuning")
ENTRY_FIELDS = (
    "op", "dtype", "features", "best", "top_k", "predicted_us", "measured", "tuner", "env", "updated",
)
# Absent when empty, so older files and diffs stay as they were. dense_us: the dense product of the
# same problem (zeros stored, cuBLAS) timed in the tuning run, so an entry says whether it pays.
OPTIONAL_ENTRY_FIELDS = ("failed", "dense_us", "other_kernels", "model_picks")
MODEL_PICKS_KEPT = 8  # per entry: the model's picks of a few searches and probes
TIMED_CONFIG_FIELDS = ("config", "time_us")
FAILED_FIELDS = ("config", "status", "message")
MAX_FAILURE_MESSAGE = 200  # characters: enough to recognise the error, short enough to review in a diff
TUNER_FIELDS = ("strategy", "trials", "seconds")
# The kernels the searched space held (sorted names); absent in entries tuned before it was recorded,
# whose search the kernels' dates in stuning.tuning.coverage tell instead.
TUNER_OPTIONAL_FIELDS = ("kernels",)
ENV_FIELDS = ("device", "triton", "torch")
# The op's kernel revision and the timer's; each absent in entries of its first revision.
ENV_OPTIONAL_FIELDS = ("kernel", "timer")
MISSES_FIELDS = ("schema_version", "device", "misses")
MISS_FIELDS = ("count", "op", "dtype", "features")


class CorruptDatabaseError(ValueError):
    """A database file that is not valid JSON or does not follow the schema."""

    def __init__(self, path, reason: str):
        # Both go to args so that the error survives pickling (multiprocessing workers).
        super().__init__(str(path), reason)
        self.path = str(path)
        self.reason = reason

    def __str__(self) -> str:
        return (
            f"{self.path}: corrupt tuning database ({self.reason}); fix or delete the file, "
            "it is never overwritten automatically"
        )


def empty_document(device: dict, versions: dict, objective: str = DEFAULT_OBJECTIVE) -> dict:
    """A document with a header and no entries."""
    return {
        "schema_version": SCHEMA_VERSION,
        "device": {f: device.get(f) for f in DEVICE_FIELDS},
        "versions": {f: versions.get(f) for f in VERSION_FIELDS},
        "objective": objective,
        "parameter_keys": {},
        "calibration": {},
        "model_coefficients": {},
        "entries": {},
    }


def empty_misses_document(device_name: str) -> dict:
    return {"schema_version": SCHEMA_VERSION, "device": device_name, "misses": {}}


def validate_document(doc, path) -> None:
    """Raise CorruptDatabaseError(path, reason) unless ``doc`` follows the schema."""
    try:
        _check_document(doc)
    except ValueError as e:
        raise CorruptDatabaseError(path, str(e)) from None


def validate_misses_document(doc, path) -> None:
    try:
        _check_fields(doc, MISSES_FIELDS, "document")
        _check_schema_version(doc["schema_version"])
        _check(isinstance(doc["device"], str), "device must be a string")
        _check(isinstance(doc["misses"], dict), "misses must be an object")
        for key, miss in doc["misses"].items():
            where = f"misses[{key!r}]"
            _check_fields(miss, MISS_FIELDS, where)
            _check(_is_int(miss["count"]) and miss["count"] > 0, f"{where}.count must be a positive integer")
            _check(isinstance(miss["op"], str) and isinstance(miss["dtype"], str),
                   f"{where}: op and dtype must be strings")
            _check_features(miss["features"], f"{where}.features")
    except ValueError as e:
        raise CorruptDatabaseError(path, str(e)) from None


def validate_entry(obj, where: str = "entry") -> None:
    """Raise ValueError naming the first field of ``obj`` that breaks the entry schema."""
    _check_fields(obj, ENTRY_FIELDS, where, optional=OPTIONAL_ENTRY_FIELDS)
    _check(isinstance(obj["op"], str) and obj["op"], f"{where}.op must be a non-empty string")
    _check(isinstance(obj["dtype"], str) and obj["dtype"], f"{where}.dtype must be a non-empty string")
    _check_features(obj["features"], f"{where}.features")
    _check(isinstance(obj["measured"], bool), f"{where}.measured must be true or false")
    _check_timed_config(obj["best"], f"{where}.best", obj["measured"])
    _check(isinstance(obj["top_k"], list), f"{where}.top_k must be a list")
    for i, item in enumerate(obj["top_k"]):
        _check_timed_config(item, f"{where}.top_k[{i}]", obj["measured"])
    _check(obj["predicted_us"] is None or _is_time(obj["predicted_us"]),
           f"{where}.predicted_us must be a non-negative number or null")
    tuner = obj["tuner"]
    _check_fields(tuner, TUNER_FIELDS, f"{where}.tuner", optional=TUNER_OPTIONAL_FIELDS)
    if "kernels" in tuner:
        kernels = tuner["kernels"]
        _check(isinstance(kernels, list) and all(isinstance(k, str) and k for k in kernels)
               and kernels == sorted(set(kernels)), f"{where}.tuner.kernels must be a sorted list of distinct names")
    _check(isinstance(tuner["strategy"], str), f"{where}.tuner.strategy must be a string")
    _check(_is_int(tuner["trials"]) and tuner["trials"] >= 0, f"{where}.tuner.trials must be an integer >= 0")
    _check(_is_time(tuner["seconds"]), f"{where}.tuner.seconds must be a non-negative number")
    _check_fields(obj["env"], ENV_FIELDS, f"{where}.env", optional=ENV_OPTIONAL_FIELDS)
    for name in (*ENV_FIELDS, *ENV_OPTIONAL_FIELDS):
        _check(obj["env"].get(name) is None or isinstance(obj["env"][name], str),
               f"{where}.env.{name} must be a string or null")
    _check(isinstance(obj["updated"], str) and _is_timestamp(obj["updated"]),
           f"{where}.updated must be an ISO-8601 timestamp")
    if "failed" in obj:
        _check_failed(obj["failed"], f"{where}.failed")
    if "other_kernels" in obj:
        _check(obj["measured"] and isinstance(obj["other_kernels"], list),
               f"{where}.other_kernels must be a list, in a measured entry only")
        for i, item in enumerate(obj["other_kernels"]):
            _check_timed_config(item, f"{where}.other_kernels[{i}]", True)
    if "model_picks" in obj:
        _check(obj["measured"] and isinstance(obj["model_picks"], list)
               and len(obj["model_picks"]) <= MODEL_PICKS_KEPT,
               f"{where}.model_picks must be a list of at most {MODEL_PICKS_KEPT}, in a measured entry only")
        for i, item in enumerate(obj["model_picks"]):
            _check_timed_config(item, f"{where}.model_picks[{i}]", True)
    if "dense_us" in obj:
        _check(obj["dense_us"] is None or (_is_time(obj["dense_us"]) and obj["dense_us"] > 0),
               f"{where}.dense_us must be a positive number or null")


def _check_document(doc) -> None:
    _check_fields(doc, HEADER_FIELDS, "document")
    _check_schema_version(doc["schema_version"])
    device = doc["device"]
    _check_fields(device, DEVICE_FIELDS, "device")
    _check(isinstance(device["name"], str) and device["name"], "device.name must be a non-empty string")
    cc = device["compute_capability"]
    _check(cc is None or (isinstance(cc, list) and len(cc) == 2 and all(_is_int(x) for x in cc)),
           "device.compute_capability must be [major, minor] or null")
    _check(device["sm_count"] is None or _is_int(device["sm_count"]),
           "device.sm_count must be an integer or null")
    _check_fields(doc["versions"], VERSION_FIELDS, "versions")
    for name in VERSION_FIELDS:
        value = doc["versions"][name]
        _check(value is None or isinstance(value, str), f"versions.{name} must be a string or null")
    _check(isinstance(doc["objective"], str), "objective must be a string")
    keys = doc["parameter_keys"]
    _check(isinstance(keys, dict) and all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in keys.values()
    ), "parameter_keys must map op names to lists of config field names")
    _check(isinstance(doc["calibration"], dict), "calibration must be an object")
    _check(isinstance(doc["model_coefficients"], dict), "model_coefficients must be an object")
    _check(isinstance(doc["entries"], dict), "entries must be an object")
    for key, entry in doc["entries"].items():
        validate_entry(entry, f"entries[{key!r}]")


def _check_schema_version(version) -> None:
    _check(_is_int(version), "schema_version must be an integer")
    _check(version == SCHEMA_VERSION,
           f"schema_version {version} is not supported (this stuning reads version {SCHEMA_VERSION})")


def _check_fields(obj, fields: tuple, where: str, *, optional: tuple = ()) -> None:
    _check(isinstance(obj, dict), f"{where} must be an object")
    missing = [f for f in fields if f not in obj]
    _check(not missing, f"{where} lacks {', '.join(missing)}")
    unknown = sorted(set(obj) - set(fields) - set(optional))
    _check(not unknown, f"{where} has unknown field(s) {', '.join(unknown)}")


def _check_timed_config(obj, where: str, measured: bool) -> None:
    _check_fields(obj, TIMED_CONFIG_FIELDS, where)
    _check_config(obj["config"], f"{where}.config")
    time_us = obj["time_us"]
    if measured:
        _check(_is_time(time_us), f"{where}.time_us must be a non-negative number (the entry is measured)")
    else:
        # A model-only result carries its prediction in predicted_us; it never poses as a timing.
        _check(time_us is None, f"{where}.time_us must be null (the entry is predicted, not measured)")


def _check_failed(failed, where: str) -> None:
    _check(isinstance(failed, list), f"{where} must be a list of {{config, status, message}} objects")
    for i, item in enumerate(failed):
        at = f"{where}[{i}]"
        _check_fields(item, FAILED_FIELDS, at)
        _check_config(item["config"], f"{at}.config")
        _check(isinstance(item["status"], str) and item["status"],
               f"{at}.status must be a non-empty string (e.g. compile_error, out_of_resources)")
        message = item["message"]
        _check(isinstance(message, str) and "\n" not in message and "\r" not in message
               and len(message) <= MAX_FAILURE_MESSAGE,
               f"{at}.message must be one line of at most {MAX_FAILURE_MESSAGE} characters")


def _check_config(config, where: str) -> None:
    _check(isinstance(config, dict) and all(
        isinstance(v, (str, int, float, bool)) or v is None for v in config.values()
    ), f"{where} must map field names to scalars")


def _check_features(features, where: str) -> None:
    _check(isinstance(features, dict) and all(_is_number(v) for v in features.values()),
           f"{where} must map names to finite numbers")


def _check(ok, reason: str) -> None:
    if not ok:
        raise ValueError(reason)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_time(x) -> bool:
    return _is_number(x) and x >= 0


def _is_timestamp(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True
