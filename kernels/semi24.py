"""2:4 semi-structured SpMM: ``Y = W @ X`` with W (M x K) stored as 2:4 values + 2-bit positions.

Triton has no sparse tensor-core instruction, so W is decompressed on chip. Rather than building the
dense (BLOCK_M, BLOCK_K) tile (reshapes and joins), W is split by position in the group: ``W_t`` is
the (BLOCK_M, BLOCK_K/4) matrix of the entries that sit at position t of their group, made by
element-wise selects, and it multiplies the rows t, t+4, t+8, ... of X. Four ``tl.dot``s per K
step, no data movement between lanes.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

import torch
import triton
import triton.language as tl
from stuning.kernels.target import DeviceBudget, check_device, device_budget, interpreting

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
VALUES_PER_META_WORD = 16  # the layout of stuning.formats.Semi24Matrix


@triton.jit
def _select_position(p0, p1, v0, v1, T: tl.constexpr):
    return tl.where(p0 == T, v0, tl.where(p1 == T, v1, tl.zeros_like(v0)))


@triton.jit(do_not_specialize=["M", "N", "K"])
def _semi24_kernel(
    # W: values (M, K/2) and packed positions (M, ceil(K/32)) int32
    val_ptr,
    meta_ptr,
    # X (K x N) and Y (M x N), or fp32 partial sums (SPLIT_K, M, N)
    x_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_vm,
    stride_mm,
    stride_xk,
    stride_xn,
    stride_ys,
    stride_ym,
    stride_yn,
    # template parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    GROUPS: tl.constexpr = BLOCK_K // 4
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    # Grouped ordering (Triton's matmul tutorial): GROUP_M row tiles share the X tiles in L2.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N
    n_groups = tl.cdiv(K, 4)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(pid_k, tl.cdiv(K, BLOCK_K), SPLIT_K):
        g = kt * GROUPS + tl.arange(0, GROUPS)
        g_ok = g < n_groups
        w_ok = m_ok[:, None] & g_ok[None, :]
        v_ptrs = val_ptr + offs_m[:, None] * stride_vm + 2 * g[None, :]
        v0 = tl.load(v_ptrs, mask=w_ok, other=0.0)
        v1 = tl.load(v_ptrs + 1, mask=w_ok, other=0.0)
        word = tl.load(meta_ptr + offs_m[:, None] * stride_mm + g[None, :] // 8, mask=w_ok, other=0)
        shift = (g[None, :] % 8) * 4
        p0 = (word >> shift) & 3
        p1 = (word >> (shift + 2)) & 3
        if UPCAST:
            # The interpreter's bf16 dot is wrong: compute in fp32 there.
            v0 = v0.to(tl.float32)
            v1 = v1.to(tl.float32)
        for t in tl.static_range(4):
            w_t = _select_position(p0, p1, v0, v1, t)
            rows = 4 * g + t
            x = tl.load(
                x_ptr + rows[:, None].to(tl.int64) * stride_xk + offs_n[None, :] * stride_xn,
                mask=(rows < K)[:, None] & n_ok[None, :],
                other=0.0,
            )
            if UPCAST:
                x = x.to(tl.float32)
            acc = tl.dot(w_t, x, acc)

    y_ptrs = y_ptr + pid_k * stride_ys + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@dataclass(frozen=True)
class Semi24Config:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 64  # dense columns of W per step (BLOCK_K / 4 per tl.dot)
    group_m: int = 8
    split_k: int = 1  # >1: partial sums in fp32, reduced afterwards
    num_warps: int = 4
    num_stages: int = 3

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Semi24Problem:
    m: int
    k: int
    n: int
    dtype: torch.dtype


def semi24_mm(
    values: torch.Tensor,
    meta: torch.Tensor,
    x: torch.Tensor,
    *,
    k: int,
    config: Semi24Config,
) -> torch.Tensor:
    """Launch the 2:4 kernel on the arrays of a ``Semi24Matrix`` of logical width ``k``."""
    if x.dim() != 2:
        raise ValueError(f"semi24_mm: X must be 2-D, got shape {tuple(x.shape)}")
    if values.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"semi24_mm: dtype {values.dtype} is not supported; use one of {SUPPORTED_DTYPES}")
    if x.dtype != values.dtype:
        raise TypeError(f"semi24_mm: W is {values.dtype} but X is {x.dtype}; they must match")
    if x.device != values.device or meta.device != values.device:
        raise ValueError(f"semi24_mm: W is on {values.device} but X is on {x.device}")
    check_device(x.device, "semi24_mm input")
    if x.shape[0] != k:
        raise ValueError(f"semi24_mm: W has K = {k} columns but X has {x.shape[0]} rows")
    if values.stride(1) != 1 or meta.stride(1) != 1:
        raise ValueError("semi24_mm: the values and metadata of W must be contiguous along K")
    m, n = values.shape[0], x.shape[1]
    if m == 0 or n == 0 or k == 0:
        return torch.zeros((m, n), dtype=x.dtype, device=x.device)
    split_k = min(config.split_k, triton.cdiv(k, config.block_k))
    if split_k > 1:
        y = torch.empty((split_k, m, n), dtype=torch.float32, device=x.device)
    else:
        y = torch.empty((1, m, n), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n), split_k)
    _semi24_kernel[grid](
        values,
        meta,
        x,
        y,
        m,
        n,
        k,
        values.stride(0),
        meta.stride(0),
        x.stride(0),
        x.stride(1),
        y.stride(0),
        y.stride(1),
        y.stride(2),
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        GROUP_M=config.group_m,
        SPLIT_K=split_k,
        UPCAST=interpreting(),
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return y.sum(0).to(x.dtype) if split_k > 1 else y[0]


# ------------------------------------------------------------------------------ config space
# tl.dot needs every dimension >= 16 on the GPU (the interpreter would accept less), so BLOCK_K,
# which feeds BLOCK_K / 4 to each dot, starts at 64.
_BLOCK_MS = (32, 64, 128, 256)
_BLOCK_NS = (16, 32, 64, 128, 256)
_BLOCK_KS = (64, 128, 256)
_GROUP_MS = (1, 8)
_SPLIT_KS = (1, 2, 4, 8)
_WARPS = (4, 8)
# Three stages never won on the H100 (best-with-3 / best-overall <= 0.98 over 6 problems); 2 and 4 did.
_STAGES = (2, 4)
# N tiles narrower than 64 were 1.8-9x slower wherever a wider one fits (X is re-read per M tile).
_MIN_WIDE_BLOCK_N = 64


def shared_memory_bytes(config: Semi24Config, elem_size: int) -> int:
    """Pipelined tiles in shared memory: values, metadata and X, once per stage."""
    per_stage = (
        config.block_m * config.block_k // 2 * elem_size
        + config.block_m * config.block_k // 32 * 4
        + config.block_k * config.block_n * elem_size
    )
    return per_stage * config.num_stages


def config_space(problem: Semi24Problem, budget: DeviceBudget | None = None) -> list[Semi24Config]:
    budget = budget or device_budget()
    elem = torch.tensor([], dtype=problem.dtype).element_size()
    m_cap = max(16, triton.next_power_of_2(problem.m))
    n_cap = max(16, triton.next_power_of_2(problem.n))
    k_cap = max(64, triton.next_power_of_2(problem.k))
    out = []
    for bm, bn, bk, gm, sk, warps, stages in itertools.product(
        _BLOCK_MS, _BLOCK_NS, _BLOCK_KS, _GROUP_MS, _SPLIT_KS, _WARPS, _STAGES
    ):
        if bm > m_cap or bn > n_cap or bk > k_cap or bn < min(_MIN_WIDE_BLOCK_N, n_cap):
            continue
        if sk > 1 and (sk * bk > problem.k or problem.n > 256):
            continue  # every split needs a K tile; wide X already fills the SMs without splitting
        threads = 32 * warps
        if bm * bn // threads > 128:
            continue  # fp32 accumulator beyond 128 registers a thread spills
        if bm * bn < 16 * threads // 4:
            continue  # too little work to feed the warps' MMA tiles
        cfg = Semi24Config(bm, bn, bk, gm, sk, warps, stages)
        if shared_memory_bytes(cfg, elem) > budget.shared_mem_per_block:
            continue
        out.append(cfg)
    return out


def heuristic(problem: Semi24Problem) -> Semi24Config:
    """Skinny X (decode): narrow N tiles and split-K to fill the SMs; wide X: square tiles."""
    n = problem.n
    if n <= 32:
        block_n = 16 if n <= 16 else 32
        tiles = triton.cdiv(problem.m, 64)
        split_k = 1
        while tiles * split_k < 132 and split_k < 8 and problem.k >= 2 * split_k * 256:
            split_k *= 2
        return Semi24Config(64, block_n, 256, 8, split_k, 4, 4)
    if n <= 128:
        return Semi24Config(64, 64, 128, 8, 1, 4, 4)
    return Semi24Config(128, 128, 64, 8, 1, 8, 3)


def repair(config: Semi24Config, problem: Semi24Problem) -> Semi24Config:
    """The nearest valid config to one tuned for a neighbouring problem."""
    block_m = min(config.block_m, max(16, triton.next_power_of_2(problem.m)))
    block_n = min(config.block_n, max(16, triton.next_power_of_2(problem.n)))
    block_k = min(config.block_k, max(64, triton.next_power_of_2(problem.k)))
    split_k = config.split_k
    while split_k > 1 and split_k * block_k > problem.k:
        split_k //= 2
    return Semi24Config(block_m, block_n, block_k, config.group_m, split_k, config.num_warps, config.num_stages)
