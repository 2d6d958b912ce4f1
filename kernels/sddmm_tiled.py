"""SDDMM on tensor cores: dense (BLOCK_M x BLOCK_N) tiles of A @ B, kept only at the mask's nonzeros.

One program per nonempty output tile of the mask (the tiles and their nonzeros come from
``stuning.formats.output_tiles``, built once per mask and tiling). The program computes its whole
tile of A @ B with ``tl.dot`` over K, then picks the tile's nonzeros out of the accumulator, CHUNK
at a time, and stores ``alpha * acc + beta * mask`` at their indices in the CSR values.

Why tiles: the gather kernel (``sddmm.py``) reads a row of A and a column of B per nonzero, about
2 K elements of L2 traffic each, on CUDA cores. A tile reads (BLOCK_M + BLOCK_N) K elements for
BLOCK_M * BLOCK_N positions, on tensor cores, so once a tile holds more than a few dozen nonzeros
it does less traffic per nonzero, and unlike the dense product it writes only the nonzeros.

Picking: ``tl.gather`` on the accumulator flattened to (BLOCK_M * BLOCK_N,), indexed by the
nonzeros' flat positions ``r * BLOCK_N + c`` (int16 in memory: 2 bytes per nonzero). A 1-D gather
whose index is not warp-local is lowered through shared memory: the tile is written there
(BLOCK_M * BLOCK_N * 4 bytes, counted in the shared-memory budget below) and each nonzero is one
read, so picking costs O(tile + nonzeros) on chip, nothing in global memory. Triton >= 3.4 takes
that path for every rank-1 gather (rank >= 2 gathers could trip the warp-locality assertion of
OptimizeThreadLocality on 3.6, hence the flattening; ``tl.reshape`` keeps row-major order, unlike
``tl.ravel``). The tile is written again by every gather (3.6 does not hoist that store out of
the chunk loop), so the space has chunks large enough to take a tile's nonzeros in one step; the
cost model charges one tile store per step. The alternative without gather, one-hot
(CHUNK x BLOCK_M) @ acc then a masked sum over columns, costs CHUNK * BLOCK_M * BLOCK_N MACs per
chunk and needs an exact fp32 dot (CUDA cores) so as not to round acc: several times the tile's
own MMA work at 95% sparsity.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from stuning.kernels.target import DeviceBudget, device_budget, interpreting


@triton.jit(do_not_specialize=["M", "N", "K"])
def _sddmm_tiled_kernel(
    # the nonempty output tiles: tile row and column, and where each tile's entries start
    tile_m_ptr,
    tile_n_ptr,
    tile_ptr,
    # per entry (padded per tile to CHUNK): flat position in the tile, index in the CSR values (-1: padding)
    local_ptr,
    dest_ptr,
    # the mask's values (read only when HAS_BETA), dense A (M x K), B (K x N), the output values (nnz)
    mask_val_ptr,
    a_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    alpha,
    beta,
    # template parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    CHUNK: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    HAS_BETA: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    tm = tl.load(tile_m_ptr + pid)
    tn = tl.load(tile_n_ptr + pid)
    offs_m = tm.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tn.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N
    a_rows = a_ptr + offs_m[:, None] * stride_am
    b_cols = b_ptr + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        # No mask along B's contiguous axis (N) unless N is ragged: with N unspecialized, such a mask
        # turned B's loads into unpipelined 2-byte ones (sm_90a SASS; BENCHMARKS.md, section 7b).
        if EVEN_K:
            a_ok = m_ok[:, None]
            b_ok = n_ok[None, :] | EVEN_N
        else:
            a_ok = m_ok[:, None] & (offs_k[None, :] < K)
            b_ok = (offs_k[:, None] < K) & (n_ok[None, :] | EVEN_N)
        a = tl.load(a_rows + offs_k[None, :].to(tl.int64) * stride_ak, mask=a_ok, other=0.0)
        b = tl.load(b_cols + offs_k[:, None].to(tl.int64) * stride_bk, mask=b_ok, other=0.0)
        if UPCAST:
            # The interpreter's bf16 dot is wrong: compute in fp32 there.
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)

    flat = tl.reshape(acc, (BLOCK_M * BLOCK_N,))
    start = tl.load(tile_ptr + pid)
    end = tl.load(tile_ptr + pid + 1)
    for c0 in range(start, end, CHUNK):
        # Entries are padded to whole chunks: these loads are always in bounds.
        offs = c0 + tl.arange(0, CHUNK)
        dest = tl.load(dest_ptr + offs)
        pos = tl.load(local_ptr + offs).to(tl.int32)
        ok = dest >= 0
        result = alpha * tl.gather(flat, pos, 0)
        if HAS_BETA:
            result += beta * tl.load(mask_val_ptr + dest, mask=ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + dest, result.to(out_ptr.dtype.element_ty), mask=ok)


def sddmm_tiled(
    tiles,
    mask_values: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    alpha: float,
    beta: float,
    block_k: int,
    num_warps: int,
    num_stages: int,
) -> torch.Tensor:
    """Launch the tiled kernel on a mask's ``OutputTiles`` (its block_m, block_n and chunk are the
    kernel's); A, B and the values are validated by the caller (``sddmm.sddmm``)."""
    if not (tiles.local.device == tiles.dest.device == a.device):
        raise ValueError(f"sddmm_tiled: the mask's tiles are on {tiles.dest.device}, A on {a.device}")
    if tiles.tile_ptr.numel() != tiles.count + 1 or tiles.local.numel() != tiles.entries:
        raise ValueError("sddmm_tiled: inconsistent tile metadata (tile_ptr, local and dest must match)")
    if tiles.entries % tiles.chunk:
        raise ValueError(f"sddmm_tiled: {tiles.entries} entries are not padded to chunks of {tiles.chunk}")
    m, k = a.shape
    n = b.shape[1]
    out = torch.empty(mask_values.numel(), dtype=a.dtype, device=a.device)
    if tiles.count == 0:
        return out
    upcast = interpreting()
    _sddmm_tiled_kernel[(tiles.count,)](
        tiles.tile_m,
        tiles.tile_n,
        tiles.tile_ptr,
        tiles.local,
        tiles.dest,
        mask_values,
        a,
        b,
        out,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        float(alpha),
        float(beta),
        BLOCK_M=tiles.block_m,
        BLOCK_N=tiles.block_n,
        BLOCK_K=block_k,
        CHUNK=tiles.chunk,
        EVEN_K=k % block_k == 0,
        EVEN_N=n % tiles.block_n == 0,
        HAS_BETA=beta != 0,
        UPCAST=upcast,
        # fp32 inputs: exact fp32 products (tf32 would miss the fp32 tolerance); fp16/bf16: tensor cores.
        PRECISION="ieee" if upcast or a.dtype == torch.float32 else "tf32",
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return out


# ------------------------------------------------------------------------------ config space
class TiledParams(NamedTuple):
    block_m: int
    block_n: int
    block_k: int
    chunk: int
    num_warps: int
    num_stages: int


# Every tl.dot dimension stays >= 16 (the GPU needs it; the interpreter would accept less); tiles
# are multiples of 32 so the tuner's occupancy features (32 x 32 cells, pooled) cover every size.
BLOCK_MS = (32, 64, 128)
BLOCK_NS = (32, 64, 128)
_BLOCK_KS = (16, 32, 64, 128)
# Nonzeros per pick step: from a few per tile (98% sparse, small tiles) to all of a 64 x 64 tile at
# 50%, so that most tiles are picked in one step whatever the density.
_CHUNKS = (32, 128, 512, 2048)
_WARPS = (4, 8)
_STAGES = (2, 3)
_MAX_ACC_PER_THREAD = 128  # fp32 accumulator registers a thread holds before it spills


def shared_memory_bytes(p: TiledParams, elem_size: int) -> int:
    """Pipelined A and B tiles, once per stage, plus the fp32 tile the gather reads from."""
    return p.num_stages * (p.block_m + p.block_n) * p.block_k * elem_size + p.block_m * p.block_n * 4


def registers_per_thread(p: TiledParams) -> int:
    """The accumulator (live through the pick loop), the operand tiles, and a chunk's index, value
    and destination."""
    threads = 32 * p.num_warps
    operands = (p.block_m + p.block_n) * p.block_k // (2 * threads)
    return 32 + p.block_m * p.block_n // threads + operands + 4 * max(1, p.chunk // threads)


def config_space(m: int, n: int, k: int, dtype: torch.dtype, budget: DeviceBudget | None = None) -> list[TiledParams]:
    budget = budget or device_budget()
    elem = torch.tensor([], dtype=dtype).element_size()
    m_cap = max(BLOCK_MS[0], triton.next_power_of_2(max(1, m)))
    n_cap = max(BLOCK_NS[0], triton.next_power_of_2(max(1, n)))
    k_cap = max(_BLOCK_KS[0], triton.next_power_of_2(max(1, k)))
    out = []
    for bm, bn, bk, chunk, warps, stages in itertools.product(
        BLOCK_MS, BLOCK_NS, _BLOCK_KS, _CHUNKS, _WARPS, _STAGES
    ):
        if bm > m_cap or bn > n_cap or bk > k_cap:
            continue
        if bk < 32 <= k:
            continue  # 16-deep steps leave the tensor cores waiting on loads when K allows deeper ones
        if stages > 2 and bk >= k:
            continue  # a single K step: nothing to pipeline
        threads = 32 * warps
        if bm * bn // threads > _MAX_ACC_PER_THREAD or bm * bn < 8 * threads:
            continue  # spills, or too little MMA work for the warps
        if chunk > bm * bn // 2:
            continue  # a tile that full is cheaper as two steps than as one mostly padded
        p = TiledParams(bm, bn, bk, chunk, warps, stages)
        if registers_per_thread(p) > 255 or shared_memory_bytes(p, elem) > budget.shared_mem_per_block:
            continue
        out.append(p)
    return out


def heuristic(m: int, n: int, k: int) -> TiledParams:
    """64 x 64 tiles, K covered in as few steps as fit, 64 nonzeros per pick."""
    bk = min(64, max(16, triton.next_power_of_2(max(1, k))))
    return TiledParams(64, 64, bk, 64, 4, 2)


def repair(p: TiledParams, m: int, n: int, k: int) -> TiledParams:
    """The nearest valid tiling to one tuned for a neighbouring problem."""
    bm = min(p.block_m, max(BLOCK_MS[0], triton.next_power_of_2(max(1, m))))
    bn = min(p.block_n, max(BLOCK_NS[0], triton.next_power_of_2(max(1, n))))
    bk = min(p.block_k, max(_BLOCK_KS[0], triton.next_power_of_2(max(1, k))))
    warps = p.num_warps if bm * bn >= 8 * 32 * p.num_warps else 4
    stages = p.num_stages if bk < k else min(p.num_stages, 2)
    chunk = min(p.chunk, max(_CHUNKS[0], bm * bn // 2))
    return TiledParams(bm, bn, bk, chunk, warps, stages)
