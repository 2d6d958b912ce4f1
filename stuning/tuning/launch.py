"""Running an SpMM config on a ``CSRMatrix``, or a 2:4 config on a ``Semi24Matrix``: the one place
that knows what each kernel a config names is handed.

``stuning.spmm`` and ``stuning.semi24_mm`` (and through them the sparse layers and the benchmarks)
and the tuner's problem runner (``tuning.problems``) all launch through ``launch_spmm`` and
``launch_semi24``, so what is timed is what users get. (The runner once called the 2:4 launcher
without the sparse-MMA kernel's metadata: every trial of that kernel failed, and no tune chose it.)
It lives here rather than in ``stuning.ops`` because the tuner sits below ops and imports must run
downwards; it joins a format and a launcher, never the database.
"""

from __future__ import annotations

import torch

from stuning.formats import CSRMatrix, ScatterTiles, Semi24Matrix, SlicedELLMatrix
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels import semi24_sparse_mma, semi24_wgmma_sp
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_scatter as scatter_kernel
from stuning.kernels import spmm_sell as sell_kernel
from stuning.tuning.features import is_transposed

# Up to this many bytes, the CSR and sliced-ELL kernels gather rows of B straight from a transposed
# view (SparseLinear's X^T): every SM's L1 then holds B, and the element-wise gathers cost less than
# the copy kernel (2.4-2.7 us). On the H200 at 16 tokens (BENCHMARKS.md 7g) the view won at 24 KB
# and 96 KB (BERT's K = 768, 3072: 1-2.3 us a layer) and lost at 128 KB and more (Llama's K = 4096,
# 11008). The scatter and 2:4 warpgroup kernels read the view by TMA at any size.
X_VIEW_MAX_BYTES = 96 * 1024


def gather_operand(b: torch.Tensor) -> torch.Tensor:
    """B as the gathering kernels read it best: a transposed view over ``X_VIEW_MAX_BYTES`` copied to
    rows. The copy is part of the launch, so a tune times it with the kernel it serves (a Llama-7B
    MLP block at 8192 tokens spent 1.0 ms of its 3.9 in such copies made outside the timed launch)."""
    if is_transposed(b) and b.numel() * b.element_size() > X_VIEW_MAX_BYTES:
        return b.contiguous()
    return b


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
    b = gather_operand(b)
    if config.kernel == "sell":
        s = SlicedELLMatrix.from_csr(a, config.rows, config.swizzle, config.nnz_step)
        return sell_kernel.spmm_sell(s.values, s.cols, s.slice_ptr, s.row_ids, b, m=a.shape[0],
                                     slice_rows=s.slice_rows, step=s.step, config=config,
                                     capacity=s.capacity, cut=s.cut, out=out, bias=bias)
    return spmm_kernel.spmm(a.crow, a.col, a.values, b, m=a.shape[0], config=config,
                            row_order=a.row_order() if config.swizzle else None, pad_to=a.pad_to, out=out,
                            bias=bias)


def launch_semi24(w: Semi24Matrix, x: torch.Tensor, config: semi24_kernel.Semi24Config, *,
                  out: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``W @ X`` (plus ``bias`` per row) with the kernel ``config.kernel`` names. The two sparse-MMA
    kernels read metadata in their own layouts, built once a matrix and cached on it, only where they
    run: elsewhere their configs run the Triton kernel, which reads the masks. X may be a transposed
    view of a row-major X^T."""
    meta = None
    if config.kernel == "wgmma_sp" and semi24_wgmma_sp.takes(w.values, x):
        meta = w.wgmma_metadata(config.block_k // 64)
    else:
        # Only the warpgroup kernel reads X^T (a linear layer's input) in place; the others are
        # tuned and fastest on X with N contiguous.
        x = x if x.stride(1) == 1 else x.contiguous()
        if config.kernel == "sparse_mma" and semi24_sparse_mma.takes(w.values, x):
            meta = w.mma_metadata()
    return semi24_kernel.semi24_mm(w.values, w.masks, x, k=w.shape[1], config=config, out=out, bias=bias,
                                   mma_metadata=meta)
