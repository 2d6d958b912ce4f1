"""The objective a search times: run the op with a config, check it, time it."""

from __future__ import annotations

from collections.abc import Callable

import torch

from stuning.tuning.search.base import TrialFailure
from stuning.tuning.timing import RETIME_TIMING, SCREEN_TIMING, bench_us

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
    """``config -> time_us`` for one problem (a ``tuning.problems.Problem``), checking every config's
    result before timing it.

    ``timer`` times each trial (default: ``bench_us`` with ``SCREEN_TIMING``); ``retimer`` re-times a
    search's finalists (default: ``RETIME_TIMING``, or ``timer`` where only that is given)."""

    def __init__(self, problem, *, timer: Callable[[Callable[[], object]], float] | None = None,
                 retimer: Callable[[Callable[[], object]], float] | None = None):
        self.problem = problem
        self.tolerance = TOLERANCE[problem.features.dtype]
        self.timer = timer or (lambda fn: bench_us(fn, **SCREEN_TIMING)[0])
        self.retimer = retimer or timer or (lambda fn: bench_us(fn, **RETIME_TIMING)[0])
        self._timed_out: torch.Tensor | None = None

    def check(self, config) -> None:
        # Into an output filled with NaN: a fresh one from the caching allocator can hold the
        # previous config's correct product, which a config that writes nothing would pass with.
        out = self.problem.output().fill_(float("nan"))
        try:
            result = self.problem.run(config, out)
            if result.is_cuda:
                torch.cuda.synchronize()
        except Exception as e:
            raise classify_failure(e) from e
        if result.data_ptr() != out.data_ptr():
            raise TrialFailure("wrong", "the run returned a new tensor instead of writing into the output it was given")
        err = relative_error(result, self.problem.reference)
        if err > self.tolerance:
            raise TrialFailure("wrong", f"relative error {err:.2e} > {self.tolerance:.0e}")

    def timed(self, config) -> Callable[[], torch.Tensor]:
        """A run of ``config`` to time: into one output kept across runs, so no allocation is timed."""
        if self._timed_out is None:
            self._timed_out = self.problem.output()
        out = self._timed_out
        return lambda: self.problem.run(config, out)

    def __call__(self, config) -> float:
        self.check(config)
        return self.timer(self.timed(config))
