"""One tuning result (DBEntry), its key, and the rule that merges two results for the same key."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from stuning.db.environment import same_environment, timer_revision
from stuning.db.schema import (
    ENV_FIELDS,
    ENV_OPTIONAL_FIELDS,
    MAX_FAILURE_MESSAGE,
    MODEL_PICKS_KEPT,
    TOP_K,
    validate_entry,
)

KEY_SEPARATOR = "|"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def dtype_name(dtype) -> str:
    """'float16' for 'float16' or torch.float16 (read through str, so torch is not imported here)."""
    return str(dtype).removeprefix("torch.")


def format_feature(value) -> str:
    """A short, stable spelling: integral numbers without a decimal point, others to 6 digits.

    4096 and 4096.0 spell the same, so a key does not depend on whether the caller's bucketing
    returned an int or a float; 6 significant digits keep keys short and are far finer than any
    bucket grid.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str) and KEY_SEPARATOR not in value and "=" not in value:
            return value
        raise ValueError(f"key feature value {value!r} must be a number or a string without '|' or '='")
    if not math.isfinite(value):
        raise ValueError(f"key feature value {value!r} must be finite")
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return format(value, ".6g")


def make_key(op: str, dtype, key_features: dict) -> str:
    """'spmm|float16|cv=0.4|density=0.1|k=4096|m=4096|n=128': op, dtype, then sorted name=value.

    The caller buckets the features; this only formats them.
    """
    parts = [op, dtype_name(dtype)]
    for part in parts:
        if not part or KEY_SEPARATOR in part:
            raise ValueError(f"op and dtype must be non-empty and free of '|', got {part!r}")
    for name in sorted(key_features):
        if not name or KEY_SEPARATOR in name or "=" in name:
            raise ValueError(f"key feature name {name!r} must be non-empty and free of '|' and '='")
        parts.append(f"{name}={format_feature(key_features[name])}")
    return KEY_SEPARATOR.join(parts)


def speedup_over_dense(dense_us: float | None, time_us: float | None) -> float | None:
    """dense time / sparse time (> 1: the sparse kernel pays), when both were measured."""
    if dense_us is None or not time_us:
        return None
    return dense_us / time_us


@dataclass(frozen=True)
class TimedConfig:
    config: dict
    time_us: float | None = None  # None: not measured

    def to_json(self) -> dict:
        return {"config": dict(self.config), "time_us": self.time_us}

    @classmethod
    def from_json(cls, obj: dict) -> TimedConfig:
        return cls(dict(obj["config"]), obj["time_us"])


@dataclass(frozen=True)
class FailedConfig:
    """A config that could not be timed in the entry's environment, and why; never tried again there."""

    config: dict
    status: str  # compile_error | out_of_resources | wrong | ...
    message: str = ""

    @classmethod
    def make(cls, config: dict, status: str, message: str = "") -> FailedConfig:
        """A record whose message is one short line, as the schema requires (Triton's can be pages)."""
        lines = str(message).strip().splitlines()
        return cls(dict(config), status, lines[0][:MAX_FAILURE_MESSAGE] if lines else "")

    def to_json(self) -> dict:
        return {"config": dict(self.config), "status": self.status, "message": self.message}

    @classmethod
    def from_json(cls, obj: dict) -> FailedConfig:
        return cls(dict(obj["config"]), obj["status"], obj["message"])


@dataclass(frozen=True)
class DBEntry:
    """A tuned (measured) or model-ranked (predicted) config for one bucket of problems."""

    op: str
    dtype: str
    features: dict  # numeric problem features, for nearest-neighbour lookup
    best: TimedConfig
    top_k: list = field(default_factory=list)  # [TimedConfig], fastest first
    predicted_us: float | None = None  # the cost model's prediction for best
    measured: bool = True  # False: model-only, all time_us are None
    tuner: dict = field(default_factory=lambda: {"strategy": "unknown", "trials": 0, "seconds": 0.0})
    env: dict = field(default_factory=dict)  # {device, triton, torch, kernel, timer}; TuningDB.put fills it if empty
    updated: str = field(default_factory=now_iso)
    failed: list = field(default_factory=list)  # [FailedConfig] in env; see union_failed for the order
    dense_us: float | None = None  # the same problem as a dense product (cuBLAS), timed in the same run
    # [TimedConfig]: each kernel with no config in top_k, at its fastest timed config (other_kernel_bests)
    other_kernels: list = field(default_factory=list)
    # [TimedConfig]: configs the cost model ranked first, as timed, whatever their time (kept_model_picks)
    model_picks: list = field(default_factory=list)

    @property
    def config(self) -> dict:
        return self.best.config

    @property
    def speedup_vs_dense(self) -> float | None:
        return speedup_over_dense(self.dense_us, self.best.time_us) if self.measured else None

    def to_json(self) -> dict:
        obj = {
            "op": self.op,
            "dtype": self.dtype,
            "features": dict(self.features),
            "best": self.best.to_json(),
            "top_k": [t.to_json() for t in self.top_k],
            "predicted_us": self.predicted_us,
            "measured": self.measured,
            "tuner": dict(self.tuner),
            "env": {f: self.env.get(f) for f in ENV_FIELDS}
            | {f: self.env[f] for f in ENV_OPTIONAL_FIELDS if self.env.get(f) is not None},
            "updated": self.updated,
        }
        if self.failed:  # optional: entries without failures keep their old, shorter form in diffs
            obj["failed"] = [f.to_json() for f in self.failed]
        if self.dense_us is not None:
            obj["dense_us"] = self.dense_us
        if self.other_kernels:
            obj["other_kernels"] = [t.to_json() for t in self.other_kernels]
        if self.model_picks:
            obj["model_picks"] = [t.to_json() for t in self.model_picks]
        return obj

    @classmethod
    def from_json(cls, obj: dict, *, validate: bool = True) -> DBEntry:
        """Raises ValueError naming the offending field unless ``validate`` is False (already checked)."""
        if validate:
            validate_entry(obj)
        return cls(
            op=obj["op"],
            dtype=obj["dtype"],
            features=dict(obj["features"]),
            best=TimedConfig.from_json(obj["best"]),
            top_k=[TimedConfig.from_json(t) for t in obj["top_k"]],
            predicted_us=obj["predicted_us"],
            measured=obj["measured"],
            tuner=dict(obj["tuner"]),
            env=dict(obj["env"]),
            updated=obj["updated"],
            failed=[FailedConfig.from_json(f) for f in obj.get("failed", ())],
            dense_us=obj.get("dense_us"),
            other_kernels=[TimedConfig.from_json(t) for t in obj.get("other_kernels", ())],
            model_picks=[TimedConfig.from_json(t) for t in obj.get("model_picks", ())],
        )

    @property
    def timed_configs(self) -> list:
        """Every timed config the entry holds, once each: its top k, the other kernels' bests, then the
        model's picks the others leave out. What a cost model is fitted to."""
        held = [t for t in (*self.top_k, *self.other_kernels) if t.time_us is not None]
        seen = {_canonical(t.config) for t in held}
        return held + [t for t in self.model_picks if t.time_us is not None and _canonical(t.config) not in seen]

    def validate(self) -> None:
        validate_entry(self.to_json())


def merge_entries(a: DBEntry, b: DBEntry) -> DBEntry:
    """The entry to keep when two results share a key; symmetric, so the order of writers is irrelevant.

    - Results from different environments (device or triton) are not comparable: the newer one wins.
    - A measured result beats a predicted one; between two predicted ones the newer wins.
    - Between two measured ones taken by different timers (``env.timer``: the first timed short
      kernels with L2 warm), the later timer's wins with its own dense time: the times do not compare.
    - Between two measured ones the lower best time wins, and the top-k lists are united (deduplicated
      by config at its lowest time, fastest first, capped at TOP_K); so are the other kernels' bests,
      of the kernels the united top k leaves out (``other_kernel_bests``). The kept entry is dated by the
      later search, which its best beat: an entry whose re-tune found nothing faster must not stay
      dated before a kernel's rebuild and be listed for re-tuning again (``tuning.coverage``).
    - Within one environment the failed lists are united whichever entry wins: a failure is a fact
      about the compiler and device, not about the winning run. Across environments the winner keeps
      only its own, since a different compiler or device may well run the other's failures.
    - Within one environment the kept entry gets the lower of the two dense times (the dense
      product's speed is a fact about the device, like a failure; the lower is the less disturbed
      measurement, and a minimum keeps merging order-independent).
    Remaining ties are broken by the entries' canonical JSON, so every process picks the same one.
    """
    if a == b:
        return a
    if not same_environment(a.env, b.env):
        return _newer(a, b)
    failed = union_failed([*a.failed, *b.failed])

    dense = min((e.dense_us for e in (a, b) if e.dense_us is not None), default=None)

    def kept(winner: DBEntry, **changes) -> DBEntry:
        return replace(winner, failed=failed, dense_us=dense, **changes)

    if a.measured != b.measured:
        return kept(a if a.measured else b)
    if not a.measured:
        return kept(_newer(a, b))
    if timer_revision(a.env) != timer_revision(b.env):
        return replace(max(a, b, key=lambda e: timer_revision(e.env)), failed=failed)
    winner = min(a, b, key=lambda e: (e.best.time_us, _canonical(e.best.config), _canonical(e.to_json())))
    top, others = top_and_other_kernels([a.best, *a.top_k, *a.other_kernels, b.best, *b.top_k, *b.other_kernels])
    return kept(winner, top_k=top, other_kernels=others, tuner=_united_tuner(winner, a, b),
                model_picks=kept_model_picks([*a.model_picks, *b.model_picks]),
                updated=max(a.updated, b.updated, key=lambda t: (parse_timestamp(t), t)))


def _united_tuner(winner: DBEntry, a: DBEntry, b: DBEntry) -> dict:
    """The winner's tuner record with the kernels both searches covered: the winner beat every config
    the other timed, so its time is the best over both spaces (an unrecorded space adds nothing)."""
    kernels = sorted({*a.tuner.get("kernels", ()), *b.tuner.get("kernels", ())})
    return dict(winner.tuner) | ({"kernels": kernels} if kernels else {})


def union_top_k(items, k: int = TOP_K) -> list:
    """Fastest first, one per config (its lowest time), at most ``k``; ties ordered by config."""
    ordered = sorted(_fastest_per_config(items).items(), key=lambda kv: (kv[1].time_us, kv[0]))
    return [item for _, item in ordered[:k]]


def _fastest_per_config(items) -> dict:
    """Each config's timed item at its lowest time, by the config's canonical JSON."""
    fastest: dict[str, TimedConfig] = {}
    for item in items:
        name = _canonical(item.config)
        if item.time_us is not None and (name not in fastest or item.time_us < fastest[name].time_us):
            fastest[name] = item
    return fastest


def other_kernel_bests(items, top_k) -> list:
    """Of each kernel (a config's "kernel" field) with no config in ``top_k``, its fastest timed item;
    fastest first, ties ordered by config."""
    shown = {t.config.get("kernel") for t in top_k}
    fastest: dict = {}
    for item in items:
        kernel = item.config.get("kernel")
        if kernel in shown or item.time_us is None:
            continue
        held = fastest.get(kernel)
        if held is None or (item.time_us, _canonical(item.config)) < (held.time_us, _canonical(held.config)):
            fastest[kernel] = item
    return sorted(fastest.values(), key=lambda t: (t.time_us, _canonical(t.config)))


def top_and_other_kernels(items) -> tuple[list, list]:
    """An entry's (top_k, other_kernels) from all its timed items: the united top k, then the best
    of each kernel it leaves out. What a merge and ``TuningDB.put`` both keep."""
    top = union_top_k(items)
    return top, other_kernel_bests(items, top)


def kept_model_picks(items) -> list:
    """One per config (its lowest time), slowest first, at most ``MODEL_PICKS_KEPT``: the model's worst
    misses are what a refit most needs to see. Ties ordered by config, so merges are symmetric."""
    ordered = sorted(_fastest_per_config(items).items(), key=lambda kv: (-kv[1].time_us, kv[0]))
    return [item for _, item in ordered[:MODEL_PICKS_KEPT]]


def union_failed(items) -> list:
    """One record per config, ordered by config, so that merges are symmetric and files diff cleanly.

    Two records of one config (two processes that failed it differently) keep the one whose JSON sorts
    first: arbitrary, but the same in every process.
    """
    chosen: dict[str, FailedConfig] = {}
    for item in items:
        name = _canonical(item.config)
        if name not in chosen or _canonical(item.to_json()) < _canonical(chosen[name].to_json()):
            chosen[name] = item
    return [chosen[name] for name in sorted(chosen)]


RATIO = "ratio"  # a feature compared by log2 of its value (see feature_distance)
_TINY = 2.0**-30  # a zero size or density, compared by ratio: as far from 1 as 2**-30


def feature_distance(a: dict, b: dict, names=None) -> float | None:
    """Euclidean distance between two problems' numeric features; None if they share none.

    ``names``: the features compared (default: every numeric feature both have). A sequence
    compares each as log2(1 + x). A mapping says per feature how: ``RATIO`` compares log2 of the
    values (sizes and densities, where 2% is as far from 1% as 4% from 2%), a number ``s`` the
    difference over ``s`` (row skew, which is 0 for even rows).
    """
    names = sorted(a.keys() & b.keys()) if names is None else names
    how = names if isinstance(names, dict) else dict.fromkeys(names)
    total, shared = 0.0, 0
    for name, scale in how.items():
        x, y = a.get(name), b.get(name)
        if not (is_number(x) and is_number(y)):
            continue
        # Features are sizes, counts and ratios (>= 0); the clamps only keep bad input finite.
        if scale is None:
            total += (math.log2(1.0 + max(x, 0.0)) - math.log2(1.0 + max(y, 0.0))) ** 2
        elif scale == RATIO:
            total += (math.log2(max(x, _TINY)) - math.log2(max(y, _TINY))) ** 2
        else:
            total += ((x - y) / scale) ** 2
        shared += 1
    return math.sqrt(total) if shared else None


def is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _newer(a: DBEntry, b: DBEntry) -> DBEntry:
    return max(a, b, key=lambda e: (parse_timestamp(e.updated), _canonical(e.to_json())))


def parse_timestamp(text: str) -> datetime:
    """An entry's ``updated`` as an aware datetime (a stamp without a zone read as UTC)."""
    stamp = datetime.fromisoformat(text)
    # Hand-written stamps may lack a zone; read them as UTC so that they compare with ours.
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=timezone.utc)


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True)
