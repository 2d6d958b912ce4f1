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
# kernels are Triton's, and torch only allocates their tensors.
STALENESS_FIELDS = ("device", "triton")


@dataclass(frozen=True)
class Environment:
    device: str
    triton: str | None = None
    torch: str | None = None
    cuda: str | None = None
    stuning: str | None = None
    compute_capability: tuple[int, int] | None = None
    sm_count: int | None = None

    @classmethod
    def detect(cls, device_name: str, **known) -> Environment:
        """The installed versions of triton, torch and stuning; ``known`` supplies or overrides fields."""
        found = {name: _installed_version(name) for name in ("triton", "torch", "stuning")}
        return cls(device=device_name, **{**found, **known})

    def entry_env(self) -> dict:
        """The ``env`` recorded in each entry produced here."""
        return {"device": self.device, "triton": self.triton, "torch": self.torch}

    def device_header(self) -> dict:
        cc = list(self.compute_capability) if self.compute_capability is not None else None
        return {"name": self.device, "compute_capability": cc, "sm_count": self.sm_count}

    def versions(self) -> dict:
        return {"triton": self.triton, "torch": self.torch, "cuda": self.cuda, "stuning": self.stuning}


def same_environment(a: dict, b: dict) -> bool:
    """Whether two entry ``env`` dicts agree on the fields that decide staleness."""
    return all(a.get(f) == b.get(f) for f in STALENESS_FIELDS)


def as_entry_env(env: Environment | dict) -> dict:
    return env.entry_env() if isinstance(env, Environment) else dict(env)


def _installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
