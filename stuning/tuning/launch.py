"""Running an SpMM config on a ``CSRMatrix``: the one place that knows which kernel a config names.

``stuning.spmm`` (and through it ``SparseLinear``, ``SparseConv2d`` and the benchmarks) and the
tuner's problem runner (``tuning.problems``) both launch through ``launch_spmm``, so what is timed
is what users get. It lives here rather than in ``stuning.ops`` because the tuner sits below ops
and imports must run downwards; it joins a format and a launcher, never the database.
"""

from __future__ import annotations

import torch

from stuning.formats import CSRMatrix, ScatterTiles, SlicedELLMatrix
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_scatter as scatter_kernel
from stuning.kernels import spmm_sell as sell_kernel


def launch_spmm(a: CSRMatrix, b: torch.Tensor, config: spmm_kernel.SpMMConfig, *,
                out: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``A @ B`` (plus ``bias`` per row) with the kernel ``config.kernel`` names; a sliced-ELL copy
    of A is built on first use and cached on A (weights are static)."""
    if config.kernel == "scatter":
        if scatter_kernel.takes(b) and a.dtype == b.dtype:
            tiles = ScatterTiles.from_csr(a, config.rows, config.nnz_step)
            return scatter_kernel.spmm_scatter(tiles, b, config=config, out=out, bias=bias)
        # Off sm_90, in the interpreter, or an X TMA cannot read: the CSR kernel runs the product.
        m, k = a.shape
        config = spmm_kernel.heuristic(spmm_kernel.SpMMProblem(m, k, b.shape[1], a.nnz, a.dtype, a.pad_to))
    if config.kernel == "sell":
        s = SlicedELLMatrix.from_csr(a, config.rows, config.swizzle, config.nnz_step)
        return sell_kernel.spmm_sell(s.values, s.cols, s.slice_ptr, s.row_ids, b, m=a.shape[0],
                                     slice_rows=s.slice_rows, step=s.step, config=config, out=out,
                                     bias=bias)
    return spmm_kernel.spmm(a.crow, a.col, a.values, b, m=a.shape[0], config=config,
                            row_order=a.row_order() if config.swizzle else None, pad_to=a.pad_to, out=out,
                            bias=bias)
