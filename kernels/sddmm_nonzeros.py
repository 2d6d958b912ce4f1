"""What the per-nonzero SDDMM kernels share: a program's flat block of the mask's nonzeros (their
positions, rows and columns) and the store of its values as ``alpha * product + beta * mask``.
The gather kernel (``sddmm.py``) and the dense kernel's sampling passes (``sddmm_dense.py``; its
pass by rows takes only the store) differ only in how each nonzero's product is found."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def nonzero_block(row_ptr, col_ptr, nnz, NNZ_BLOCK: tl.constexpr):
    """This program's NNZ_BLOCK nonzeros: their positions in the values, which exist, rows, columns."""
    offs = tl.program_id(0).to(tl.int64) * NNZ_BLOCK + tl.arange(0, NNZ_BLOCK)
    ok = offs < nnz
    rows = tl.load(row_ptr + offs, mask=ok, other=0).to(tl.int64)
    cols = tl.load(col_ptr + offs, mask=ok, other=0).to(tl.int64)
    return offs, ok, rows, cols


@triton.jit
def store_values(product, offs, ok, mask_val_ptr, out_ptr, alpha, beta, HAS_BETA: tl.constexpr):
    """``alpha * product + beta * mask`` (fp32) at the block's nonzeros; the mask's values are read
    only when HAS_BETA, so NaN there is harmless with beta = 0."""
    result = alpha * product
    if HAS_BETA:
        result += beta * tl.load(mask_val_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, result.to(out_ptr.dtype.element_ty), mask=ok)
