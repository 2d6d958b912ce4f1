"""SDDMM through the dense product: ``A @ B`` by cuBLAS (``torch.mm``) into a scratch M x N matrix,
then the mask's nonzeros read out of it, scaled by alpha and summed with beta times the mask's values.

Why keep it: on a weight's mask at K = 256-2048 every output tile of the tiled kernel holds
nonzeros even at 98% zeros, so it does the dense product's MMA work and picks on top. There it ran
0.57-0.88x cuBLAS's full product (BENCHMARKS.md 8y), and the gather kernel's L2 traffic (a column
of B per nonzero) is higher still. Through the dense product a problem costs cuBLAS's time plus one
read of the nonzeros, so the tuner, which times it beside the other two, never has to choose a
kernel much slower than the dense product it replaces. It needs the scratch product's memory, so
the config space holds it only up to ``SCRATCH_MAX_BYTES``.

The product is rounded to the inputs' dtype once before alpha and beta apply (as cuBLAS's fp16 and
bf16 GEMMs write it), one rounding more than the other kernels where alpha != 1 or beta != 0. fp32
is exact unless the caller allowed TF32 in ``torch.backends.cuda.matmul``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from stuning.kernels.sddmm_nonzeros import nonzero_block, store_values

# The scratch product's size limit: a sampled product should not need memory on the scale of the
# dense output it avoids (an 8192 x 8192 attention mask in fp16 is 128 MiB; 32768 x 32768 is 2 GiB).
SCRATCH_MAX_BYTES = 512 * 2**20
NNZ_BLOCK = 1024  # 8 nonzeros a thread at 4 warps: the sampling is a short, memory-bound pass
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


def sddmm_dense(row_ids: torch.Tensor, col: torch.Tensor, mask_values: torch.Tensor, a: torch.Tensor,
                b: torch.Tensor, *, alpha: float, beta: float, nnz_block: int, num_warps: int,
                out: torch.Tensor) -> torch.Tensor:
    """``out = alpha * (A @ B)[row_ids, col] + beta * mask_values``: the product by ``torch.mm``,
    the sampling by one kernel launch. Inputs are checked by the caller (``kernels/sddmm.py``)."""
    product = torch.mm(a, b)
    nnz = col.numel()
    _sddmm_sample_kernel[(triton.cdiv(nnz, nnz_block),)](
        row_ids, col, mask_values, product, out, nnz, product.stride(0), product.stride(1),
        float(alpha), float(beta), NNZ_BLOCK=nnz_block, HAS_BETA=beta != 0, num_warps=num_warps,
    )
    return out


def scratch_bytes(m: int, n: int, dtype: torch.dtype) -> int:
    return m * n * dtype.itemsize
