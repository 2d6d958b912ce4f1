"""``stuning.sddmm``: the dense product A @ B sampled at the nonzeros of a sparse mask."""

from __future__ import annotations

import functools
import math

import torch

from stuning.formats import CSRMatrix, output_tiles
from stuning.formats.stored import MATRICES
from stuning.kernels import sddmm as sddmm_kernel
from stuning.ops import compiled
from stuning.ops.inputs import as_csr, dense_2d, require_dtype, resolve_config, tuned_config
from stuning.tuning.features import sddmm_features


def problem_of(mask: CSRMatrix, a: torch.Tensor) -> sddmm_kernel.SDDMMProblem:
    return sddmm_kernel.SDDMMProblem(
        m=mask.shape[0], n=mask.shape[1], k=a.shape[1], nnz=mask.nnz, dtype=a.dtype
    )


def sddmm(mask, a: torch.Tensor, b: torch.Tensor, *, alpha: float = 1.0, beta: float = 0.0, config=None) -> CSRMatrix:
    """``alpha * (A @ B) * spy(mask) + beta * mask``, as ``torch.sparse.sampled_addmm`` computes it.

    ``mask`` is M x N (``CSRMatrix`` or torch sparse CSR), A is M x K, B is K x N. Returns a
    ``CSRMatrix`` with the mask's sparsity pattern. ``beta`` must be 0 where the mask's values may
    hold NaN or inf: they are not read then.

    Under ``torch.compile`` a ``CSRMatrix`` mask built outside the compiled function, with
    ``config=None``, runs as the operator ``stuning::sddmm`` (``stuning.ops.compiled``); anything else
    is a graph break.
    """
    if torch.compiler.is_compiling() and compiled.takes(mask, config):
        values = _sddmm_operator(mask._handle, mask.values, a, b, alpha, beta)
        return CSRMatrix(mask.crow, mask.col, values, mask.shape, validate=False)
    return _eager_sddmm(mask, a, b, alpha=alpha, beta=beta, config=config)


def _checked(mask, a, b, alpha, beta) -> tuple[CSRMatrix, torch.Tensor, torch.Tensor]:
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
    return mask, a, b


@torch.compiler.disable  # a graph break: Dynamo cannot trace a launch (stuning.ops.compiled)
def _eager_sddmm(mask, a: torch.Tensor, b: torch.Tensor, *, alpha: float, beta: float, config) -> CSRMatrix:
    mask, a, b = _checked(mask, a, b, alpha, beta)
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


@torch.library.custom_op("stuning::sddmm", mutates_args=())
def _sddmm_operator(handle: str, mask_values: torch.Tensor, a: torch.Tensor, b: torch.Tensor, alpha: float,
                    beta: float) -> torch.Tensor:
    """The values of ``stuning.sddmm`` with the mask ``handle`` names; the mask's values come in so
    that the compiler sees them read (``beta`` reads them)."""
    mask = MATRICES.get(handle, "stuning::sddmm")
    return compiled.run_outside_graph_pools(compiled.warmed_inputs(mask), (a, b), lambda: _eager_sddmm(
        mask, a, b, alpha=alpha, beta=beta, config=None).values)


@_sddmm_operator.register_fake
def _sddmm_fake(handle, mask_values, a, b, alpha, beta):
    compiled.refuse_export("stuning.sddmm")
    mask, a, b = _checked(MATRICES.get(handle, "stuning::sddmm"), a, b, alpha, beta)
    sddmm_kernel.check_dtypes(a, b, mask_values)
    return a.new_empty(mask.nnz)
