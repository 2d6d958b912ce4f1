"""SDDMM on tensor cores: dense (BLOCK_M x BLOCK_N) tiles of A @ B, kept only at the mask's nonzeros.

One program per run of up to ``tiles_per_program`` nonempty output tiles of one band of rows (the
tiles and their nonzeros come from ``stuning.formats.output_tiles``, built once per mask and
tiling). For each tile the program computes the whole tile of A @ B with ``tl.dot`` over K, then
picks the tile's nonzeros out of the accumulator, CHUNK at a time, and stores
``alpha * acc + beta * mask`` at their indices in the CSR values. When K fits one step (attention's
K <= 128), the band of A is loaded once per run and only B's tiles are read per tile.

fp32 tiles multiply on the fp16 tensor cores (``fp16_parts``): A and B are split per call into
fp16 parts (``kernels/fp16_split.py``; rows of A and columns of B scaled by powers of two apart) and
the tiles are one fp16 product three K blocks deep, [A_hi | A_hi | A_lo] [2^11 B_hi ; B_lo ; B_hi],
scaled back before the pick (``SCALED``). fp16's rate is twice TF32's, and the three TF32 products
of ``tf32x3`` (the exact dot elsewhere: GPUs before sm_80, and ``fp16_parts=False``) ran at a sixth of
its peak (BENCHMARKS.md 7n). The tensor cores' fp32 sums of a deep product drift (about 2^-25 lost at
every 16-deep step, biased: 2e-5 at K = 4096 in the SpMM's probe, BENCHMARKS.md 9l), so the
product's sum moves into a second accumulator every FLUSH_K of the stack (``FLUSH``).

Why tiles: the gather kernel (``sddmm.py``) reads a row of A and a column of B per nonzero, about
2 K elements of L2 traffic each, on CUDA cores. A tile reads (BLOCK_M + BLOCK_N) K elements for
BLOCK_M * BLOCK_N positions, on tensor cores, so once a tile holds more than a few dozen nonzeros
it does less traffic per nonzero, and unlike the dense product it writes only the nonzeros.

Picking: ``tl.gather`` on the accumulator flattened to (BLOCK_M * BLOCK_N,) in 8 x 8 blocks, indexed
by the nonzeros' positions in that order (``stuning.formats.tiles.tile_position``; int16 in memory:
2 bytes per nonzero). A 1-D gather whose index is not warp-local is lowered through shared memory:
the tile is written there (BLOCK_M * BLOCK_N elements of the output's dtype, fp32 for fp32, counted
in the shared-memory budget below) and each nonzero is one read, so picking costs O(tile + nonzeros)
on chip, nothing in global memory. Triton >= 3.4 takes that path for every rank-1 gather (rank >= 2
gathers could trip the warp-locality assertion of OptimizeThreadLocality on 3.6, hence the
flattening; ``tl.reshape`` keeps row-major order, unlike ``tl.ravel``). The tile is written again by
every gather (3.6 does not hoist that store out of the chunk loop), so the space has chunks large
enough to take a tile's nonzeros in one step; the cost model charges one tile store per step. The
alternative without gather, one-hot (CHUNK x BLOCK_M) @ acc then a masked sum over columns, costs
CHUNK * BLOCK_M * BLOCK_N MACs per chunk and needs an exact fp32 dot (CUDA cores) so as not to round
acc: several times the tile's own MMA work at 95% sparsity.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from stuning.kernels import fp16_split
from stuning.kernels.target import DeviceBudget, device_budget, interpreting

# fp32's fp16-parts products: the MMA's fp32 sum moves into a second accumulator every FLUSH_K of
# the (3K-deep) product (the scatter SpMM's value: errors of 3.0-3.4e-7 at K = 4096, BENCHMARKS 9l).
FLUSH_K = 256


@triton.jit(do_not_specialize=["M", "N", "K"])
def _sddmm_tiled_kernel(
    # runs of nonempty output tiles (one per program); each tile's row and column, and where its
    # entries start
    run_ptr,
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
    # fp32 as fp16 parts (SCALED): the factors of A's rows and B's columns, 2^-11 folded into alpha
    row_factor_ptr,
    col_factor_ptr,
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
    RUN: tl.constexpr,
    A_RESIDENT: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    HAS_BETA: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
    STAGE_IN_OUTPUT_DTYPE: tl.constexpr,
    SCALED: tl.constexpr,
    FLUSH: tl.constexpr,
):
    pid = tl.program_id(0)
    if RUN == 1:
        # One tile per program: the program id is the tile, one dependent load fewer before the
        # operands (what small problems, a single wave of short programs, wait on).
        first = pid
        last = pid + 1
    else:
        first = tl.load(run_ptr + pid)
        last = tl.load(run_ptr + pid + 1)
    # A run's tiles share one band of rows.
    tm = tl.load(tile_m_ptr + first)
    offs_m = tm.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    # As for B's N below: no mask along M unless M is ragged. A weight gradient's A (dY^T, a
    # transposed view) is contiguous along M, and such a mask made its loads 2-byte ones, unpipelined
    # (sm_90a SASS: LDG.E.U16 in place of 16-byte LDGSTS; BENCHMARKS.md 9c).
    m_ok = (offs_m < M) | EVEN_M
    a_rows = a_ptr + offs_m[:, None] * stride_am
    if A_RESIDENT:
        # K fits one step: the band of A is read once for the whole run, not once per tile, and the
        # next tile's B tile and first entries are loaded before this tile's product and pick, so
        # that a tile waits on no load of its own (one tile per program left every tile two
        # dependent memory latencies: its column, then its B tile and entries).
        a_band = _load_operand(a_rows, 0, stride_ak, m_ok, K, 1, BLOCK_K, EVEN_K, UPCAST)
        ids = first + tl.arange(0, RUN)
        in_run = ids < last
        cols = tl.load(tile_n_ptr + ids, mask=in_run, other=0)
        starts = tl.load(tile_ptr + ids, mask=in_run, other=0)
        ends = tl.load(tile_ptr + ids + 1, mask=in_run, other=0)
        b, dest, pos = _prefetch_tile(b_ptr, dest_ptr, local_ptr, _at(cols, 0), _at(starts, 0), first < last, N, K,
                                      stride_bk, stride_bn, BLOCK_N, BLOCK_K, CHUNK, EVEN_K, EVEN_N, UPCAST)
        for i in range(0, last - first):
            more = i + 1 < last - first
            b_next, dest_next, pos_next = _prefetch_tile(
                b_ptr, dest_ptr, local_ptr, _at(cols, i + 1), _at(starts, i + 1), more, N, K, stride_bk,
                stride_bn, BLOCK_N, BLOCK_K, CHUNK, EVEN_K, EVEN_N, UPCAST)
            acc = tl.dot(a_band, b, input_precision=PRECISION)
            if SCALED:
                acc = _scale(acc, row_factor_ptr, col_factor_ptr, offs_m, _at(cols, i), M, N, BLOCK_N)
            _pick(acc, dest, pos, _at(starts, i), _at(ends, i), local_ptr, dest_ptr, mask_val_ptr, out_ptr,
                  alpha, beta, BLOCK_M, BLOCK_N, CHUNK, HAS_BETA, STAGE_IN_OUTPUT_DTYPE)
            b, dest, pos = b_next, dest_next, pos_next
    else:
        for t in range(first, last):
            tn = tl.load(tile_n_ptr + t)
            offs_n = tn.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
            # No mask along B's contiguous axis (N) unless N is ragged: with N unspecialized, such a
            # mask turned B's loads into unpipelined 2-byte ones (sm_90a SASS; BENCHMARKS.md 7b).
            n_ok = (offs_n < N) | EVEN_N
            b_cols = b_ptr + offs_n[None, :] * stride_bn
            # Where the tile's entries start is loaded before the product: loaded after it, the pick
            # waited two memory latencies (ncu at K = 128: 9% of the stall samples on the entries).
            # The entries themselves still load after it: held through the product, their registers
            # cost 128 x 128 tiles an SM's third program (10% slower at L = 4096, BENCHMARKS.md 7j).
            start = tl.load(tile_ptr + t)
            end = tl.load(tile_ptr + t + 1)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            if FLUSH > 0:
                total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                a = _load_operand(a_rows, k0, stride_ak, m_ok, K, 1, BLOCK_K, EVEN_K, UPCAST)
                b = _load_operand(b_cols, k0, stride_bk, n_ok, K, 0, BLOCK_K, EVEN_K, UPCAST)
                # Apart so the constexpr test drops the branch at compile time; Triton's `and`
                # would not fold a constexpr with a tensor.
                if FLUSH > 0:  # noqa: SIM102
                    if (k0 > 0) & ((k0 // BLOCK_K) % FLUSH == 0):
                        total += acc
                        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                acc = tl.dot(a, b, acc, input_precision=PRECISION)
            if FLUSH > 0:
                acc += total
            if SCALED:
                acc = _scale(acc, row_factor_ptr, col_factor_ptr, offs_m, tn, M, N, BLOCK_N)
            dest, pos = _load_entries(dest_ptr, local_ptr, start, t < last, CHUNK)
            _pick(acc, dest, pos, start, end, local_ptr, dest_ptr, mask_val_ptr, out_ptr,
                  alpha, beta, BLOCK_M, BLOCK_N, CHUNK, HAS_BETA, STAGE_IN_OUTPUT_DTYPE)


@triton.jit
def _scale(acc, row_factor_ptr, col_factor_ptr, offs_m, tn, M, N, BLOCK_N: tl.constexpr):
    """The parts' product back to A @ B's scale: times A's rows' and B's columns' factors."""
    offs_n = tn.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = acc * tl.load(row_factor_ptr + offs_m, mask=offs_m < M, other=0.0)[:, None]
    return acc * tl.load(col_factor_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]


@triton.jit
def _at(v, i):
    """Element ``i`` of the small vector ``v`` (a run's tile metadata, held in registers)."""
    return tl.sum(tl.where(tl.arange(0, v.shape[0]) == i, v, 0), axis=0)


@triton.jit
def _load_entries(dest_ptr, local_ptr, start, ok, CHUNK: tl.constexpr):
    """A tile's first CHUNK entries (destinations, -1 where ``ok`` is False, and flat positions)."""
    # Entries are padded to whole chunks: these loads are in bounds.
    offs = start + tl.arange(0, CHUNK)
    ok = tl.where(ok, offs >= 0, False)  # the scalar broadcast (`&` here breaks the interpreter's masks)
    dest = tl.load(dest_ptr + offs, mask=ok, other=-1)
    pos = tl.load(local_ptr + offs, mask=ok, other=0).to(tl.int32)
    return dest, pos


@triton.jit
def _prefetch_tile(b_ptr, dest_ptr, local_ptr, tn, start, ok, N, K, stride_bk, stride_bn, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, CHUNK: tl.constexpr, EVEN_K: tl.constexpr, EVEN_N: tl.constexpr,
                   UPCAST: tl.constexpr):
    """The loads of tile column ``tn`` (nothing read where ``ok`` is False): B's one-step tile and
    the tile's first entries."""
    offs_n = tn.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = tl.where(ok, (offs_n < N) | EVEN_N, False)
    b = _load_operand(b_ptr + offs_n[None, :] * stride_bn, 0, stride_bk, n_ok, K, 0, BLOCK_K, EVEN_K, UPCAST)
    dest, pos = _load_entries(dest_ptr, local_ptr, start, ok, CHUNK)
    return b, dest, pos


@triton.jit
def _load_operand(base, k0, stride_k, other_ok, K, K_AXIS: tl.constexpr, BLOCK_K: tl.constexpr,
                  EVEN_K: tl.constexpr, UPCAST: tl.constexpr):
    """A's (rows, BLOCK_K) tile (``K_AXIS`` 1) or B's (BLOCK_K, columns) tile (``K_AXIS`` 0) at K
    offset ``k0``; ``base`` points at the tile's rows (A) or columns (B), ``other_ok`` masks them."""
    offs_k = k0 + tl.arange(0, BLOCK_K)
    if K_AXIS == 1:
        ptrs = base + offs_k[None, :].to(tl.int64) * stride_k
        ok = other_ok[:, None] if EVEN_K else other_ok[:, None] & (offs_k[None, :] < K)
    else:
        ptrs = base + offs_k[:, None].to(tl.int64) * stride_k
        ok = other_ok[None, :] if EVEN_K else other_ok[None, :] & (offs_k[:, None] < K)
    x = tl.load(ptrs, mask=ok, other=0.0)
    # The interpreter's bf16 dot is wrong: compute in fp32 there.
    return x.to(tl.float32) if UPCAST else x


@triton.jit
def _pick(acc, dest, pos, start, end, local_ptr, dest_ptr, mask_val_ptr, out_ptr, alpha, beta,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CHUNK: tl.constexpr, HAS_BETA: tl.constexpr,
          STAGE_IN_OUTPUT_DTYPE: tl.constexpr):
    """Store ``alpha * acc + beta * mask`` at the tile's nonzeros (entries ``start .. end``; the
    first chunk's ``dest`` and ``pos`` already loaded)."""
    # Flattened in 8 x 8 blocks, each block row-major (the order of ``local``), not row by row: the
    # gather writes ``flat`` to shared memory in that order, and one store of a warp's accumulator
    # registers covers 8 rows x 8 columns, so row-major put its 8 rows 4 * BLOCK_N bytes apart, on
    # the same banks (8-way conflicts; ncu: 61% of the kernel's shared store wavefronts, BENCHMARKS.md
    # 7j). The reshapes and the permute only relabel registers (sm_90a SASS: the same STS.64, now
    # 256 contiguous bytes a warp).
    blocks = tl.permute(tl.reshape(acc, (BLOCK_M // 8, 8, BLOCK_N // 8, 8)), (0, 2, 1, 3))
    flat = tl.reshape(blocks, (BLOCK_M * BLOCK_N,))
    if STAGE_IN_OUTPUT_DTYPE:
        # The tile is staged in shared memory in the output's 16-bit dtype: half the store traffic of
        # fp32 (the pipe that bounds this kernel), for one rounding more where alpha != 1 or beta != 0.
        flat = flat.to(out_ptr.dtype.element_ty)
    for c0 in range(start, end, CHUNK):
        if c0 > start:
            dest, pos = _load_entries(dest_ptr, local_ptr, c0, c0 < end, CHUNK)
        ok = dest >= 0
        result = alpha * tl.gather(flat, pos, 0).to(tl.float32)
        if HAS_BETA:
            result += beta * tl.load(mask_val_ptr + dest, mask=ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + dest, result.to(out_ptr.dtype.element_ty), mask=ok)


# The first compute capability with TF32's generation of tensor cores (Ampere): from it fp32 tiles
# multiply as fp16 parts (or tf32x3), before it as Triton's exact dot. The cost model reads it too.
PARTS_MIN_CAPABILITY = (8, 0)


def fp16_parts(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether fp32 tiles multiply as fp16 parts (module docstring): on GPUs with TF32's generation of
    tensor cores (sm_80 and up; older ones keep the exact dot, as the cost model assumes), and in the
    interpreter, which computes the parts' product in fp32 (so the CPU tests run the split path)."""
    if dtype != torch.float32:
        return False
    return device.type != "cuda" or device_budget(device.index).compute_capability >= PARTS_MIN_CAPABILITY


def _precision(dtype: torch.dtype, upcast: bool, device: torch.device) -> str:
    """The tensor-core precision of fp32 tile products where they are not fp16 parts. fp16/bf16 use
    their own. fp32 inputs use three TF32 products (``tf32x3``: each operand split into a TF32 high
    part and the rest), which stays within fp32's tolerance where one TF32 product would not (~1e-6
    against ~1e-3 relative), on tensor cores: Triton's exact ``ieee`` dot runs on CUDA cores at a
    tenth of their FMA peak (BENCHMARKS.md 7d). GPUs before sm_80 have no TF32, and the interpreter
    computes in fp32 anyway."""
    if dtype != torch.float32 and not upcast:
        return "tf32"  # ignored for 16-bit inputs
    if upcast or device.type != "cuda" or device_budget(device.index).compute_capability < PARTS_MIN_CAPABILITY:
        return "ieee"
    return "tf32x3"


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
    tiles_per_program: int = 1,
    out: torch.Tensor | None = None,
    parts: bool | None = None,
) -> torch.Tensor:
    """Launch the tiled kernel on a mask's ``OutputTiles`` (its block_m, block_n and chunk are the
    kernel's), each program taking up to ``tiles_per_program`` consecutive tiles of one band of
    rows; A, B, the values and ``out`` are validated by the caller (``sddmm.sddmm``). ``parts``:
    fp32 as fp16 parts (None: where ``fp16_parts`` says; False: ``tf32x3``, to compare the two)."""
    if not (tiles.local.device == tiles.dest.device == a.device):
        raise ValueError(f"sddmm_tiled: the mask's tiles are on {tiles.dest.device}, A on {a.device}")
    if tiles.tile_ptr.numel() != tiles.count + 1 or tiles.local.numel() != tiles.entries:
        raise ValueError("sddmm_tiled: inconsistent tile metadata (tile_ptr, local and dest must match)")
    if tiles.entries % tiles.chunk:
        raise ValueError(f"sddmm_tiled: {tiles.entries} entries are not padded to chunks of {tiles.chunk}")
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = torch.empty(mask_values.numel(), dtype=a.dtype, device=a.device)
    if tiles.count == 0:
        return out
    if tiles_per_program < 1 or tiles_per_program & (tiles_per_program - 1):
        raise ValueError(f"sddmm_tiled: tiles_per_program must be a power of two, got {tiles_per_program}")
    upcast = interpreting()
    run_ptr = tiles.runs(tiles_per_program)
    scaled = fp16_parts(a.dtype, a.device) if parts is None else bool(parts) and a.dtype == torch.float32
    row_factor = col_factor = out
    if scaled:
        # A^T's columns are A's rows: its left-hand stack, transposed back, is A's image (M x 3K).
        a_stack, row_factor = fp16_split.split_x(a.t(), lhs=True)
        b, col_factor = fp16_split.split_x(b)
        a, k = a_stack.t(), fp16_split.PARTS * k
        alpha = alpha / fp16_split.LO_SCALE
    _sddmm_tiled_kernel[(run_ptr.numel() - 1,)](
        run_ptr,
        tiles.tile_m,
        tiles.tile_n,
        tiles.tile_ptr,
        tiles.local,
        tiles.dest,
        mask_values,
        a,
        b,
        out,
        row_factor,
        col_factor,
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
        RUN=tiles_per_program,
        A_RESIDENT=block_k >= k,
        EVEN_K=k % block_k == 0,
        EVEN_M=m % tiles.block_m == 0,
        EVEN_N=n % tiles.block_n == 0,
        HAS_BETA=beta != 0,
        UPCAST=upcast,
        PRECISION=_precision(a.dtype, upcast, a.device),
        # The interpreter's bf16 arithmetic is wrong: bf16 stages in fp32 there, as fp32 inputs do.
        STAGE_IN_OUTPUT_DTYPE=out.dtype == torch.float16 or (out.dtype == torch.bfloat16 and not upcast),
        SCALED=scaled,
        FLUSH=FLUSH_K // block_k if scaled and k > FLUSH_K else 0,
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
    tiles_per_program: int = 1  # consecutive tiles of a band of rows one program takes (A read once)


# Every tl.dot dimension stays >= 16 (the GPU needs it; the interpreter would accept less); tiles
# are multiples of 32 so the tuner's occupancy features (32 x 32 cells, pooled) cover every size.
BLOCK_MS = (32, 64, 128)
BLOCK_NS = (32, 64, 128)
_BLOCK_KS = (16, 32, 64, 128)
# Nonzeros per pick step: from a few per tile (98% sparse, small tiles) to all of a 64 x 64 tile at
# 50%, so that most tiles are picked in one step whatever the density. Steps of two, not four: a
# tile's entries are padded to whole chunks, and the chunks of 256 and 1024 added in 7j were the
# fastest at 98% and 90% (4096 x 4096, K = 64).
_CHUNKS = (32, 64, 128, 256, 512, 1024, 2048)
_WARPS = (4, 8)
_STAGES = (2, 3)
# Runs of tiles per program, when K fits one step (A's band then stays in registers for the run).
# One tile per program re-reads A's band from L2 for every tile: (BLOCK_M + BLOCK_N) x K elements
# per tile, 100 MB at 4096 x 4096, K = 128 with 128 x 64 tiles, which bounded the kernel at 95%.
# 16 tiles a run lost to 4 in every probed problem (BENCHMARKS.md 7h), and a run must leave at
# least one program per SM: the cost model, charging runs only their saved L2 reads, picked runs of
# 16 that left 32 programs on 132 SMs and ran 3-10x slower than one tile per program.
_TILES_PER_PROGRAM = (1, 4)
_MAX_ACC_PER_THREAD = 128  # fp32 accumulator registers a thread holds before it spills


def _runs_pay(m: int, n: int, k: int, bm: int, bn: int, bk: int, run: int, budget: DeviceBudget) -> bool:
    """Whether runs of ``run`` tiles can save anything: K must fit one step (else A's band is re-read
    every step anyway), and the runs must give every SM a program even with every tile nonempty."""
    return bk >= k and triton.cdiv(m, bm) * triton.cdiv(n, bn) >= run * budget.sm_count


def _warps_fit_rows(block_m: int, num_warps: int, elem_size: int) -> bool:
    """fp32 tiles (three TF32 products each) with 8 rows a warp (64 rows, 8 warps) ran about 2x
    slower than with 4 warps or 128 rows on the H200, in every problem timed (BENCHMARKS.md 7n)."""
    return elem_size != 4 or block_m // num_warps >= 16


def shared_memory_bytes(p: TiledParams, elem_size: int) -> int:
    """Pipelined A and B tiles, once per stage, plus the tile the gather reads from (staged in the
    output's dtype, the inputs')."""
    return p.num_stages * (p.block_m + p.block_n) * p.block_k * elem_size + p.block_m * p.block_n * elem_size


def registers_per_thread(p: TiledParams) -> int:
    """The accumulator (live through the pick loop), the operand tiles, and a chunk's index, value
    and destination."""
    threads = 32 * p.num_warps
    operands = (p.block_m + p.block_n) * p.block_k // (2 * threads)
    return 32 + p.block_m * p.block_n // threads + operands + 4 * max(1, p.chunk // threads)


def config_space(m: int, n: int, k: int, dtype: torch.dtype, budget: DeviceBudget | None = None) -> list[TiledParams]:
    budget = budget or device_budget()
    elem = dtype.itemsize
    m_cap = max(BLOCK_MS[0], triton.next_power_of_2(max(1, m)))
    n_cap = max(BLOCK_NS[0], triton.next_power_of_2(max(1, n)))
    k_cap = max(_BLOCK_KS[0], triton.next_power_of_2(max(1, k)))
    out = []
    for bm, bn, bk, chunk, warps, stages, run in itertools.product(
        BLOCK_MS, BLOCK_NS, _BLOCK_KS, _CHUNKS, _WARPS, _STAGES, _TILES_PER_PROGRAM
    ):
        if bm > m_cap or bn > n_cap or bk > k_cap:
            continue
        if bk < 32 <= k:
            continue  # 16-deep steps leave the tensor cores waiting on loads when K allows deeper ones
        if stages > 2 and bk >= k:
            continue  # a single K step: nothing to pipeline
        if run > 1 and not _runs_pay(m, n, k, bm, bn, bk, run, budget):
            continue
        threads = 32 * warps
        if bm * bn // threads > _MAX_ACC_PER_THREAD or bm * bn < 8 * threads:
            continue  # spills, or too little MMA work for the warps
        if not _warps_fit_rows(bm, warps, elem):
            continue
        if chunk > bm * bn // 2:
            continue  # a tile that full is cheaper as two steps than as one mostly padded
        if chunk < bm * bn // 64:
            continue  # under 1.6% of a tile per step: a smaller tile serves masks that sparse better
        p = TiledParams(bm, bn, bk, chunk, warps, stages, run)
        if registers_per_thread(p) > 255 or shared_memory_bytes(p, elem) > budget.shared_mem_per_block:
            continue
        out.append(p)
    return out


def heuristic(m: int, n: int, k: int) -> TiledParams:
    """64 x 64 tiles, K covered in as few steps as fit, 64 nonzeros per pick."""
    bk = min(64, max(16, triton.next_power_of_2(max(1, k))))
    return TiledParams(64, 64, bk, 64, 4, 2)


def repair(p: TiledParams, m: int, n: int, k: int, elem_size: int = 2) -> TiledParams:
    """The nearest valid tiling to one tuned for a neighbouring problem (``elem_size``: its dtype's)."""
    bm = min(p.block_m, max(BLOCK_MS[0], triton.next_power_of_2(max(1, m))))
    bn = min(p.block_n, max(BLOCK_NS[0], triton.next_power_of_2(max(1, n))))
    bk = min(p.block_k, max(_BLOCK_KS[0], triton.next_power_of_2(max(1, k))))
    warps = p.num_warps if bm * bn >= 8 * 32 * p.num_warps and _warps_fit_rows(bm, p.num_warps, elem_size) else 4
    stages = p.num_stages if bk < k else min(p.num_stages, 2)
    chunk = min(p.chunk, max(_CHUNKS[0], bm * bn // 2))
    run = p.tiles_per_program if _runs_pay(m, n, k, bm, bn, bk, p.tiles_per_program, device_budget()) else 1
    return TiledParams(bm, bn, bk, chunk, warps, stages, run)
