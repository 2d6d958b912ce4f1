"""Plain-torch float64 references for the kernels, random sparse inputs, and error measures.

Nothing here uses stuning's kernels: the references are what the kernels are checked against.
Every random helper takes a ``torch.Generator`` and makes its tensors on the generator's device
(fp32 random numbers, then cast), so a test's inputs are fixed by its seed.
"""

from __future__ import annotations

import math

import pytest
import torch

# Largest relative Frobenius error ||out - ref|| / ||ref|| accepted for an output of each dtype.
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}
DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def dtype_tol_params(dtypes) -> list:
    """``pytest.param(dtype, tolerance)`` for each dtype, named fp32/fp16/bf16: tests sweep the two together."""
    return [pytest.param(d, TOL[d], id=DTYPE_NAMES[d]) for d in dtypes]


# The dtypes every kernel takes, and the 2:4 kernel's (no fp32: it is a tensor-core format).
ALL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
HALF_DTYPES = (torch.float16, torch.bfloat16)


# ------------------------------------------------------------------------------------ references
def spmm_ref(dense_a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``A @ B`` in float64, from A given dense (its zeros are the structural zeros), on A's device."""
    return dense_a.double() @ b.to(dense_a.device).double()


def sddmm_ref(
    mask_dense: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    alpha: float = 1.0,
    beta: float = 0.0,
    pattern: torch.Tensor | None = None,
) -> torch.Tensor:
    """``torch.sparse.sampled_addmm``'s result, dense, in float64.

    ``alpha * (A @ B) + beta * mask`` at the mask's sparsity pattern, zero elsewhere. The pattern is
    ``mask_dense != 0`` unless given (a stored zero of a CSR mask is part of its pattern). With
    ``beta == 0`` the mask's values are not used at all (they may hold NaN).
    """
    if pattern is None:
        pattern = mask_dense != 0
    pattern = pattern.to(a.device)
    mask_dense = mask_dense.to(a.device)
    prod = alpha * (a.double() @ b.to(a.device).double())
    out = torch.where(pattern, prod, torch.zeros((), dtype=torch.float64, device=a.device))
    if beta != 0:
        out = out + torch.where(pattern, beta * mask_dense.double(), torch.zeros_like(out))
    return out


def semi24_ref(w_dense: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``W @ X`` in float64, from W given dense."""
    return w_dense.double() @ x.to(w_dense.device).double()


# ---------------------------------------------------------------------------------------- errors
def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` (Frobenius) in float64; the absolute error when ``ref`` is 0.

    NaN or inf anywhere in ``out`` gives ``inf``: a broken output never passes a tolerance.
    """
    if out.shape != ref.shape:
        raise AssertionError(f"shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}")
    out64 = out.detach().to(torch.float64)
    ref64 = ref.detach().to(device=out64.device, dtype=torch.float64)
    if not bool(torch.isfinite(out64).all()):
        return math.inf
    diff = float(torch.linalg.vector_norm(out64 - ref64))
    norm = float(torch.linalg.vector_norm(ref64))
    err = diff / norm if norm > 0 else diff
    return err if math.isfinite(err) else math.inf


def assert_close(out: torch.Tensor, ref: torch.Tensor, tol: float, what: str = "") -> None:
    err = rel_err(out, ref)
    n_bad = int((~torch.isfinite(out.detach().float())).sum()) if out.numel() else 0
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:.1e}" + (
        f" ({n_bad} non-finite entries)" if n_bad else ""
    )


# ---------------------------------------------------------------------------- random dense inputs
def randn(*shape: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, device=gen.device).to(dtype)


# ------------------------------------------------------------------------- random sparse matrices
def _values(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """``n`` random values bounded away from zero (so none turns into a structural zero)."""
    v = torch.randn(n, generator=gen, device=gen.device)
    v = torch.where(v.abs() < 0.05, torch.full_like(v, 0.5), v)
    return v.to(dtype)


def sparse_from_lengths(lengths: torch.Tensor, k: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """A dense M x K matrix whose row ``i`` has exactly ``lengths[i]`` nonzeros at random columns."""
    m = lengths.numel()
    lengths = lengths.to(device=gen.device, dtype=torch.int64).clamp(0, k)
    if m == 0 or k == 0:
        return torch.zeros(m, k, dtype=dtype, device=gen.device)
    # Rank random scores within each row; keep the `length` columns of lowest rank.
    scores = torch.rand(m, k, generator=gen, device=gen.device)
    rank = scores.argsort(dim=1).argsort(dim=1)
    keep = rank < lengths[:, None]
    out = torch.zeros(m, k, dtype=dtype, device=gen.device)
    out[keep] = _values(int(keep.sum()), dtype, gen)
    return out


def random_sparse(
    m: int, k: int, density: float, dtype: torch.dtype, gen: torch.Generator, *, exact: bool = True
) -> torch.Tensor:
    """Uniform random sparsity: ``round(density * m * k)`` nonzeros at uniformly random places
    (exactly that many with ``exact``, else each entry kept independently with that probability)."""
    if exact:
        nnz = round(density * m * k)
        out = torch.zeros(m * k, dtype=dtype, device=gen.device)
        if nnz:
            pos = torch.randperm(m * k, generator=gen, device=gen.device)[:nnz]
            out[pos] = _values(nnz, dtype, gen)
        return out.reshape(m, k)
    keep = torch.rand(m, k, generator=gen, device=gen.device) < density
    out = torch.zeros(m, k, dtype=dtype, device=gen.device)
    out[keep] = _values(int(keep.sum()), dtype, gen)
    return out


def skewed_lengths(m: int, mean: float, cv: float, k: int, gen: torch.Generator) -> torch.Tensor:
    """Row lengths with the given mean and coefficient of variation (log-normal, clipped to
    ``[0, k]``): uneven rows like those of pruned weights and graphs."""
    sigma = math.sqrt(math.log1p(cv * cv))
    z = torch.randn(m, generator=gen, device=gen.device, dtype=torch.float64)
    lengths = torch.round(mean * torch.exp(sigma * z - sigma * sigma / 2))
    return lengths.clamp(0, k).to(torch.int64)


def skewed_sparse(
    m: int,
    k: int,
    mean: float,
    dtype: torch.dtype,
    gen: torch.Generator,
    *,
    cv: float = 0.4,
    empty_rows: int = 0,
) -> torch.Tensor:
    """Random sparse matrix with skewed row lengths (CV about ``cv``) and ``empty_rows`` empty rows."""
    lengths = skewed_lengths(m, mean, cv, k, gen)
    if empty_rows:
        lengths = with_empty_rows(lengths, empty_rows, gen)
    return sparse_from_lengths(lengths, k, dtype, gen)


def with_empty_rows(lengths: torch.Tensor, count: int, gen: torch.Generator) -> torch.Tensor:
    """A copy of ``lengths`` with ``count`` random rows (always including the first and last) emptied."""
    m = lengths.numel()
    count = min(count, m)
    lengths = lengths.clone()
    if count == 0:
        return lengths
    rows = torch.randperm(m, generator=gen, device=gen.device)[:count].to(lengths.device)
    lengths[rows] = 0
    lengths[0] = 0
    if count > 1:
        lengths[-1] = 0
    return lengths


def random_24(m: int, k: int, dtype: torch.dtype, gen: torch.Generator, *, partial: bool = False) -> torch.Tensor:
    """A random dense M x K matrix (K a multiple of 4) with exactly 2 nonzeros in every aligned group
    of 4 columns of a row, or, with ``partial``, 0, 1 or 2 of them."""
    if k % 4:
        raise ValueError(f"random_24 needs K a multiple of 4, got {k}")
    groups = k // 4
    scores = torch.rand(m, groups, 4, generator=gen, device=gen.device)
    keep_pos = scores.topk(2, dim=-1).indices
    keep = torch.zeros(m, groups, 4, dtype=torch.bool, device=gen.device)
    keep.scatter_(-1, keep_pos, True)
    if partial:
        drop = torch.rand(m, groups, 4, generator=gen, device=gen.device) < 0.35
        keep &= ~drop
    out = torch.zeros(m, groups, 4, dtype=dtype, device=gen.device)
    out[keep] = _values(int(keep.sum()), dtype, gen)
    return out.reshape(m, k)


def row_cv(dense: torch.Tensor) -> float:
    lengths = (dense != 0).sum(1).double()
    mean = float(lengths.mean())
    return float(lengths.std(unbiased=False)) / mean if mean > 0 else 0.0


# ------------------------------------------------------------------------------------- configs
def sample_configs(space: list, count: int, seed: int) -> list:
    """A deterministic random sample of ``count`` configs of a config space (all if it is smaller)."""
    import random

    if not space:
        raise AssertionError("empty config space")
    return random.Random(seed).sample(space, min(count, len(space)))


_SHORT = {
    "rows": "r",
    "nnz_step": "s",
    "block_n": "bn",
    "vec": "v",
    "swizzle": "sw",
    "num_warps": "w",
    "num_stages": "st",
    "nnz_block": "nb",
    "block_k": "bk",
    "block_m": "bm",
    "group_m": "g",
    "split_k": "sk",
    "chunk": "ch",
}


def config_params(sampled: list, heuristic, prefix: str = "") -> list:
    """pytest params: the sampled configs, the kernel's own heuristic config, and ``None`` (what the
    op picks by itself: tuning database, cost model or heuristic)."""
    import pytest

    return (
        [pytest.param(c, id=prefix + config_id(c)) for c in sampled]
        + [pytest.param(heuristic, id=f"{prefix}heuristic-{config_id(heuristic)}")]
        + [pytest.param(None, id=prefix + "default")]
    )


def config_id(config) -> str:
    """A short test id for a config dataclass (``default`` for None)."""
    if config is None:
        return "default"
    fields = config if isinstance(config, dict) else config.as_dict()
    # A kernel name stands first (``sell-r4-...``, ``tiled-...``); the default CSR kernel is left out.
    names = [v for k, v in fields.items() if isinstance(v, str) and not (k == "kernel" and v == "csr")]
    # A field held at 0 is one the config's kernel does not use.
    numbers = [f"{_SHORT.get(k, k)}{int(v)}" for k, v in fields.items() if not isinstance(v, str) and
               (type(v) is not int or v != 0)]
    return "-".join(names + numbers)


def captured_graph(module, static_x: torch.Tensor):
    """``(graph, static_y)``: ``module(static_x)`` captured in a CUDA graph under ``no_grad``, after two
    warm-up calls on a side stream (they compile the kernels and cache the config for this input's
    size, so nothing in the capture synchronizes with the host). Replaying reads ``static_x`` in place."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(2):
            module(static_x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = module(static_x)
    return graph, static_y
