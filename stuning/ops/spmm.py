"""``stuning.spmm``: Y = A @ B with A sparse (CSR) and B dense."""

from __future__ import annotations

import torch

from stuning.kernels import spmm as spmm_kernel
from stuning.ops.inputs import as_csr, dense_2d, require_dtype, resolve_config, tuned_config
from stuning.tuning.features import is_transposed, spmm_features
from stuning.tuning.launch import launch_spmm


def problem_of(a, b: torch.Tensor) -> spmm_kernel.SpMMProblem:
    m, k = a.shape
    return spmm_kernel.SpMMProblem(m=m, k=k, n=b.shape[1], nnz=a.nnz, dtype=a.dtype, pad_to=a.pad_to)


@torch.compiler.disable  # see stuning.ops.__init__
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
    """
    a = as_csr(a, "spmm: A")
    b = dense_2d(b, "spmm: B")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"spmm: A is {a.shape[0]} x {a.shape[1]} but B has {b.shape[0]} rows (need {a.shape[1]})")
    require_dtype("spmm", a.dtype, spmm_kernel.SUPPORTED_DTYPES)
    n = b.shape[1]
    bt = is_transposed(b)
    cfg = resolve_config(
        config, spmm_kernel.SpMMConfig,
        lambda: tuned_config(a, "spmm", n, a.dtype, lambda: spmm_features(a, n, b_transposed=bt), transposed=bt),
    )
    return launch_spmm(a, b, cfg, out=out, bias=bias)
