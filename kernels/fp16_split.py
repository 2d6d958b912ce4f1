"""fp32 operands as fp16 parts: fp32 products on the fp16 tensor cores (the scatter kernel's fp32 path).

SGEMM (TF32 off) runs on CUDA cores, and the fp32 gather kernels, bound by L1, reached 0.74-1.18x
its time at 80% zeros from N = 128 (BENCHMARKS.md 8w); a dense tf32x3 product in Triton gained
nothing at N = 128 (8x). fp16's tensor cores run at twice TF32's rate, and two fp16 parts keep 22 of
fp32's 24 significant bits, once each value is scaled by a power of two into |x| < 16 (fp16's range
is narrow). With hi = fp16(x) and lo = fp16((x - hi) * 2^11),

    2^11 A X = A_hi (2^11 X_hi) + A_hi X_lo + A_lo X_hi  (+ A_lo X_lo / 2^11, dropped: 2^-22 of it)

which is one fp16 product of [A_hi | A_hi | A_lo] (M x 3K, built once with the weights by
``stuning.formats.scatter.fp16_parts``, which owns the 2^11) with the stack [2^11 X_hi ; X_lo ;
X_hi] (3K x N, built here at each call), accumulated in fp32 and scaled back in the kernel's
epilogue by 2^-11 / (r_m c_n). A's rows (r) and X's columns (c) are scaled apart, so a column of
small activations keeps its bits. A column holding inf or NaN is scaled by 1 and comes out
non-finite, as from a dense product (the tiles multiply their zeros too).

Two launches: the columns' largest magnitudes (atomic maxima over K blocks), then the split, which
writes the stack in X's orientation (X^T's when K is contiguous, a linear layer's input) so that
the scatter kernel reads it by TMA either way.

The tiled SDDMM splits both of its dense operands per call: B as X above, and A (M x K) through
its transpose, as the left-hand stack [A_hi | A_hi | A_lo] (``lhs=True``: the weights' order, rows
scaled apart), so that the same three products pair up.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

PARTS = 3  # K blocks of A's image and of X's stack (the formats' fp16_parts builds A's alike)
LAUNCHES = 2  # split_x's: the columns' maxima, then the split
LO_SCALE = 2048.0  # 2^11: lo parts scaled into fp16's normal range (the formats' fp16_parts uses the same)
BLOCK_K = 64
BLOCK_N = 64


@triton.jit
def _column_amax_kernel(x_ptr, amax_ptr, K, N, stride_xk, stride_xn, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_k = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = (offs_k < K)[:, None] & (offs_n < N)[None, :]
    x = tl.load(x_ptr + offs_k[:, None] * stride_xk + offs_n[None, :] * stride_xn, mask=ok, other=0.0)
    # As int32, non-negative floats order as their bits (inf and NaN above every finite value), so
    # the maxima need no float atomics, and a NaN column is seen as one.
    bits = tl.abs(x).to(tl.int32, bitcast=True)
    tl.atomic_max(amax_ptr + offs_n, tl.max(bits, axis=0), mask=offs_n < N)


@triton.jit
def _split_kernel(x_ptr, amax_ptr, out_ptr, col_factor_ptr, K, N, stride_xk, stride_xn, stride_ok, stride_on,
                  LO: tl.constexpr, LHS: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_k = tl.program_id(0)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    ok = (offs_k < K)[:, None] & n_ok[None, :]
    # amax in [2^(E-127), 2^(E-126)) for its biased exponent E: scale 2^(130 - E) brings the column
    # under 16. Columns of tiny values stop at 2^126 (its inverse stays a normal float); inf or NaN
    # (E = 255) take 1.
    e = (tl.load(amax_ptr + offs_n, mask=n_ok, other=0) >> 23) & 0xFF
    scale_exp = tl.where(e == 255, 127, tl.minimum(257 - e, 253))
    scale = (scale_exp << 23).to(tl.float32, bitcast=True)
    x = tl.load(x_ptr + offs_k[:, None] * stride_xk + offs_n[None, :] * stride_xn, mask=ok, other=0.0)
    xs = x * scale[None, :]
    hi = xs.to(tl.float16)
    rest = xs - hi.to(tl.float32)
    lo = tl.where(rest == rest, rest * LO, 0.0).to(tl.float16)  # inf - inf: inf's lo is 0
    out = out_ptr + offs_k[:, None] * stride_ok + offs_n[None, :] * stride_on
    if LHS:
        tl.store(out, hi, mask=ok)
        tl.store(out + K * stride_ok, hi, mask=ok)
        tl.store(out + 2 * K * stride_ok, lo, mask=ok)
    else:
        tl.store(out, (hi.to(tl.float32) * LO).to(tl.float16), mask=ok)
        tl.store(out + K * stride_ok, lo, mask=ok)
        tl.store(out + 2 * K * stride_ok, hi, mask=ok)
    if pid_k == 0:
        tl.store(col_factor_ptr + offs_n, ((254 - scale_exp) << 23).to(tl.float32, bitcast=True), mask=n_ok)


def split_x(x: torch.Tensor, lo_scale: float = LO_SCALE, *, lhs: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(X's fp16 stack [L X_hi ; X_lo ; X_hi] (3K x N), the columns' factors 1 / c) of an fp32 X, for
    lo parts scaled by ``lo_scale`` (L, the weights' 2^11). With ``lhs`` the stack is the left-hand
    operand's order [X_hi ; X_hi ; X_lo] (X = A^T for an A of M x K: its transpose is A's image), which
    the right-hand stack pairs with.
    The stack is N-contiguous, or, where X is K-contiguous (X^T's view), the view of an N x 3K
    K-contiguous tensor; either way its rows (columns) start 16-byte aligned, as TMA reads them."""
    if x.dtype != torch.float32 or x.dim() != 2:
        raise TypeError(f"split_x: X must be a 2-D fp32 tensor, got {x.dtype} of shape {tuple(x.shape)}")
    k, n = x.shape
    amax = torch.zeros(n, dtype=torch.int32, device=x.device)
    col_factor = torch.empty(n, dtype=torch.float32, device=x.device)
    k_major = x.stride(0) == 1 and x.stride(1) != 1
    if k_major:
        stack = torch.empty(n, _aligned(PARTS * k), dtype=torch.float16, device=x.device)[:, : PARTS * k].t()
    else:
        stack = torch.empty(PARTS * k, _aligned(n), dtype=torch.float16, device=x.device)[:, :n]
    if k == 0 or n == 0:
        return stack, col_factor.fill_(1.0)
    grid = (triton.cdiv(k, BLOCK_K), triton.cdiv(n, BLOCK_N))
    _column_amax_kernel[grid](x, amax, k, n, x.stride(0), x.stride(1), BLOCK_K=BLOCK_K, BLOCK_N=BLOCK_N)
    _split_kernel[grid](x, amax, stack, col_factor, k, n, x.stride(0), x.stride(1), stack.stride(0), stack.stride(1),
                        LO=lo_scale, LHS=lhs, BLOCK_K=BLOCK_K, BLOCK_N=BLOCK_N)
    return stack, col_factor


def _aligned(length: int) -> int:
    """A row of ``length`` fp16 values rounded up to 16 bytes (TMA's stride rule)."""
    return -(-length // 8) * 8
