"""2:4 semi-structured SpMM: ``Y = W @ X`` with W (M x K) stored as 2:4 values + 4-bit group masks.

Triton has no sparse tensor-core instruction, so W is decompressed on chip ("load as sparse, compute
as dense"): each K step loads the (BLOCK_M, BLOCK_K/4) value pairs of W as int32 words and the
(BLOCK_M, BLOCK_K/32) mask words behind them, rebuilds every group of four columns as two int32
words by bit tests and 16-bit shifts of its pair (no compares, no per-element selects), and feeds
one ``tl.dot``. The product is computed transposed, ``Y^T = X^T W^T``: the rebuilt tile is the
dot's shared-memory operand, so on Hopper the warpgroup MMA runs asynchronously instead of waiting
after every instruction for a register operand (checked in the sm_90a SASS; BENCHMARKS.md, section 7).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import asdict, dataclass

import torch
import triton
import triton.language as tl
from stuning.kernels import semi24_hopper, semi24_sparse_mma, semi24_wgmma_sp
from stuning.kernels.split_k import add_split, split_k_workspace
from stuning.kernels.spmm import check_b_and_out, check_bias, fill_bias
from stuning.kernels.target import DeviceBudget, check_device, device_budget, interpreting

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
KERNELS = ("triton", "hopper", "sparse_mma", "wgmma_sp")
GLUON_KERNELS = {"hopper": semi24_hopper, "sparse_mma": semi24_sparse_mma, "wgmma_sp": semi24_wgmma_sp}
_KERNEL_NAMES = {"hopper": "Hopper", "sparse_mma": "sparse-MMA", "wgmma_sp": "sparse warpgroup-MMA"}
GROUPS_PER_MASK_WORD = 8  # the layout of stuning.formats.Semi24Matrix


@triton.jit
def _split_fields(x, BITS: tl.constexpr):
    """(R, C) ints of two BITS-wide fields each -> (R, 2C), low field first."""
    mask: tl.constexpr = (1 << BITS) - 1
    return tl.reshape(tl.join(x & mask, (x >> BITS) & mask), (x.shape[0], 2 * x.shape[1]))


@triton.jit
def _rebuild_groups(pairs, words, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, DTYPE: tl.constexpr,
                    SPREAD_BANKS: tl.constexpr):
    """The dense (BLOCK_M, BLOCK_K) tile of W from its kept pairs (int32: first value in the low
    half) and its mask words. Exactly two mask bits are set per group, so a pair lands in columns
    (0, 1) as it is, splits across (0 | 1, 2 | 3) by halves, or lands in (2, 3) as it is."""
    b = _split_fields(_split_fields(_split_fields(words, 16), 8), 4)
    zero = tl.zeros_like(pairs)
    lo = tl.where((b & 1) != 0, tl.where((b & 2) != 0, pairs, pairs & 0xFFFF),
                  tl.where((b & 2) != 0, pairs << 16, zero))
    hi = tl.where((b & 8) != 0, tl.where((b & 4) != 0, pairs, pairs & -65536),
                  tl.where((b & 4) != 0, (pairs >> 16) & 0xFFFF, zero))
    w0 = lo.to(tl.int16).to(DTYPE, bitcast=True)
    w1 = (lo >> 16).to(tl.int16).to(DTYPE, bitcast=True)
    w2 = hi.to(tl.int16).to(DTYPE, bitcast=True)
    w3 = (hi >> 16).to(tl.int16).to(DTYPE, bitcast=True)
    GROUPS: tl.constexpr = BLOCK_K // 4
    # (BLOCK_M, GROUPS, 2, 2): w_t at [m, g, t // 2, t % 2]. Its columns are then put in the order
    # of _k_of_column; the reshapes and the permute only relabel registers.
    w = tl.join(tl.join(w0, w2), tl.join(w1, w3))
    if SPREAD_BANKS:
        w = tl.reshape(w, (BLOCK_M, GROUPS // 16, 2, 2, 4, 2, 2))  # [m, g4.., g3, g2, g1g0, t1, t0]
        w = tl.permute(w, (0, 5, 1, 3, 2, 4, 6))  # [m, t1, g4.., g2, g3, g1g0, t0]
    return tl.reshape(w, (BLOCK_M, BLOCK_K))


@triton.jit
def _k_of_column(BLOCK_K: tl.constexpr, SPREAD_BANKS: tl.constexpr):
    """The column of W (within a K step) behind each column of the rebuilt tile. Read as bits from
    the lowest, a column is (t0, g0, g1, g3, g2, g4.., t1) for position t = 2 t1 + t0 of group g,
    where W's own order is (t0, t1, g0, g1, ..). In the layout Triton 3.6 gives the tuned decode
    configs (64-column steps), a thread holds eight consecutive groups and a warp two threads a
    row, so g3 is the lane's bit: moved below g2 it picks the half of a 32-byte swizzle unit, and a
    warp's 16-byte stores of the tile cover all 32 banks (in W's order they hit 16). Any order is
    correct; this one is only fitted to that layout. t0 stays lowest, so a group's kept pair is
    still one 32-bit register. The rows of X are read in the same order, which costs nothing: X's
    tile is contiguous along N."""
    GROUPS: tl.constexpr = BLOCK_K // 4
    c = tl.arange(0, BLOCK_K)
    if not SPREAD_BANKS:
        return c
    t = (c & 1) + 2 * (c // (2 * GROUPS))
    g = ((c >> 1) & 3) + 8 * ((c >> 3) & 1) + 4 * ((c >> 4) & 1) + 16 * ((c >> 5) % (GROUPS // 16))
    return 4 * g + t


@triton.jit
def _semi24_kernel(
    # W: values (M, K/2), read as int32 pairs, and 4-bit group masks (M, ceil(K/32)) int32
    val_ptr,
    mask_ptr,
    # X (K x N) and Y (M x N), any strides, and the bias Y's rows get (HAS_BIAS)
    x_ptr,
    y_ptr,
    bias_ptr,
    # SPLIT_K > 1: the zeroed fp32 buffer (Y^T) the splits add into and a counter per output tile
    partial_ptr,
    count_ptr,
    M,
    N,
    K,
    stride_vm,
    stride_mm,
    stride_xk,
    stride_xn,
    stride_ym,
    stride_yn,
    # template parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    UPCAST: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SPREAD_BANKS: tl.constexpr,
):
    GROUPS: tl.constexpr = BLOCK_K // 4
    WORDS: tl.constexpr = BLOCK_K // 32
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

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N
    n_groups = tl.cdiv(K, 4)  # stored per row: K is padded to whole groups
    groups = pid_k * GROUPS + tl.arange(0, GROUPS)
    words = pid_k * WORDS + tl.arange(0, WORDS)
    rows = pid_k * BLOCK_K + _k_of_column(BLOCK_K, SPREAD_BANKS)
    # Pointers advance by a constant per step: recomputing 64-bit addresses each step cost more
    # instructions than the masks they feed.
    pair_base = val_ptr.to(tl.pointer_type(tl.int32))
    pair_ptrs = pair_base + offs_m[:, None].to(tl.int64) * (stride_vm // 2) + groups[None, :]
    mask_ptrs = mask_ptr + offs_m[:, None].to(tl.int64) * stride_mm + words[None, :]
    xt_ptrs = x_ptr + rows[None, :].to(tl.int64) * stride_xk + offs_n[:, None] * stride_xn
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)  # Y^T
    for kt in range(pid_k, tl.cdiv(K, BLOCK_K), SPLIT_K):
        if EVEN_K:
            # K masks only on a ragged last tile: masks along the contiguous axis stop vector loads.
            pairs = tl.load(pair_ptrs, mask=m_ok[:, None], other=0)
            mwords = tl.load(mask_ptrs, mask=m_ok[:, None], other=0)
            xt = tl.load(xt_ptrs, mask=n_ok[:, None], other=0.0)
        else:
            g = kt * GROUPS + tl.arange(0, GROUPS)
            wd = kt * WORDS + tl.arange(0, WORDS)
            r = kt * BLOCK_K + _k_of_column(BLOCK_K, SPREAD_BANKS)
            pairs = tl.load(pair_ptrs, mask=m_ok[:, None] & (g < n_groups)[None, :], other=0)
            mwords = tl.load(mask_ptrs, mask=m_ok[:, None] & (wd < tl.cdiv(n_groups, 8))[None, :], other=0)
            xt = tl.load(xt_ptrs, mask=n_ok[:, None] & (r < K)[None, :], other=0.0)
        w = _rebuild_groups(pairs, mwords, BLOCK_M, BLOCK_K, val_ptr.dtype.element_ty, SPREAD_BANKS)
        if UPCAST:
            # The interpreter's bf16 arithmetic and dot are wrong: compute in fp32 there.
            w = w.to(tl.float32)
            xt = xt.to(tl.float32)
        acc = tl.dot(xt, tl.trans(w), acc)
        pair_ptrs += SPLIT_K * GROUPS
        mask_ptrs += SPLIT_K * WORDS
        xt_ptrs += SPLIT_K * BLOCK_K * stride_xk

    if SPLIT_K > 1:
        # The splits add into a zeroed buffer (Y^T); the one that finishes the tile last writes Y.
        partial_ptrs = partial_ptr + offs_n[:, None].to(tl.int64) * M + offs_m[None, :]
        last, acc = add_split(partial_ptrs, acc, m_ok[None, :] & n_ok[:, None], count_ptr + pid, SPLIT_K)
        if last:
            _store_y(acc, y_ptr, bias_ptr, offs_m, offs_n, m_ok, n_ok, stride_ym, stride_yn, HAS_BIAS)
    else:
        _store_y(acc, y_ptr, bias_ptr, offs_m, offs_n, m_ok, n_ok, stride_ym, stride_yn, HAS_BIAS)


@triton.jit
def _store_y(acc, y_ptr, bias_ptr, offs_m, offs_n, m_ok, n_ok, stride_ym, stride_yn, HAS_BIAS: tl.constexpr):
    """Y (any strides) from the fp32 Y^T tile ``acc``, plus the rows' bias."""
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_m, mask=m_ok, other=0.0).to(tl.float32)[None, :]
    y_ptrs = y_ptr + offs_m[None, :].to(tl.int64) * stride_ym + offs_n[:, None] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[None, :] & n_ok[:, None])


@dataclass(frozen=True)
class Semi24Config:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 64  # dense columns of W per step, decompressed into one tl.dot
    group_m: int = 8
    split_k: int = 1  # >1: K split across programs that add into an fp32 buffer
    num_warps: int = 4
    num_stages: int = 3
    # "triton" (this file), "hopper" (semi24_hopper.py: W rebuilt in the MMA's registers),
    # "sparse_mma" (semi24_sparse_mma.py: the sparse tensor cores, warp by warp) or "wgmma_sp"
    # (semi24_wgmma_sp.py: the sparse warpgroup MMA fed by TMA; block_m = 16 num_warps). The Gluon
    # kernels run on sm_90 only and ignore group_m; where one cannot run, the Triton kernel runs a
    # config of it (repair).
    kernel: str = "triton"

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"Semi24Config: unknown kernel {self.kernel!r}; use one of {KERNELS}")

    def as_dict(self) -> dict:
        return asdict(self)

    def feature_items(self) -> dict:
        """The parameters the cost model's fitted effects are named by. The sparse warpgroup-MMA
        kernel's tiles cost other things than the rebuilding kernels' (effects fitted on those put
        its best configs of the H200 in the bottom half of the ranking), so its names are its own
        ('wgmma_sp.block_m'); the others' are their fields (stored fits stay valid)."""
        d = self.as_dict()
        if self.kernel != "wgmma_sp":
            return d
        kept = ("block_n", "block_k", "split_k", "num_warps", "num_stages")
        return {"kernel": "wgmma_sp", **{f"wgmma_sp.{k}": d[k] for k in kept}}


@dataclass(frozen=True)
class Semi24Problem:
    m: int
    k: int
    n: int
    dtype: torch.dtype


def semi24_mm(
    values: torch.Tensor,
    masks: torch.Tensor,
    x: torch.Tensor,
    *,
    k: int,
    config: Semi24Config,
    out: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    mma_metadata: torch.Tensor | None = None,
) -> torch.Tensor:
    """Launch the 2:4 kernel on the arrays of a ``Semi24Matrix`` of logical width ``k``:
    ``out = W @ x (+ bias[:, None])``, ``out`` of any strides (a transposed view writes Y^T).
    The sparse-MMA kernel also reads the matrix's ``mma_metadata()``, the sparse warpgroup-MMA kernel
    its ``wgmma_metadata(config.block_k // 64)`` (both passed as ``mma_metadata``)."""
    if x.dim() != 2:
        raise ValueError(f"semi24_mm: X must be 2-D, got shape {tuple(x.shape)}")
    if values.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"semi24_mm: dtype {values.dtype} is not supported; use one of {SUPPORTED_DTYPES}")
    if x.dtype != values.dtype:
        raise TypeError(f"semi24_mm: W is {values.dtype} but X is {x.dtype}; they must match")
    if x.device != values.device or masks.device != values.device:
        raise ValueError(f"semi24_mm: W is on {values.device} but X is on {x.device}")
    check_device(x.device, "semi24_mm input")
    if x.shape[0] != k:
        raise ValueError(f"semi24_mm: W has K = {k} columns but X has {x.shape[0]} rows")
    m, n = values.shape[0], x.shape[1]
    out = check_b_and_out("semi24_mm", values, x, m, out)
    check_bias("semi24_mm", bias, m, values)
    if m == 0 or n == 0 or k == 0:
        return fill_bias(out, bias)
    if values.stride(1) != 1 or masks.stride(1) != 1:
        raise ValueError("semi24_mm: the values and masks of W must be contiguous along K")
    if values.stride(0) % 2 or values.data_ptr() % 4:
        # The kernel reads each group's two values as one int32.
        raise ValueError("semi24_mm: the values of W must start and have rows on 4-byte boundaries")
    if config.kernel != "triton" and not GLUON_KERNELS[config.kernel].takes(values, x):
        # The Gluon kernel cannot run this X here: the Triton kernel runs the nearest tiles it takes.
        fallback = triton_fallback(config)
        why = why_excluded(fallback, x.element_size(), device_budget())
        if why is not None:
            raise ValueError(f"semi24_mm: the {_KERNEL_NAMES[config.kernel]} kernel cannot run this X here, and the "
                             f"Triton kernel does not take the config's tiles: {why}")
        config = fallback
    split_k = min(config.split_k, triton.cdiv(k, config.block_k))
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    partial, counts = split_k_workspace(x.device, m * n, tiles) if split_k > 1 else (out, out)
    tile_args = dict(m=m, n=n, k=k, block_m=config.block_m, block_n=config.block_n, split_k=split_k,
                     num_warps=config.num_warps, num_stages=config.num_stages)
    if config.kernel == "hopper":
        semi24_hopper.launch(values, masks, x, out, bias, partial, counts, **tile_args)
        return out
    if config.kernel == "sparse_mma":
        semi24_sparse_mma.check_metadata(mma_metadata, m, k, values.device)
        semi24_sparse_mma.launch(values, mma_metadata, x, out, bias, partial, counts, **tile_args)
        return out
    if config.kernel == "wgmma_sp":
        semi24_wgmma_sp.check_metadata(mma_metadata, m, k, values.device)
        semi24_wgmma_sp.launch(values, mma_metadata, x, out, bias, partial, counts, block_k=config.block_k,
                               **tile_args)
        return out
    grid = (tiles, split_k)
    _semi24_kernel[grid](
        values,
        masks,
        x,
        out,
        values if bias is None else bias,
        partial,
        counts,
        m,
        n,
        k,
        values.stride(0),
        masks.stride(0),
        x.stride(0),
        x.stride(1),
        out.stride(0),
        out.stride(1),
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        GROUP_M=config.group_m,
        SPLIT_K=split_k,
        EVEN_K=k % config.block_k == 0,
        UPCAST=interpreting(),
        HAS_BIAS=bias is not None,
        SPREAD_BANKS=spread_banks(config),
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return out


def triton_fallback(config: Semi24Config) -> Semi24Config:
    """The Triton kernel's config for a Gluon kernel's, where that one cannot run: the same tiles,
    brought into its space (the sparse-MMA kernel's 16-row, 1-2-warp tiles and 12-16 splits; the
    sparse warpgroup-MMA kernel's 16 warps, 256-row tiles and stages past what fits)."""
    if config.kernel == "sparse_mma":
        return dataclasses.replace(config, kernel="triton", block_m=max(32, config.block_m),
                                   num_warps=max(4, config.num_warps), split_k=min(8, config.split_k))
    if config.kernel == "wgmma_sp":
        out = dataclasses.replace(config, kernel="triton", block_m=min(128, config.block_m),
                                  num_warps=min(8, config.num_warps), split_k=min(8, config.split_k),
                                  num_stages=min(max(_STAGES), config.num_stages))
        while out.num_stages > min(_STAGES) and shared_memory_bytes(out, 2) > _FALLBACK_SHARED_BYTES:
            out = dataclasses.replace(out, num_stages=out.num_stages - 1)
        if shared_memory_bytes(out, 2) > _FALLBACK_SHARED_BYTES:
            out = dataclasses.replace(out, block_k=64)
        return out
    return dataclasses.replace(config, kernel="triton")


def spread_banks(config: Semi24Config) -> bool:
    """Whether the rebuilt tile goes to shared memory in _k_of_column's order. That order is fitted
    to the 32-byte swizzle Triton 3.6 gives the tile for ``mma.sync`` (N tiles under 64); for the
    warpgroup MMA (N tiles of 64 and up) the tile has a 128-byte swizzle, under which W's own order
    had fewer conflicts. Measured on the H200 with Nsight Compute, BENCHMARKS.md 7k."""
    return config.block_n < 64


# ------------------------------------------------------------------------------ config space
# BLOCK_K starts at 64: two mask words per row and step, and a dot deep enough for the MMA.
_BLOCK_MS = (32, 64, 128, 256)
_BLOCK_NS = (16, 32, 64, 128, 256)
_BLOCK_KS = (64, 128, 256)
_GROUP_MS = (1, 8)
# 3 and 6 as well as powers of two: with 11008 rows in 64-row tiles, 4 splits make 688 programs,
# 6 on some SMs and 5 on others (the busiest SM sets the time of a kernel bound by shared memory);
# 3 or 6 make 516 or 1032, within 1% of an even share (cost_model.base.sm_balance).
_SPLIT_KS = (1, 2, 3, 4, 6, 8)
_WARPS = (4, 8)
# With the decompress-to-one-dot kernel 2, 3 and 4 stages each won somewhere on the H200.
_STAGES = (2, 3, 4)
# N tiles narrower than 64 were 1.8-9x slower wherever a wider one fits (X is re-read per M tile).
_MIN_WIDE_BLOCK_N = 64
# What a fallback config may use: the least any sm_80+ GPU gives a program (the A100's 163 KB).
_FALLBACK_SHARED_BYTES = 163 * 1024


def shared_memory_bytes(config: Semi24Config, elem_size: int) -> int:
    """Pipelined tiles in shared memory (value pairs, masks and X, once per stage) and the
    decompressed W tile handed to the dot; the Gluon kernels keep only X's stages there."""
    if config.kernel == "wgmma_sp":
        return sum(semi24_wgmma_sp.buffer_bytes(config.block_n, config.block_k, config.num_warps,
                                                config.num_stages).values())
    if config.kernel != "triton":
        return config.num_stages * config.block_k * config.block_n * elem_size
    per_stage = (
        config.block_m * config.block_k // 2 * elem_size
        + config.block_m * config.block_k // 32 * 4
        + config.block_k * config.block_n * elem_size
    )
    return per_stage * config.num_stages + config.block_m * config.block_k * elem_size


def why_excluded(config: Semi24Config, elem_size: int, budget: DeviceBudget) -> str | None:
    """Why a config is outside the space whatever the problem (None: it is in): what spills, what
    the compiler rejects, what starves the warps, what does not fit in shared memory."""
    bm, bn, bk, warps = config.block_m, config.block_n, config.block_k, config.num_warps
    if config.kernel != "triton":
        return GLUON_KERNELS[config.kernel].why_excluded(bm, bn, bk, warps, config.num_stages, elem_size, budget)
    threads = 32 * warps
    if bm * bn // threads > 128 or (bm * bk + bm * bn) // threads > 160:
        return "the accumulator plus the rebuilt W tile exceed ~160 registers a thread (spills in sm_90a SASS)"
    if bm // warps == 32 and bn >= 64:
        return "Triton 3.6 fails to compile it (Illegal shared layout in TritonGPUOptimizeDotOperands)"
    if bm * bn < 16 * threads // 4:
        return "too little work to feed the warps' MMA tiles"
    if shared_memory_bytes(config, elem_size) > budget.shared_mem_per_block:
        return f"needs {shared_memory_bytes(config, elem_size)} bytes of shared memory"
    return None


def config_space(problem: Semi24Problem, budget: DeviceBudget | None = None) -> list[Semi24Config]:
    budget = budget or device_budget()
    elem = problem.dtype.itemsize
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
        cfg = Semi24Config(bm, bn, bk, gm, sk, warps, stages)
        if why_excluded(cfg, elem, budget) is None:
            out.append(cfg)
    block_ns = [bn for bn in _BLOCK_NS if min(_MIN_WIDE_BLOCK_N, n_cap) <= bn <= n_cap]
    split_ks = _SPLIT_KS if problem.n <= 256 else (1,)
    for bm, bn, sk, warps, stages in semi24_hopper.tiles(block_ns, split_ks, problem.k, problem.n, elem, budget):
        out.append(Semi24Config(bm, bn, semi24_hopper.BLOCK_K, 1, sk, warps, stages, kernel="hopper"))
    sparse_splits = semi24_sparse_mma.SPLIT_KS if problem.n <= 256 else (1,)
    for bm, bn, sk, warps, stages in semi24_sparse_mma.tiles(sparse_splits, problem.k, problem.n, elem, budget):
        out.append(Semi24Config(bm, bn, semi24_sparse_mma.BLOCK_K, 1, sk, warps, stages, kernel="sparse_mma"))
    wgmma_splits = semi24_wgmma_sp.SPLIT_KS if problem.n <= 256 else (1,)
    for bm, bn, bk, sk, warps, stages in semi24_wgmma_sp.tiles(wgmma_splits, problem.k, problem.n, elem, budget):
        out.append(Semi24Config(bm, bn, bk, 1, sk, warps, stages, kernel="wgmma_sp"))
    return out


def heuristic(problem: Semi24Problem) -> Semi24Config:
    """Skinny X (decode): short M tiles and split-K to fill the SMs; wide X: wide N tiles.
    (The H200 probe's winners on the Llama-7B shapes.)"""
    n = problem.n
    if n <= 32:
        tiles = triton.cdiv(problem.m, 32)
        split_k = 1
        while tiles * split_k < 3 * 132 and split_k < 8 and problem.k >= 4 * split_k * 128:
            split_k *= 2
        return Semi24Config(32, 16 if n <= 16 else 32, 128, 8, split_k, 4, 3)
    if n <= 128:
        return Semi24Config(64, 128 if n > 64 else 64, 128, 8, 1, 8, 4)
    return Semi24Config(64, 256, 64, 8, 1, 8, 3)


def repair(config: Semi24Config, problem: Semi24Problem) -> Semi24Config:
    """The nearest valid config to one tuned for a neighbouring problem. Raises ``ValueError`` for
    a config the kernel no longer takes (a database entry tuned for an earlier version of it)."""
    block_m = min(config.block_m, max(16, triton.next_power_of_2(problem.m)))
    block_n = min(config.block_n, max(16, triton.next_power_of_2(problem.n)))
    block_k = min(config.block_k, max(64, triton.next_power_of_2(problem.k)))
    if config.kernel == "wgmma_sp":
        # Its tiles are tied to its warps and TMA pads any problem: only N tiles past N shrink.
        block_m, block_k = config.block_m, config.block_k
        block_n = min(config.block_n, max(semi24_wgmma_sp.BLOCK_NS[0], triton.next_power_of_2(problem.n)))
    split_k = config.split_k
    while split_k > 1 and split_k * block_k > problem.k:
        split_k //= 2
    out = Semi24Config(block_m, block_n, block_k, config.group_m, split_k, config.num_warps, config.num_stages,
                       config.kernel)
    elem = problem.dtype.itemsize
    if out.kernel != "triton" and (not GLUON_KERNELS[out.kernel].takes_shape(problem.n, problem.k)
                                   or why_excluded(out, elem, device_budget()) is not None):
        # Where a Gluon kernel cannot take the problem, the Triton kernel runs its tiles.
        out = triton_fallback(out)
    why = why_excluded(out, elem, device_budget())
    if why is not None:
        raise ValueError(f"2:4 config {out} is not in the kernel's config space: {why}")
    return out
