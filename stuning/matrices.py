"""Synthetic sparse problems in the spirit of the Deep Learning Matrix Collection (pure torch).

Pruned weights of real networks have a fixed fraction of zeros and rows whose lengths are either
even (uniform pruning) or spread out (global magnitude pruning). ``random_sparse`` makes both: it
draws each row's length (all equal, or lognormal with a given coefficient of variation), then keeps
that many columns of the row at random. Everything is vectorized, so an 11008 x 4096 matrix takes
milliseconds on a GPU. Shared by the CLI, the benchmark scripts and the tests.
"""

from __future__ import annotations

import math

import torch


def _nonzero_normal(shape, dtype, device, generator) -> torch.Tensor:
    """Standard normal values that stay nonzero after the cast (fp16 rounds tiny values to 0)."""
    v = torch.randn(shape, generator=generator, device=device, dtype=torch.float32).to(dtype)
    return torch.where(v == 0, torch.ones((), dtype=dtype, device=device), v)


def _round_to_total(x: torch.Tensor, total: int, cap: int) -> torch.Tensor:
    """Integer row lengths in [0, cap] close to ``x`` (float, already in range) summing to ``total``."""
    lengths = x.floor().clamp(0, cap)
    missing = int(total - lengths.sum().item())
    if missing > 0:
        # Largest fractional parts first, among rows that still have room.
        frac = torch.where(lengths < cap, x - lengths, torch.full_like(x, -1.0))
        lengths[torch.topk(frac, min(missing, x.numel())).indices] += 1
    elif missing < 0:
        frac = torch.where(lengths > 0, x - lengths, torch.full_like(x, 2.0))
        lengths[torch.topk(frac, min(-missing, x.numel()), largest=False).indices] -= 1
    return lengths.to(torch.int64)


def row_lengths(
    m: int, k: int, nnz: int, skew_cv: float = 0.0, *, device=None, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``m`` row lengths in [0, k] that sum to ``nnz``: as even as possible when ``skew_cv`` is 0,
    else lognormal with coefficient of variation ``skew_cv`` (rescaled to the total, clipped to
    [0, k]; the clipping lowers the cv a little when rows are nearly full)."""
    if not 0 <= nnz <= m * k:
        raise ValueError(f"row_lengths: nnz = {nnz} does not fit in {m} x {k}")
    if skew_cv < 0:
        raise ValueError(f"row_lengths: skew_cv must be >= 0, got {skew_cv}")
    if m == 0:
        return torch.zeros(0, dtype=torch.int64, device=device)
    if skew_cv == 0:
        base, extra = divmod(nnz, m)
        lengths = torch.full((m,), base, dtype=torch.int64, device=device)
        if extra:
            pick = torch.randperm(m, generator=generator, device=device)[:extra]
            lengths[pick] += 1
        return lengths
    sigma = math.sqrt(math.log1p(skew_cv**2))
    z = torch.randn(m, generator=generator, device=device, dtype=torch.float64)
    x = torch.exp(sigma * z)
    # Rescale to the target total; clipping at k moves mass, so rescale again a few times.
    for _ in range(8):
        s = x.sum().item()
        if s <= 0:
            break
        x = (x * (nnz / s)).clamp(0, k)
    return _round_to_total(x, nnz, k)


def random_sparse(
    m: int,
    k: int,
    sparsity: float,
    *,
    skew_cv: float = 0.0,
    dtype: torch.dtype = torch.float32,
    device=None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A dense ``m x k`` tensor with ``round(sparsity * m * k)`` zeros and standard normal nonzeros.

    Row lengths as in :func:`row_lengths`; each row keeps its nonzeros at uniformly random columns
    (ranks of per-row random scores, so the counts are exact).
    """
    if not 0.0 <= sparsity <= 1.0:
        raise ValueError(f"random_sparse: sparsity must be in [0, 1], got {sparsity}")
    nnz = m * k - int(round(sparsity * m * k))
    lengths = row_lengths(m, k, nnz, skew_cv, device=device, generator=generator)
    scores = torch.rand(m, k, generator=generator, device=device)
    order = torch.argsort(scores, dim=1)  # a random permutation of the columns of each row
    rank = torch.arange(k, device=device).expand(m, k)
    keep = torch.zeros(m, k, dtype=torch.bool, device=device)
    keep.scatter_(1, order, rank < lengths[:, None])
    del scores, order
    values = _nonzero_normal((m, k), dtype, device, generator)
    return torch.where(keep, values, torch.zeros((), dtype=dtype, device=device))


def random_semi24(
    m: int,
    k: int,
    *,
    dtype: torch.dtype = torch.float16,
    device=None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A dense ``m x k`` 2:4 tensor: exactly 2 standard normal nonzeros at random positions in every
    aligned group of 4 columns. ``k`` must be a multiple of 4."""
    if k % 4:
        raise ValueError(f"random_semi24: K must be a multiple of 4, got {k}")
    scores = torch.rand(m, k // 4, 4, generator=generator, device=device)
    keep = torch.zeros(m, k // 4, 4, dtype=torch.bool, device=device)
    keep.scatter_(2, torch.topk(scores, 2, dim=2).indices, True)
    values = _nonzero_normal((m, k), dtype, device, generator)
    return torch.where(keep.reshape(m, k), values, torch.zeros((), dtype=dtype, device=device))


def random_dense(
    m: int,
    n: int,
    *,
    dtype: torch.dtype = torch.float32,
    device=None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A dense ``m x n`` standard normal tensor (drawn in fp32, then cast)."""
    return torch.randn(m, n, generator=generator, device=device, dtype=torch.float32).to(dtype)


def sparsity_of(dense: torch.Tensor) -> float:
    return 1.0 - int((dense != 0).sum()) / max(1, dense.numel())


def row_cv(dense: torch.Tensor) -> float:
    """Coefficient of variation of the row lengths (nonzeros per row) of a dense tensor."""
    lengths = (dense != 0).sum(1).to(torch.float64)
    mean = lengths.mean().item()
    return lengths.std(unbiased=False).item() / mean if mean > 0 else 0.0
