"""SDDMM through the dense product: ``A @ B`` by cuBLAS (``torch.mm``) into a scratch matrix, then
the mask's nonzeros read out of it, scaled by alpha and summed with beta times the mask's values.

Why keep it: on a weight's mask at K = 256-2048 every output tile of the tiled kernel holds
nonzeros even at 98% zeros, so it does the dense product's MMA work and picks on top. There it ran
0.57-0.88x cuBLAS's full product (BENCHMARKS.md 8y), and the gather kernel's L2 traffic (a column
of B per nonzero) is higher still. Through the dense product a problem costs cuBLAS's time plus one
read of the nonzeros, so the tuner, which times it beside the other two, never has to choose a
kernel much slower than the dense product it replaces.

The sampling pass takes rows, not a flat run of nonzeros: each program owns ROWS consecutive rows
and walks their nonzeros CHUNK at a time, finding each row's start in ``crow``. The flat pass it
replaced read a row index per nonzero (4 bytes, as much as its column) to address the product; on
the first table's weight masks at K = 2048 the row pass took 1.0-1.07x less time (BENCHMARKS.md 8z).
Products in bands of rows sized to L2, so that the pass would read them back from L2, ran slower
than the whole product in every problem measured (8z), and are not kept.

The product is rounded to the inputs' dtype once before alpha and beta apply (as cuBLAS's fp16 and
bf16 GEMMs write it), one rounding more than the other kernels where alpha != 1 or beta != 0. fp32
is exact unless the caller allowed TF32 in ``torch.backends.cuda.matmul``.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from stuning.kernels.sddmm_nonzeros import store_values

# The scratch product's size limit: a sampled product should not need memory on the scale of the
# dense output it avoids (an 8192 x 8192 attention mask in fp16 is 128 MiB; 32768 x 32768 is 2 GiB).
SCRATCH_MAX_BYTES = 512 * 2**20
NNZ_BLOCK = 1024  # nonzero slots a program's step covers (ROWS x CHUNK): 8 a thread at 4 warps
NUM_WARPS = 4


@triton.jit(do_not_specialize=["m"])
def _sddmm_sample_kernel(
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
        # Upcast right after loading: the interpreter's bf16 arithmetic is wrong.
        product = tl.load(c_rows + cols * stride_cn, mask=ok, other=0.0).to(tl.float32)
        store_values(product, offs, ok, mask_val_ptr, out_ptr, alpha, beta, HAS_BETA)


def sddmm_dense(crow: torch.Tensor, col: torch.Tensor, mask_values: torch.Tensor, a: torch.Tensor,
                b: torch.Tensor, *, alpha: float, beta: float, nnz_block: int, num_warps: int,
                out: torch.Tensor) -> torch.Tensor:
    """``out = alpha * (A @ B)[i, j] + beta * mask[i, j]`` at the mask's nonzeros (``crow``, ``col``):
    the product by ``torch.mm``, the sampling by one kernel launch. Inputs are checked by the
    caller (``kernels/sddmm.py``)."""
    m = a.shape[0]
    product = torch.mm(a, b)
    chunk, rows_per_program = pass_shape(col.numel(), m, nnz_block)
    _sddmm_sample_kernel[(triton.cdiv(m, rows_per_program),)](
        crow, col, mask_values, product, out, m, product.stride(0), product.stride(1),
        float(alpha), float(beta), ROWS=rows_per_program, CHUNK=chunk, HAS_BETA=beta != 0, num_warps=num_warps,
    )
    return out


def pass_shape(nnz: int, m: int, nnz_block: int) -> tuple[int, int]:
    """(CHUNK, ROWS) of the sampling pass: a step as wide as an average row (at least 16 nonzeros,
    at most the block), and as many rows a program as fill ``nnz_block`` slots."""
    mean = max(1, math.ceil(nnz / max(1, m)))
    chunk = min(nnz_block, max(16, triton.next_power_of_2(mean)))
    return chunk, nnz_block // chunk


def scratch_bytes(m: int, n: int, dtype: torch.dtype) -> int:
    return m * n * dtype.itemsize
