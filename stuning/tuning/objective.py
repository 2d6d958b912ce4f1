"""The objective a search times: run the op with a config, check it, time it."""

from __future__ import annotations

from collections.abc import Callable

import torch

from stuning.tuning.search.base import TrialFailure
from stuning.tuning.timing import bench_us

# Relative Frobenius error allowed against the reference, per dtype (fp32 accumulation throughout).
TOLERANCE = {"float32": 1e-4, "float16": 3e-3, "bfloat16": 2e-2}


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = (out.double() - ref.double()).norm().item()
    norm = ref.double().norm().item()
    err = diff / norm if norm > 0 else diff
    return err if err == err else float("inf")  # NaN never passes


def classify_failure(e: Exception) -> TrialFailure:
    """Map what Triton raises onto the statuses the database records."""
    name = type(e).__name__
    text = str(e).splitlines()[0][:200] if str(e) else name
    if name == "OutOfResources" or "out of resource" in text.lower():
        return TrialFailure("out_of_resources", text)
    if "Compilation" in name or "compil" in text.lower():
        return TrialFailure("compile_error", text)
    return TrialFailure("error", f"{name}: {text}")


class KernelObjective:
    """``config -> time_us`` for one problem, checking every config's result before timing it."""

    def __init__(
        self,
        run: Callable[[object], torch.Tensor],
        reference: torch.Tensor,
        dtype: str,
        *,
        timer: Callable[[Callable[[], object]], float] | None = None,
    ):
        self.run = run
        self.reference = reference
        self.tolerance = TOLERANCE[dtype]
        self.timer = timer or (lambda fn: bench_us(fn)[0])

    def check(self, config) -> None:
        try:
            out = self.run(config)
            if out.is_cuda:
                torch.cuda.synchronize()
        except Exception as e:
            raise classify_failure(e) from e
        err = relative_error(out, self.reference)
        if err > self.tolerance:
            raise TrialFailure("wrong", f"relative error {err:.2e} > {self.tolerance:.0e}")

    def __call__(self, config) -> float:
        self.check(config)
        return self.timer(lambda: self.run(config))
