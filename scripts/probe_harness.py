"""The harness the GPU probes in scripts/ share: their random inputs, how they time a call and how
they check its result.

Each probe is run as ``python3 scripts/probe_<name>.py``, which puts this directory on the path.
"""

from __future__ import annotations

import torch


def probe_time_us(fn, smoke: bool) -> float:
    """Median time of ``fn`` in CUDA-graph replays with L2 flushed before every call, as the tuner
    times (a sub-L2 operand stayed resident across warm replays). ``smoke``: through Triton's
    interpreter there is no GPU time; ``fn`` runs once and the time is NaN."""
    if smoke:
        fn()
        return float("nan")
    from stuning.tuning.timing import flushed_graph_us

    with torch.cuda.stream(torch.cuda.Stream()):
        return flushed_graph_us(fn)


def check_close(y: torch.Tensor, ref: torch.Tensor, what: str, tol: float = 1e-2) -> None:
    """Raise unless ``y`` is within ``tol`` relative (Frobenius) error of the float64 ``ref``."""
    err = float((y.double() - ref).norm() / max(ref.norm(), 1e-30))
    if not err < tol:
        raise AssertionError(f"{what}: relative error {err:.2e} against the float64 reference")


def random_problem(m: int, k: int, n: int, sparsity: float, gen: torch.Generator, device: str):
    """fp16 W (m x k) with uniformly random zeros, X (k x n), and W @ X in float64."""
    w = torch.randn(m, k, generator=gen)
    w = (w * (torch.rand(m, k, generator=gen) >= sparsity)).half().to(device)
    x = torch.randn(k, n, generator=gen).half().to(device)
    return w, x, w.double() @ x.double()
