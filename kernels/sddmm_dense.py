"""SDDMM through the dense product: ``A @ B`` by cuBLAS (``torch.mm``) into a scratch matrix, then
the mask's nonzeros read out of it, scaled by alpha and summed with beta times the mask's values.

Why keep it: on a weight's mask at K = 256-2048 every output tile of the tiled kernel holds
nonzeros even at 98% zeros, so it does the dense product's MMA work and picks on top. There it ran
0.57-0.88x cuBLAS's full product (BENCHMARKS.md 8y), and the gather kernel's L2 traffic (a column
of B per nonzero) is higher still. Through the dense product a problem costs cuBLAS's time plus one
read of the nonzeros, so the tuner, which times it beside the other two, never has to choose a
kernel much slower than the dense product it replaces.

The sampling pass comes in two forms, and the tuner times both (``block_m`` of the config): a flat
block of NNZ_BLOCK nonzeros a program, each read with its row index and column; or ROWS rows a
program (``block_m``), their nonzeros CHUNK at a time from each row's start in ``crow``, which
reads no row index (4 bytes a nonzero, as much as the column) but waits on one load more before it
can address the product. On the first table's weight masks (BENCHMARKS.md 8z) the row pass took
1.04-1.28x less time at 70-90% zeros on 4096-11008-row masks, where the pass streams tens of MB,
and up to 1.05x more on 768 x 3072 at 95-98%, where a few dozen programs each wait on their loads.
Products in bands of rows sized to L2, so that the pass would read them back from there, were no
faster than the whole product (at best 1.5% in one of 26 problems, up to 14% slower; 8z), and are
not kept.

The product is rounded to the inputs' dtype once before alpha and beta apply (as cuBLAS's fp16 and
bf16 GEMMs write it), one rounding more than the other kernels where alpha != 1 or beta != 0. fp32
is exact unless the caller allowed TF32 in ``torch.backends.cuda.matmul``.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from stuning.kernels.sddmm_nonzeros import nonzero_block, store_values

# The scratch product's size limit: a sampled product should not need memory on the scale of the
# dense output it avoids (an 8192 x 8192 attention mask in fp16 is 128 MiB; 32768 x 32768 is 2 GiB).
SCRATCH_MAX_BYTES = 512 * 2**20
NNZ_BLOCK = 1024  # nonzero slots a program's step covers (ROWS x CHUNK): 8 a thread at 4 warps
NUM_WARPS = 4


@triton.jit(do_not_specialize=["nnz"])
def _sddmm_sample_kernel(
    # the mask: row and column of each nonzero, and its value (read only when HAS_BETA)
    row_ptr,
    col_ptr,
    mask_val_ptr,
    # the dense product (M x N) and the output values (nnz)
    c_ptr,
    out_ptr,
    nnz,
    stride_cm,
    stride_cn,
    alpha,
    beta,
    # template parameters
    NNZ_BLOCK: tl.constexpr,
    HAS_BETA: tl.constexpr,
):
    offs, ok, rows, cols = nonzero_block(row_ptr, col_ptr, nnz, NNZ_BLOCK)
    # Upcast right after loading: the interpreter's bf16 arithmetic is wrong.
    product = tl.load(c_ptr + rows * stride_cm + cols * stride_cn, mask=ok, other=0.0).to(tl.float32)
    store_values(product, offs, ok, mask_val_ptr, out_ptr, alpha, beta, HAS_BETA)


@triton.jit(do_not_specialize=["m"])
def _sddmm_sample_rows_kernel(
    # the mask: where each row's nonzeros start, their columns and values (read only when HAS_BETA)
    crow_ptr,
    col_ptr,
    mask_val_ptr,
    # the dense product (M x N) and the output values (nnz)
    c_ptr,
    out_ptr,
    m,
    stride_cm,
    stride_cn,
    alpha,
    beta,
    # template parameters
    ROWS: tl.constexpr,
    CHUNK: tl.constexpr,
    HAS_BETA: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    in_mask = rows < m
    starts = tl.load(crow_ptr + rows, mask=in_mask, other=0).to(tl.int64)
    ends = tl.load(crow_ptr + rows + 1, mask=in_mask, other=0).to(tl.int64)
    c_rows = c_ptr + rows.to(tl.int64)[:, None] * stride_cm
    for c0 in range(0, tl.max(ends - starts, axis=0), CHUNK):
        offs = starts[:, None] + c0 + tl.arange(0, CHUNK)[None, :]
        ok = offs < ends[:, None]
        cols = tl.load(col_ptr + offs, mask=ok, other=0).to(tl.int64)
        product = tl.load(c_rows + cols * stride_cn, mask=ok, other=0.0).to(tl.float32)
        store_values(product, offs, ok, mask_val_ptr, out_ptr, alpha, beta, HAS_BETA)


def sddmm_dense(row_ids: torch.Tensor, crow: torch.Tensor | None, col: torch.Tensor, mask_values: torch.Tensor,
                a: torch.Tensor, b: torch.Tensor, *, alpha: float, beta: float, rows_per_program: int,
                nnz_block: int, num_warps: int, out: torch.Tensor) -> torch.Tensor:
    """``out = alpha * (A @ B)[i, j] + beta * mask[i, j]`` at the mask's nonzeros: the product by
    ``torch.mm``, the sampling by one kernel launch, flat over ``row_ids`` and ``col`` where
    ``rows_per_program`` is 0, else by rows over ``crow`` and ``col``. Inputs are checked by the
    caller (``kernels/sddmm.py``)."""
    product = torch.mm(a, b)
    # What both passes take after their own indices: the product's strides, alpha and beta.
    common = (product.stride(0), product.stride(1), float(alpha), float(beta))
    if rows_per_program == 0:
        nnz = col.numel()
        _sddmm_sample_kernel[(triton.cdiv(nnz, nnz_block),)](
            row_ids, col, mask_values, product, out, nnz, *common, NNZ_BLOCK=nnz_block, HAS_BETA=beta != 0,
            num_warps=num_warps,
        )
        return out
    m = a.shape[0]
    _sddmm_sample_rows_kernel[(triton.cdiv(m, rows_per_program),)](
        crow, col, mask_values, product, out, m, *common, ROWS=rows_per_program,
        CHUNK=max(1, nnz_block // rows_per_program), HAS_BETA=beta != 0, num_warps=num_warps,
    )
    return out


def rows_per_program(nnz: int, m: int, nnz_block: int = NNZ_BLOCK) -> int:
    """ROWS of the row pass for a mask of ``nnz`` nonzeros in ``m`` rows: as many as fill
    ``nnz_block`` slots with steps (CHUNK) wide enough for most rows in one (the mean plus three
    standard deviations of a uniform mask's row; at least 16 nonzeros, at most the block)."""
    mean = nnz / max(1, m)
    chunk = min(nnz_block, max(16, triton.next_power_of_2(math.ceil(mean + 3 * math.sqrt(mean)))))
    return max(1, nnz_block // chunk)


def scratch_bytes(m: int, n: int, dtype: torch.dtype) -> int:
    return m * n * dtype.itemsize
