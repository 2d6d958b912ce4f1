"""``stuning.spmm``: Y = A @ B with A sparse (CSR) and B dense."""

from __future__ import annotations

import torch

from stuning.formats import CSRMatrix
from stuning.formats.stored import MATRICES
from stuning.kernels import spmm as spmm_kernel
from stuning.ops import compiled
from stuning.ops.inputs import as_csr, dense_2d, require_dtype, resolve_config, tuned_config
from stuning.tuning.features import is_transposed, spmm_features
from stuning.tuning.launch import launch_spmm


def problem_of(a, b: torch.Tensor) -> spmm_kernel.SpMMProblem:
    m, k = a.shape
    return spmm_kernel.SpMMProblem(m=m, k=k, n=b.shape[1], nnz=a.nnz, dtype=a.dtype, pad_to=a.pad_to)


def spmm(a, b: torch.Tensor, *, config=None, out: torch.Tensor | None = None,
         bias: torch.Tensor | None = None) -> torch.Tensor:
    """``A @ B`` for A a ``CSRMatrix`` (or torch sparse CSR tensor), M x K, and B dense K x N.

    fp32, fp16 and bf16, accumulated in fp32; the result has B's dtype. ``config`` is an
    ``SpMMConfig`` (or a dict of its fields); ``None`` looks the problem up in the tuning
    database (then the cost model, then the default heuristic). A config's ``kernel`` picks the CSR
    kernel, the sliced-ELL one or the Hopper scatter one (their copies of A are built on first use
    and cached on A).

    B may be a transposed view of an N x K tensor (``x.t()``: a layer's input), tuned as its own
    problem: the scatter kernel reads it in place; the CSR and sliced-ELL kernels read one up to
    96 KB in place and copy a larger one to rows within the call.

    ``bias`` (M,) is added to every column of the result, in the kernel. ``out`` (M x N) receives the
    result and may have any strides: a transposed view of an N x M tensor gets Y^T written straight
    into it (how ``SparseLinear`` returns ``x @ W^T + b`` without a pass of its own).

    Under ``torch.compile`` a ``CSRMatrix`` built outside the compiled function, with ``config=None``,
    runs as the operator ``stuning::spmm`` (``stuning.ops.compiled``; ``out`` then receives a copy);
    anything else is a graph break.
    """
    if torch.compiler.is_compiling() and compiled.takes(a, config):
        y = _spmm_operator(a._handle, a.values, b, bias)
        return y if out is None else out.copy_(y)
    return _eager_spmm(a, b, config=config, out=out, bias=bias)


def _checked(a, b) -> tuple[CSRMatrix, torch.Tensor]:
    a = as_csr(a, "spmm: A")
    b = dense_2d(b, "spmm: B")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"spmm: A is {a.shape[0]} x {a.shape[1]} but B has {b.shape[0]} rows (need {a.shape[1]})")
    require_dtype("spmm", a.dtype, spmm_kernel.SUPPORTED_DTYPES)
    return a, b


@torch.compiler.disable  # a graph break: Dynamo cannot trace a launch (stuning.ops.compiled)
def _eager_spmm(a, b: torch.Tensor, *, config, out: torch.Tensor | None, bias: torch.Tensor | None) -> torch.Tensor:
    a, b = _checked(a, b)
    n = b.shape[1]
    bt = is_transposed(b)
    cfg = resolve_config(
        config, spmm_kernel.SpMMConfig,
        lambda: tuned_config(a, "spmm", n, a.dtype, lambda: spmm_features(a, n, b_transposed=bt), transposed=bt),
    )
    return launch_spmm(a, b, cfg, out=out, bias=bias)


@torch.library.custom_op("stuning::spmm", mutates_args=())
def _spmm_operator(handle: str, values: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``stuning.spmm`` on the matrix ``handle`` names; its ``values`` come in so that the compiler sees
    them read."""
    a = MATRICES.get(handle, "stuning::spmm")
    return compiled.run_outside_graph_pools(compiled.warmed_inputs(a), (b,),
                                            lambda: _eager_spmm(a, b, config=None, out=None, bias=bias))


@_spmm_operator.register_fake
def _spmm_fake(handle, values, b, bias):
    compiled.refuse_export("stuning.spmm")
    a, b = _checked(MATRICES.get(handle, "stuning::spmm"), b)
    return spmm_kernel.check_b_and_out("spmm", values, b, a.shape[0], None)
