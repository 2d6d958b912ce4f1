"""A synthetic timer for testing and benchmarking the tuning machinery without a GPU.

``STUNING_SYNTHETIC_TIMER`` set to ``1`` (``synthetic_time_us`` below) or to ``module:function``
makes every measuring search "time" a config by calling ``function(features, config) -> time_us``
instead of running the kernel: no kernel is launched, nothing is checked against a reference, and
measuring strategies run without a GPU. Worker processes inherit it through the environment, so
tests of multi-process tuning can hand every worker the same deterministic timer (or one that kills
its process on purpose).

The times are fiction: never set it while tuning a database you serve from.
"""

from __future__ import annotations

import importlib
import os
import zlib
from collections.abc import Callable

from stuning.tuning.features import ProblemFeatures

ENV_SYNTHETIC_TIMER = "STUNING_SYNTHETIC_TIMER"

SyntheticTimer = Callable[[ProblemFeatures, object], float]


def synthetic_time_us(features: ProblemFeatures, config) -> float:
    """A pure function of the problem and the config: 10 to 110 us, spread by a hash of both."""
    problem = f"{features.op}|{features.dtype}|{sorted(features.key_features().items())}"
    text = f"{problem}|{sorted(config.as_dict().items())}"
    return 10.0 + (zlib.crc32(text.encode()) % 10_000) / 100.0


def synthetic_timer() -> SyntheticTimer | None:
    """The timer ``$STUNING_SYNTHETIC_TIMER`` names, or None when it is unset (the normal case)."""
    spec = os.environ.get(ENV_SYNTHETIC_TIMER, "").strip()
    if spec in ("", "0"):
        return None
    if spec == "1":
        return synthetic_time_us
    module_name, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(f"${ENV_SYNTHETIC_TIMER}={spec!r}: write 1 or module:function")
    timer = getattr(importlib.import_module(module_name), attr, None)
    if not callable(timer):
        raise ValueError(f"${ENV_SYNTHETIC_TIMER}={spec!r}: {module_name} has no callable {attr!r}")
    return timer
