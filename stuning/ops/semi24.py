"""``stuning.semi24_mm``: Y = W @ X with W 2:4 semi-structured."""

from __future__ import annotations

import torch

from stuning.formats import Semi24Matrix
from stuning.kernels import semi24 as semi24_kernel
from stuning.ops.inputs import dense_2d, require_dtype, resolve_config, tuned_config
from stuning.tuning.features import is_transposed, semi24_features
from stuning.tuning.launch import launch_semi24


def problem_of(w: Semi24Matrix, x: torch.Tensor) -> semi24_kernel.Semi24Problem:
    return semi24_kernel.Semi24Problem(m=w.shape[0], k=w.shape[1], n=x.shape[1], dtype=w.dtype)


@torch.compiler.disable  # see stuning.ops.__init__
def semi24_mm(w: Semi24Matrix, x: torch.Tensor, *, config=None, out: torch.Tensor | None = None,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """``W @ X`` for W a ``Semi24Matrix`` (M x K, fp16 or bf16) and X dense K x N of the same dtype.

    X may be a transposed view of an N x K tensor (``x.t()``: a layer's input), tuned as its own
    problem: the warpgroup kernel reads it in place; the other kernels copy it to rows within the call.

    ``bias`` (M,) is added to every column of the result; ``out`` (M x N, any strides: a transposed
    view of an N x M tensor writes Y^T) receives it. ``config`` as for ``stuning.spmm``.
    """
    if not isinstance(w, Semi24Matrix):
        raise TypeError(
            f"semi24_mm: W must be a Semi24Matrix, got {type(w).__name__} "
            "(use Semi24Matrix.from_dense(w, prune=True) to build one)"
        )
    x = dense_2d(x, "semi24_mm: X")
    if x.shape[0] != w.shape[1]:
        raise ValueError(f"semi24_mm: W is {w.shape[0]} x {w.shape[1]} but X has {x.shape[0]} rows")
    m, k = w.shape
    require_dtype("semi24_mm", w.dtype, semi24_kernel.SUPPORTED_DTYPES)
    n, bt = x.shape[1], is_transposed(x)
    cfg = resolve_config(
        config,
        semi24_kernel.Semi24Config,
        lambda: tuned_config(w, "semi24", n, w.dtype, lambda: semi24_features(m, k, n, w.dtype, b_transposed=bt),
                             transposed=bt),
    )
    return launch_semi24(w, x, cfg, out=out, bias=bias)
