"""``stuning.semi24_mm``: Y = W @ X with W 2:4 semi-structured."""

from __future__ import annotations

import torch

from stuning.formats import Semi24Matrix
from stuning.formats.stored import MATRICES
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels.spmm import check_b_and_out
from stuning.ops import compiled
from stuning.ops.inputs import dense_2d, require_dtype, resolve_config, tuned_config
from stuning.tuning.features import is_transposed, semi24_features
from stuning.tuning.launch import launch_semi24


def problem_of(w: Semi24Matrix, x: torch.Tensor) -> semi24_kernel.Semi24Problem:
    return semi24_kernel.Semi24Problem(m=w.shape[0], k=w.shape[1], n=x.shape[1], dtype=w.dtype)


def semi24_mm(w: Semi24Matrix, x: torch.Tensor, *, config=None, out: torch.Tensor | None = None,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """``W @ X`` for W a ``Semi24Matrix`` (M x K, fp16 or bf16) and X dense K x N of the same dtype.

    X may be a transposed view of an N x K tensor (``x.t()``: a layer's input), tuned as its own
    problem: the warpgroup kernel reads it in place; the other kernels copy it to rows within the call.

    ``bias`` (M,) is added to every column of the result; ``out`` (M x N, any strides: a transposed
    view of an N x M tensor writes Y^T) receives it. ``config`` as for ``stuning.spmm``.

    Under ``torch.compile`` a ``Semi24Matrix`` built outside the compiled function, with
    ``config=None``, runs as the operator ``stuning::semi24_mm`` (``stuning.ops.compiled``; ``out``
    then receives a copy); anything else is a graph break.
    """
    if torch.compiler.is_compiling() and compiled.takes(w, config):
        y = _semi24_operator(w._handle, w.values, w.masks, x, bias)
        return y if out is None else out.copy_(y)
    return _eager_semi24_mm(w, x, config=config, out=out, bias=bias)


def _checked(w, x) -> tuple[Semi24Matrix, torch.Tensor]:
    if not isinstance(w, Semi24Matrix):
        raise TypeError(
            f"semi24_mm: W must be a Semi24Matrix, got {type(w).__name__} "
            "(use Semi24Matrix.from_dense(w, prune=True) to build one)"
        )
    x = dense_2d(x, "semi24_mm: X")
    if x.shape[0] != w.shape[1]:
        raise ValueError(f"semi24_mm: W is {w.shape[0]} x {w.shape[1]} but X has {x.shape[0]} rows")
    require_dtype("semi24_mm", w.dtype, semi24_kernel.SUPPORTED_DTYPES)
    return w, x


@torch.compiler.disable  # a graph break: Dynamo cannot trace a launch (stuning.ops.compiled)
def _eager_semi24_mm(w, x: torch.Tensor, *, config, out: torch.Tensor | None,
                     bias: torch.Tensor | None) -> torch.Tensor:
    w, x = _checked(w, x)
    m, k = w.shape
    n, bt = x.shape[1], is_transposed(x)
    cfg = resolve_config(
        config,
        semi24_kernel.Semi24Config,
        lambda: tuned_config(w, "semi24", n, w.dtype, lambda: semi24_features(m, k, n, w.dtype, b_transposed=bt),
                             transposed=bt),
    )
    return launch_semi24(w, x, cfg, out=out, bias=bias)


@torch.library.custom_op("stuning::semi24_mm", mutates_args=())
def _semi24_operator(handle: str, values: torch.Tensor, masks: torch.Tensor, x: torch.Tensor,
                     bias: torch.Tensor | None) -> torch.Tensor:
    """``stuning.semi24_mm`` on the matrix ``handle`` names; its tensors come in so that the compiler
    sees them read."""
    w = MATRICES.get(handle, "stuning::semi24_mm")
    return compiled.run_outside_graph_pools(compiled.warmed_inputs(w), (x,),
                                            lambda: _eager_semi24_mm(w, x, config=None, out=None, bias=bias))


@_semi24_operator.register_fake
def _semi24_fake(handle, values, masks, x, bias):
    compiled.refuse_export("stuning.semi24_mm")
    w, x = _checked(MATRICES.get(handle, "stuning::semi24_mm"), x)
    return check_b_and_out("semi24_mm", values, x, w.shape[0], None)
