"""The environment a tuning result belongs to: device and library versions.

A timing is only an answer on the device and Triton version it was measured with (a new compiler
changes which config wins); entries from elsewhere are kept as seeds for a new search instead.
Versions are read from the installed distributions' metadata, so nothing here imports triton or
torch; the tuning layer, which has torch loaded anyway, passes the CUDA version and device facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

# The env fields whose difference makes an entry stale. torch is recorded but does not count: the
# kernels are Triton's, and torch only allocates their tensors. ``kernel`` is the revision of the
# op's kernels the timing was taken on: a rewritten kernel makes its old winners seeds, not answers.
STALENESS_FIELDS = ("device", "triton", "kernel")
# Entries written before kernels had revisions were all timed on the first one.
FIRST_KERNEL_REVISION = "1"
# ``timer`` is the revision of the way ``time_us`` was taken (``stuning.tuning.timing``). It does not
# make an entry stale (its config is as good an answer), but two timers' times do not compare: merges
# keep the result of the later timer. Entries without it were timed by the first.
FIRST_TIMER_REVISION = "1"


@dataclass(frozen=True)
class Environment:
    device: str
    triton: str | None = None
    torch: str | None = None
    cuda: str | None = None
    stuning: str | None = None
    compute_capability: tuple[int, int] | None = None
    sm_count: int | None = None
    kernel_revisions: tuple[tuple[str, str], ...] = ()  # (op, revision) of the installed kernels
    timer: str | None = None  # the revision of the timer this environment measures with

    @classmethod
    def detect(cls, device_name: str, **known) -> Environment:
        """The installed versions of triton, torch and stuning; ``known`` supplies or overrides fields."""
        found = {name: _installed_version(name) for name in ("triton", "torch", "stuning")}
        return cls(device=device_name, **{**found, **known})

    def entry_env(self, op: str | None = None) -> dict:
        """The ``env`` recorded in each entry of ``op`` produced here."""
        env = {"device": self.device, "triton": self.triton, "torch": self.torch}
        revision = dict(self.kernel_revisions).get(op)
        if revision is not None:
            env["kernel"] = revision
        if self.timer is not None:
            env["timer"] = self.timer
        return env

    def device_header(self) -> dict:
        cc = list(self.compute_capability) if self.compute_capability is not None else None
        return {"name": self.device, "compute_capability": cc, "sm_count": self.sm_count}

    def versions(self) -> dict:
        return {"triton": self.triton, "torch": self.torch, "cuda": self.cuda, "stuning": self.stuning}


def same_environment(a: dict, b: dict, *, kernels: bool = True) -> bool:
    """Whether two entry ``env`` dicts agree on the fields that decide staleness; ``kernels=False``
    leaves the kernel revision out (for an environment that does not know the installed kernels')."""
    fields = STALENESS_FIELDS if kernels else tuple(f for f in STALENESS_FIELDS if f != "kernel")
    return all(_staleness_value(a, f) == _staleness_value(b, f) for f in fields)


def timer_revision(env: dict) -> int:
    """The revision of the timer an entry's times were taken with."""
    return int(env.get("timer") or FIRST_TIMER_REVISION)


def judges_kernels(env: Environment | dict) -> bool:
    """Whether ``env`` can tell entries of the installed kernels' revisions from older ones."""
    return bool(env.kernel_revisions) if isinstance(env, Environment) else True


def _staleness_value(env: dict, field: str):
    value = env.get(field)
    return FIRST_KERNEL_REVISION if field == "kernel" and value is None else value


def as_entry_env(env: Environment | dict, op: str | None = None) -> dict:
    return env.entry_env(op) if isinstance(env, Environment) else dict(env)


def _installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
