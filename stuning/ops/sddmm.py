"""``stuning.sddmm``: the dense product A @ B sampled at the nonzeros of a sparse mask."""

from __future__ import annotations

import functools
import math

import torch

from stuning.formats import CSRMatrix, output_tiles
from stuning.kernels import sddmm as sddmm_kernel
from stuning.ops.inputs import as_csr, dense_2d, require_dtype, resolve_config, tuned_config
from stuning.tuning.features import sddmm_features


def problem_of(mask: CSRMatrix, a: torch.Tensor) -> sddmm_kernel.SDDMMProblem:
    return sddmm_kernel.SDDMMProblem(
        m=mask.shape[0], n=mask.shape[1], k=a.shape[1], nnz=mask.nnz, dtype=a.dtype
    )


@torch.compiler.disable  # see stuning.ops.__init__
def sddmm(mask, a: torch.Tensor, b: torch.Tensor, *, alpha: float = 1.0, beta: float = 0.0, config=None) -> CSRMatrix:
    """``alpha * (A @ B) * spy(mask) + beta * mask``, as ``torch.sparse.sampled_addmm`` computes it.

    ``mask`` is M x N (``CSRMatrix`` or torch sparse CSR), A is M x K, B is K x N. Returns a
    ``CSRMatrix`` with the mask's sparsity pattern. ``beta`` must be 0 where the mask's values may
    hold NaN or inf: they are not read then.
    """
    mask = as_csr(mask, "sddmm: mask")
    a = dense_2d(a, "sddmm: A")
    b = dense_2d(b, "sddmm: B")
    m, n = mask.shape
    if a.shape[0] != m or b.shape[1] != n:
        raise ValueError(
            f"sddmm: mask is {m} x {n}, so A must have {m} rows and B {n} columns; "
            f"got A {tuple(a.shape)}, B {tuple(b.shape)}"
        )
    if mask.pad_to > 1:
        raise ValueError("sddmm: the mask is padded (explicit zeros would get values); pass an unpadded CSRMatrix")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not math.isfinite(float(v)):
            raise ValueError(f"sddmm: {name} must be finite, got {v}")
    require_dtype("sddmm", a.dtype, sddmm_kernel.SUPPORTED_DTYPES)
    k, at = a.shape[1], sddmm_kernel.is_k_strided(a, 1)
    cfg = resolve_config(
        config,
        sddmm_kernel.SDDMMConfig,
        lambda: tuned_config(mask, "sddmm", k, a.dtype, lambda: sddmm_features(mask, k, a.dtype, a_transposed=at),
                             transposed=at),
    )
    values = sddmm_kernel.sddmm(
        mask.row_ids(), mask.col, mask.values, a, b, alpha=alpha, beta=beta, config=cfg,
        tiles=functools.partial(output_tiles, mask), crow=mask.crow,
    )
    return CSRMatrix(mask.crow, mask.col, values, mask.shape, validate=False)
