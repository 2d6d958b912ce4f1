"""SpMM on Hopper's tensor cores: A's tiles scattered into shared memory, multiplied densely with X.

The gather kernels (``spmm.py``, ``spmm_sell.py``) fetch a row of X for every nonzero; from N = 64
up that traffic and its latency bound them far below the dense product (BENCHMARKS.md 7l-7q). Here
each (BLOCK_M x BLOCK_K) tile of A is rebuilt densely in shared memory, one 2-byte store per nonzero,
and one warpgroup MMA multiplies it with X's (BLOCK_K x BLOCK_N) tile, which TMA brings in STAGES
deep: "load as sparse, compute as dense". The tensor cores do the dense tile's work whatever the
sparsity, so this kernel wins where the gather kernels are slowest (N >= 64, 90-95% zeros) and
loses where they are fastest (N = 16, 95% zeros and up); the tuner chooses per problem.

Neither Triton nor Gluon 3.6 can store to a computed address in shared memory, so the scatter is one
line of inline PTX (``st.shared.b16``) at an offset from ``global_smem``, the symbol of the kernel's
dynamic shared memory. That offset is where Triton places the A tiles: it puts the larger of the two
buffers (A's slots, X's stages) first and the other right after, so the launcher passes
``A_OFFSET`` accordingly, never sizes the two alike, and checks after compiling that the kernel uses
no other shared memory. Entries come from ``stuning.formats.scatter`` with their byte offsets in the
tile's swizzled image precomputed.

Per step i of a program (one band of BLOCK_M rows, K tiles pid_k, pid_k + SPLIT_K, ...):

    copy step i + RING - 1's entries into the ring (cp.async; tile bounds read a step before)
    wait for step i's copy; scatter its entries into A slot i % SLOTS
    wait for X's stage, fence, meet at a barrier
    issue the MMA of slot i % SLOTS with X's stage; wait for step i - 1's MMA
    clear slot (i - 1) % SLOTS, meet at a barrier; start X's load for a later step

Entries come cold from DRAM; loaded into registers ahead of use they were waited for where the loop
handed them on, so they go through a ring in shared memory (one more A slot's bytes) that each
thread fills and reads for itself. One warpgroup clears a used slot by storing zeros where its
entries went; with two, each zeroes the rows its own MMA read (a warpgroup's wait covers only its
MMA), and X's stage of step i - 1 is known free to every warpgroup only a step later (``LAG``).

Two or four K splits run as one cluster of CTAs whose sums meet in shared memory
(``split_k_cluster``, ``cluster_ctas``); eight meet through L2 (``_finish_tile``).

fp32 runs on the fp16 tensor cores as three fp16 products (``fp16_split``): A's tiles are those of
its fp16 parts (3K deep), X is split into its parts per call, and the epilogue scales the sum back by
the rows' and columns' factors. The tensor cores' fp32 sums lose about 2^-25 of their value at each
16-deep MMA step, which, over 3 x 4096, left errors of 2e-5 (BENCHMARKS.md 9l); so fp32 adds the
MMA's sum into a second accumulator every FLUSH_K of K, and splits run without clusters (their
stores are 16-bit).

Gluon has no interpreter: this kernel runs on sm_90 GPUs only; elsewhere the CSR kernel runs.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import replace

import torch
import triton
from stuning.kernels.fp16_split import PARTS, split_x
from stuning.kernels.semi24_hopper import GLUON_TRITON, nvmma_layout
from stuning.kernels.split_k import split_k_workspace
from stuning.kernels.split_k_cluster import landing_fits, replicated, replicated_layout
from stuning.kernels.spmm import SpMMConfig, check_b_and_out, check_bias, fill_bias
from stuning.kernels.target import DeviceBudget, device_budget, interpreting, is_sm90

try:  # Gluon's Hopper API as of Triton 3.6; older Tritons have no Gluon
    # The same epilogue: Y of any strides, plus bias, or split-K's sum.
    from stuning.kernels.semi24_hopper import _finish_tile, _store_y
    from stuning.kernels.split_k_cluster import (
        cluster_rank,
        exchange_parts,
        exchange_ready,
        landing_barrier,
    )
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:  # pragma: no cover - depends on the installed Triton
    gluon = None

DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # fp32 as fp16 parts (module docstring)
# fp32's MMA sums are added into fp32 registers every FLUSH_K of the (3K-deep) product.
FLUSH_K = 256
BLOCK_MS = (64, 128)  # a warpgroup (4 warps) per 64 rows
BLOCK_KS = (64, 128)
SPLIT_KS = (1, 2, 4, 8)
# With more than one warpgroup X's stages lag two steps (module docstring): two would not prefetch.
STAGES = {64: (2, 3, 4), 128: (3, 4, 6)}
# A's slots: the MMA reads one while the next is stored; a barrier after each step's clearing keeps
# the next step's stores off the slot being cleared. With the entries' ring, the shared memory of
# the three slots before the ring (BENCHMARKS.md 7z: a slot more cost two programs an SM their room).
SLOTS = 2
# Entries come through a ring in one more A slot: RING tiles' first CHUNK entries, copied RING - 1
# steps ahead; four where they fit in the slot, else two (``ring_stages``).
RING_STAGES = (4, 2)
# One warpgroup clears a used A slot where its entries were stored, not whole (``_clear_slot``);
# False only to measure the difference.
CLEAR_BY_ENTRIES = True
# On the H200 (4096 x 4096 fp16, BENCHMARKS.md 7r) the best scatter config ran 1.5-1.7x cuBLAS at
# N = 16, 1.0x at N = 64, 0.7x at N = 128 and 0.74-0.82x at N = 2048, against the gather kernels'
# 1.2-1.9x, 0.4-0.8x, 0.26-0.47x and 0.14-0.52x.
MIN_N = 16
# Two splits of a tile meet in slices of their own (``split_k.store_split``), more by atomic adds into
# one zeroed buffer (``add_split``). On the H200 at N = 128 (BENCHMARKS.md 7y) slices took 4096 x 4096
# on two splits from 19.2 to 17.4 us, ran four splits as fast as the adds, and eight 1.4-2.1x slower:
# the last split then reads seven slices alone, where the adds spread the sum over every split.
# The last split always sums, after waiting for the other's slice (``store_split``'s ORDERED): it
# stores no slice of its own, and took 4096 x 4096 at N = 128 from 15.8 to 15.2 us (BENCHMARKS.md 8a).
SLICES_MAX_SPLIT = 2
# Two or four splits run as one cluster of CTAs instead, their sums meeting in shared memory
# (``split_k_cluster``). On the H200 at N = 128, a dense analog of this kernel's step on two splits
# ran 12.2 us with the slices and 10.2 with the cluster (4096 x 4096; ax alone 9.5; BENCHMARKS.md 8u).
# False only to measure the difference.
CLUSTER_SPLIT = True
CLUSTER_SPLITS = (2, 4)  # eight would leave a part half a warp's rows at BLOCK_M = 64
# Four splits only from this N tile up. A cluster's CTAs start together and wait for the slowest at
# its barrier, where the atomic adds let each split finish alone; the adds' bytes grow with the tile.
# On the H200 (BENCHMARKS.md 8v), 768 x 3072 at N = 128 on 64-wide tiles ran 8.4 us with the adds and
# 6.4 in a cluster of four; at N = 16 (16-wide tiles) the cluster ran 2-10% slower than the adds.
CLUSTER4_MIN_BLOCK_N = 64
# And only where the clusters take no more waves than the CTAs alone. A cluster's four CTAs must find
# room in one GPC at once, and a GPC's SMs past a multiple of four stay idle: on the H200 (132 SMs,
# BENCHMARKS.md 8w) 28 clusters of four ran in one wave and 32 did not. 4096 x 4096 at N = 128 on
# 128 x 128 tiles (32 clusters, 128 CTAs) ran 1.1-1.25x slower as clusters, and 3072 x 4096 on 64 x 128
# tiles (48 clusters, two waves either way) 1.33x faster at 95% zeros.
CLUSTER4_SM_SHARE = 0.85
# ... and while the slices stay under this many bytes (they are split x M x N fp32).
SLICES_MAX_BYTES = 64 << 20


def available() -> bool:
    """Whether this Triton runs the kernel: a release with Gluon's Hopper API as used here."""
    return gluon is not None and triton.__version__.startswith(GLUON_TRITON)


def x_transposed(x: torch.Tensor) -> bool:
    """Whether X (K x N) is read as X^T: K contiguous (SparseLinear's input), not N."""
    return x.stride(0) == 1 and x.stride(1) != 1


def takes(x: torch.Tensor) -> bool:
    """Whether the kernel runs this X: on an sm_90 GPU (not the interpreter), fp32 of any strides (its
    split is what TMA reads), or 16-bit with one dimension contiguous and the other's stride and the
    start 16-byte aligned (TMA's rules). Otherwise the CSR kernel runs the product."""
    if not (available() and not interpreting() and x.dtype in DTYPES and is_sm90(x.device)):
        return False
    if x.dtype == torch.float32:
        return x.dim() == 2
    if x.data_ptr() % 16:
        return False
    rows, cols = x.stride()
    inner, outer = (rows, cols) if rows == 1 and cols != 1 else (cols, rows)  # as x_transposed reads it
    return inner == 1 and (outer * x.element_size()) % 16 == 0


def y_pairs(out: torch.Tensor) -> bool:
    """Whether Y's columns come in pairs of one 4-byte-aligned word (contiguous, N and its rows' stride
    even): the cluster's epilogue then stores 32 bits at a time, and nothing past a row's end."""
    return out.stride(1) == 1 and out.shape[1] % 2 == 0 and out.stride(0) % 2 == 0 and out.data_ptr() % 4 == 0


def cluster_ctas(split: int, block_m: int, block_k: int, block_n: int, stages: int, tiles: int, sm_count: int) -> int:
    """The CTAs of the cluster a tile's ``split`` K splits run as (1: none, they meet through L2):
    two; or four on tiles at least CLUSTER4_MIN_BLOCK_N wide where their clusters take no more waves
    than the ``tiles`` x 4 CTAs alone (one CTA an SM, as four splits' stages leave); and only where
    X's stages take the other ranks' parts (``split_k_cluster.landing_fits``)."""
    if not (CLUSTER_SPLIT and split in CLUSTER_SPLITS):
        return 1
    if split == 4:
        alone_waves = math.ceil(4 * tiles / sm_count)
        if block_n < CLUSTER4_MIN_BLOCK_N or cluster4_waves(tiles, sm_count) > alone_waves:
            return 1
    return split if landing_fits(block_m, block_n, buffer_bytes(block_m, block_k, block_n, stages)[2], split) else 1


def cluster4_waves(tiles: int, sm_count: int) -> int:
    """Waves of ``tiles`` clusters of four CTAs, one CTA an SM: CLUSTER4_SM_SHARE of the SMs hold them."""
    return math.ceil(tiles / max(1, int(CLUSTER4_SM_SHARE * sm_count) // 4))


@functools.lru_cache(maxsize=256)  # asked at every launch, whose host time is the cost (probe_host_time.py)
def ring_stages(block_m: int, block_k: int, chunk: int) -> int:
    """Stages of the entries' ring: the most of ``RING_STAGES`` that fit in one A slot."""
    return next(r for r in RING_STAGES if r * chunk * 4 <= block_m * block_k * 2)


def buffer_bytes(block_m: int, block_k: int, block_n: int, stages: int) -> tuple[int, int, int]:
    """(A slots, A bytes, X bytes) of a config's shared memory. A's buffer holds the slots the MMA
    reads, one more where two buffers would be the same size (Triton's order between them would then
    be unknown), then the entries' ring (one slot's bytes)."""
    a_bytes, x_bytes = (SLOTS + 1) * block_m * block_k * 2, stages * block_k * block_n * 2
    slots = SLOTS + (a_bytes == x_bytes)
    return slots, (slots + 1) * block_m * block_k * 2, x_bytes


def block_ns(n: int) -> tuple[int, ...]:
    """X's tile widths at N: N rounded up to a power of two, at most 256; and half that from 128 up.
    Half-width tiles scatter each band of A once an N tile, but where bands are few they fill the
    GPU without splitting K: at N = 128, 95% zeros on the H200, 3072 x 768 ran 5.3 us on 64-wide
    tiles against 6.1 us on 128-wide ones with two splits (4096 x 4096: 14.0 against 13.7;
    BENCHMARKS.md 8n)."""
    widest = min(256, max(MIN_N, triton.next_power_of_2(n)))
    return (widest, widest // 2) if widest >= 128 else (widest,)


def why_excluded(config, problem, budget: DeviceBudget) -> str | None:
    """Why a scatter config is outside the problem's space on this device (None: it is in)."""
    if tuple(budget.compute_capability) != (9, 0) or not available():
        return f"the scatter kernel needs an sm_90 GPU and Triton {' or '.join(GLUON_TRITON)}x (its Gluon API)"
    if problem.dtype not in DTYPES:
        return "the scatter kernel takes fp32, fp16 and bf16"
    if problem.n < MIN_N:
        return f"the scatter kernel starts at N = {MIN_N}"
    bm, bk, bn = config.rows, config.nnz_step, config.block_n
    if bm not in BLOCK_MS or bk not in BLOCK_KS or config.num_stages not in STAGES[bm]:
        return f"the scatter kernel takes rows in {BLOCK_MS}, nnz_step in {BLOCK_KS}, num_stages in {STAGES}"
    if config.num_warps != 4 * bm // 64 or config.split_k not in SPLIT_KS:
        return "the scatter kernel runs a warpgroup per 64 rows and split_k in (1, 2, 4, 8)"
    if bn not in block_ns(problem.n):
        return f"the scatter kernel's N tile at N = {problem.n} is one of {block_ns(problem.n)}"
    if config.split_k > 1 and config.split_k * bk > tile_k(problem.k, problem.dtype):
        return "more K splits than K tiles"
    _, a_bytes, x_bytes = buffer_bytes(bm, bk, bn, config.num_stages)
    if a_bytes + x_bytes + 1024 > budget.shared_mem_per_block:
        return "A's slots and X's stages do not fit in shared memory"
    return None


def config_space(problem, budget: DeviceBudget | None = None) -> list:
    """Every scatter config for the problem on the device (none off sm_90 or below N = 16)."""
    budget = budget or device_budget()
    out = []
    for bm, bk, bn, split in itertools.product(BLOCK_MS, BLOCK_KS, block_ns(max(problem.n, 1)), SPLIT_KS):
        for stages in STAGES[bm]:
            cfg = SpMMConfig(bm, bk, bn, 1, False, 4 * bm // 64, stages, "scatter", split_k=split)
            if why_excluded(cfg, problem, budget) is None:
                out.append(cfg)
    return out


def repair(config, problem):
    """A scatter config tuned for a neighbouring problem, fitted to this one: its N tile one of
    ``block_ns(N)``, no more K splits than K tiles, and (fewer stages, a narrower N tile) shared
    memory the device has."""
    budget = device_budget()
    split = config.split_k
    while split > 1 and split * config.nnz_step > tile_k(problem.k, problem.dtype):
        split //= 2
    widths = block_ns(problem.n)
    widths = ((config.block_n,) if config.block_n in widths else ()) + widths
    stages = (config.num_stages,) + tuple(s for s in STAGES.get(config.rows, ()) if s < config.num_stages)
    fitted = replace(config, block_n=widths[0], split_k=split)
    for bn, st in itertools.product(widths, stages):
        _, a_bytes, x_bytes = buffer_bytes(config.rows, config.nnz_step, bn, st)
        if a_bytes + x_bytes + 1024 <= budget.shared_mem_per_block:
            return replace(fitted, block_n=bn, num_stages=st)
    return fitted


def tile_k(k: int, dtype: torch.dtype) -> int:
    """K of the product the kernel runs: A's, or its three fp16 blocks' for fp32."""
    return PARTS * k if dtype == torch.float32 else k


def chunk_size(tiles, num_warps: int) -> int:
    """Entries a program loads at a time: its tiles' mean list, to a power of two, at least two a
    thread (8-byte copies; BENCHMARKS.md 7z: one a thread ran 1.4x slower at 98%) and at most what
    lets two stages of the entries' ring fit in one A slot (a longer list takes several chunks; L2
    is asked for the later ones when the first is copied)."""
    return _chunk_size(tiles.tile_ptr.numel() - 1, tiles.padded_entries, num_warps, tiles.block_m * tiles.block_k)


@functools.lru_cache(maxsize=256)  # a launch's host time is a few dozen such calls (probe_host_time.py)
def _chunk_size(tile_count: int, entries: int, num_warps: int, tile_elems: int) -> int:
    mean = triton.next_power_of_2(max(1, entries // max(1, tile_count)))
    return max(64 * num_warps, min(tile_elems // 4, mean))


def spmm_scatter(tiles, b: torch.Tensor, *, config, out: torch.Tensor | None = None,
                 bias: torch.Tensor | None = None) -> torch.Tensor:
    """Launch the kernel on ``ScatterTiles`` and dense ``b`` (``takes(b)`` must hold); ``out`` and
    ``bias`` as for the CSR kernel."""
    if config.kernel != "scatter":
        raise ValueError(f"spmm_scatter: config.kernel is {config.kernel!r}, not 'scatter'")
    if (tiles.block_m, tiles.block_k) != (config.rows, config.nnz_step):
        raise ValueError(f"spmm_scatter: the config's {config.rows} x {config.nnz_step} tiles do not match the "
                         f"format's {tiles.block_m} x {tiles.block_k}")
    m, k = tiles.shape
    if b.shape[0] != k:
        raise ValueError(f"spmm_scatter: A has {k} columns but B has {b.shape[0]} rows")
    # The checks read only A's dtype and device, which the tiles carry: no tensor made per launch.
    out = check_b_and_out("spmm_scatter", tiles, b, m, out)
    check_bias("spmm_scatter", bias, m, tiles)
    n = b.shape[1]
    if m == 0 or n == 0:
        return out
    if k == 0 or tiles.nnz == 0:
        return fill_bias(out, bias)
    if not takes(b):
        raise ValueError("spmm_scatter: B must be on an sm_90 GPU, and if 16-bit with TMA-aligned strides (see takes)")
    scaled = tiles.parts > 1
    if scaled:
        b, col_factor = split_x(b, tiles.lo_scale)
    bm, bk, bn = config.rows, config.nnz_step, config.block_n
    k_tiles = triton.cdiv(tiles.tile_k, bk)
    split = max(1, min(config.split_k, k_tiles))
    grid = (triton.cdiv(m, bm), split, triton.cdiv(n, bn))
    ctas = 1 if scaled else cluster_ctas(split, bm, bk, bn, config.num_stages, grid[0] * grid[2],
                                         device_budget(b.device.index).sm_count)
    slices = 1 < split <= SLICES_MAX_SPLIT and split * m * n * 4 <= SLICES_MAX_BYTES
    if ctas > 1:
        grid = (grid[0], 1, grid[2])  # a cluster (program_id(0)) of the splits per band
        partial, counts = out, out
    elif split > 1:
        partial, counts = split_k_workspace(b.device, (split if slices else 1) * m * n, grid[0] * grid[2],
                                            zeroed=not slices)
    else:
        partial, counts = out, out
    slots, a_bytes, x_bytes = buffer_bytes(bm, bk, bn, config.num_stages)
    transposed = x_transposed(b)
    block = [bn, bk] if transposed else [bk, bn]
    src = b.t() if transposed else b
    x_layout = nvmma_layout(tuple(block), b.dtype)
    x_desc = TensorDescriptor(src, list(src.shape), list(src.stride()), block,
                              replicated_layout(x_layout, ctas) if ctas > 1 else x_layout)
    chunk = chunk_size(tiles, config.num_warps)
    kernel = _spmm_scatter_kernel[grid](
        tiles.tile_ptr, tiles.entries, tiles.capacity // 4, x_desc, out, b if bias is None else bias, partial, counts,
        tiles.row_factor if scaled else out, col_factor if scaled else out,
        m, n, out.stride(0), out.stride(1), k_tiles,
        BM=bm, BN=bn, BK=bk, SPLIT_K=split, STAGES=config.num_stages, SLOTS=slots,
        A_OFFSET=0 if a_bytes > x_bytes else x_bytes, CHUNK=chunk, RING=ring_stages(bm, bk, chunk),
        FIXED=tiles.capacity > 0, X_T=transposed, HAS_BIAS=bias is not None, SLICES=slices, CLEAR=CLEAR_BY_ENTRIES,
        CTAS=ctas, Y_PAIRS=y_pairs(out), SCALED=scaled, FLUSH=FLUSH_K // bk if scaled else 0,
        num_warps=config.num_warps, num_ctas=ctas,
    )
    used = kernel.metadata.shared
    if not a_bytes + x_bytes <= used <= a_bytes + x_bytes + 1024:
        # Another buffer (the barriers excepted) would move A's slots off A_OFFSET.
        raise RuntimeError(f"spmm_scatter: the kernel uses {used} bytes of shared memory, expected "
                           f"{a_bytes + x_bytes} and its barriers; its scatter addresses would be wrong")
    return out


@triton.constexpr_function
def _ring_read_asm(ahead, vec):
    """``_ring_entries``'s PTX: wait for all but the last ``ahead`` copy groups, then one
    ``vec``-wide shared-memory read at byte $vec of the kernel's dynamic shared memory."""
    outs = ", ".join(f"${v}" for v in range(vec))
    return f"""{{
            .reg .u32 a;
            cp.async.wait_group {ahead};
            mov.u32 a, global_smem;
            add.u32 a, a, ${vec};
            ld.shared.v{vec}.b32 {{{outs}}}, [a];
            }}"""


@triton.constexpr_function
def _ring_read_constraints(vec):
    return ",".join(["=r"] * vec + ["r"] * vec)


if gluon is not None:

    @gluon.jit
    def _store_entries(e, ok, slot_byte):
        """Store entries ``e`` (byte offset << 16 | value bits) where ``ok`` and not padding into
        the A slot at byte ``slot_byte`` of the kernel's shared memory."""
        off = (e >> 16) & 0xFFFF
        ok = ok & (off != 0xFFFF)
        # st.shared.b16 of the entry's low half at byte $1 of global_smem where $3 holds; inline asm
        # must return something, so a dummy.
        gl.inline_asm_elementwise("""{
            .reg .pred p;
            .reg .u32 a;
            .reg .b16 lo, hi;
            setp.ne.s32 p, $3, 0;
            mov.u32 a, global_smem;
            add.u32 a, a, $1;
            mov.b32 {lo, hi}, $2;
            @p st.shared.b16 [a], lo;
            mov.u32 $0, 0;
            }""", "=r,r,r,r", [slot_byte + off, e, ok.to(gl.int32)], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _tile_bounds(row_tiles, first_tile, capacity_fours, step, steps, SPLIT_K: gl.constexpr, FIXED: gl.constexpr):
        """Entries [start, end) of the program's tile at ``step`` (empty past its last step): where
        every list holds 4 x ``capacity_fours`` entries (FIXED), computed from the program's
        ``first_tile``; else read from ``row_tiles`` (its first tile's place in ``tile_ptr``). Both
        come in fours, so the compiler knows the copies 16-byte aligned."""
        if FIXED:
            start = 4 * ((first_tile + step * SPLIT_K) * capacity_fours)
            end = start + 4 * capacity_fours * (step < steps).to(gl.int32)
        else:
            tile = row_tiles + step * SPLIT_K
            start = 4 * gl.load(tile, mask=step < steps, other=0)
            end = 4 * gl.load(tile + 1, mask=step < steps, other=0)
        return start, end

    @gluon.jit
    def _fetch_entries(ring, ent_ptr, stage, start, end, e_layout: gl.constexpr, CHUNK: gl.constexpr,
                       CTAS: gl.constexpr, num_warps: gl.constexpr):
        """Copy a tile's entries [start, end), the first CHUNK, into the ring's ``stage`` (cp.async:
        nothing waits until they are read) as one commit group; past the tile, zeros."""
        idx = start + gl.arange(0, CHUNK, layout=e_layout)
        async_copy.async_copy_global_to_shared(ring.index(stage), ent_ptr + idx, mask=idx < end)
        async_copy.commit_group()
        if end - start > CHUNK:
            _prefetch_l2(ent_ptr, start + CHUNK, end, CTAS, num_warps)

    @gluon.jit
    def _prefetch_l2(ent_ptr, start, end, CTAS: gl.constexpr, num_warps: gl.constexpr):
        """Ask L2 for entries [start, end) (at most 32 * 32 * num_warps of them): a 128-byte line a
        thread, and no register written, so nothing waits for it."""
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0], cga_layout=replicated(1, CTAS).value)
        line = gl.arange(0, 32 * num_warps, layout=layout) * 32
        gl.inline_asm_elementwise("""{
            .reg .pred p;
            setp.ne.s32 p, $2, 0;
            @p prefetch.global.L2 [$1];
            mov.u32 $0, 0;
            }""", "=r,l,r", [ent_ptr + start + line, (start + line < end).to(gl.int32)], dtype=gl.int32,
                                  is_pure=False, pack=1)

    @gluon.jit
    def _ring_entries(stage_byte, AHEAD: gl.constexpr, VEC: gl.constexpr, e_layout: gl.constexpr,
                      CHUNK: gl.constexpr):
        """Wait for all but the last AHEAD copies, then read the entries a thread copied into the
        ring stage at byte ``stage_byte`` of the kernel's shared memory, VEC (2 or 4) at a time.
        Inline PTX: through Gluon a barrier would come first, as if threads read each other's copies."""
        idx = gl.arange(0, CHUNK, layout=e_layout)
        return gl.inline_asm_elementwise(_ring_read_asm(AHEAD, VEC), _ring_read_constraints(VEC),
                                         [stage_byte + 4 * idx], dtype=gl.int32, is_pure=False, pack=VEC)

    @gluon.jit
    def _scatter(first, ent_ptr, start, end, slot_byte, e_layout: gl.constexpr, CHUNK: gl.constexpr):
        """Store a tile's entries [start, end) into its slot: ``first`` holds the first CHUNK,
        from the ring; any more load here."""
        _store_entries(first, start + gl.arange(0, CHUNK, layout=e_layout) < end, slot_byte)
        for e0 in range(start + CHUNK, end, CHUNK):
            idx = e0 + gl.arange(0, CHUNK, layout=e_layout)
            ok = idx < end
            _store_entries(gl.load(ent_ptr + idx, mask=ok, other=0), ok, slot_byte)

    @gluon.jit
    def _clear_slot(entries, start, end, slot, zeros, slot_byte, e_layout: gl.constexpr, CHUNK: gl.constexpr):
        """Zero a used slot: where its tile's ``entries`` were stored (the tile's first CHUNK; the
        entries' value bits cleared), or all of it after a longer tile. One warpgroup only: a
        thread's entries may lie in any row, and a warpgroup's MMA wait covers only its own rows."""
        if end - start > CHUNK:
            slot.store(zeros)
        else:
            _store_entries(entries & -65536, start + gl.arange(0, CHUNK, layout=e_layout) < end, slot_byte)

    @gluon.jit
    def _load_x(x_desc, bars, x_smem, step, pid_k, pid_n, steps, SPLIT_K: gl.constexpr, BK: gl.constexpr,
                BN: gl.constexpr, STAGES: gl.constexpr, X_T: gl.constexpr):
        stage = step % STAGES
        k0 = (pid_k + step * SPLIT_K) * BK
        mbarrier.expect(bars.index(stage), BK * BN * 2, pred=step < steps)
        coord = [pid_n * BN, k0] if X_T else [k0, pid_n * BN]
        tma.async_copy_global_to_shared(x_desc, coord, bars.index(stage), x_smem.index(stage), pred=step < steps)

    @gluon.jit
    def _spmm_scatter_kernel(
        # A as scatter tiles (stuning.formats.scatter), X through TMA (X^T's descriptor when X_T)
        tile_ptr, ent_ptr, capacity_fours, x_desc,
        # Y (M x N, any strides), the bias, and the split-K workspace
        y_ptr, bias_ptr, partial_ptr, count_ptr,
        # fp32 as fp16 parts (SCALED): the factors of A's rows and X's columns
        row_factor_ptr, col_factor_ptr,
        M, N, stride_ym, stride_yn, K_TILES,
        BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr,
        SLOTS: gl.constexpr, A_OFFSET: gl.constexpr, CHUNK: gl.constexpr, RING: gl.constexpr, FIXED: gl.constexpr,
        X_T: gl.constexpr,
        HAS_BIAS: gl.constexpr, SLICES: gl.constexpr, CLEAR: gl.constexpr, CTAS: gl.constexpr,
        Y_PAIRS: gl.constexpr, SCALED: gl.constexpr, FLUSH: gl.constexpr, num_warps: gl.constexpr,
    ):
        DT: gl.constexpr = x_desc.dtype
        A_BYTES: gl.constexpr = BM * BK * 2
        # Lists come padded to fours: a thread copies and reads 8 or 16 bytes of entries at a time.
        VEC: gl.constexpr = min(4, CHUNK // (32 * num_warps))
        gl.static_assert(VEC == 2 or VEC == 4, "two or four entries a thread: 8- or 16-byte copies and reads")
        # CTAS > 1: a cluster, one CTA per split, each holding every tensor whole (split_k_cluster).
        e_layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [num_warps], [0],
                                                  cga_layout=replicated(1, CTAS).value)
        z_layout: gl.constexpr = gl.BlockedLayout([BM // (4 * num_warps), 8], [4, 8], [num_warps, 1], [1, 0],
                                                  cga_layout=replicated(2, CTAS).value)
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                             instr_shape=[16, BN, 16],
                                                             cga_layout=replicated(2, CTAS).value)
        a_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2,
                                                      cga_layout=replicated(2, CTAS).value)
        one_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0], cga_layout=replicated(1, CTAS).value)
        bar_layout: gl.constexpr = mbarrier.MBarrierLayout(cga_layout=replicated(1, CTAS).value)
        LAG: gl.constexpr = 1 if num_warps == 4 else 2

        gl.static_assert(RING == 4 or RING == 2, "the loop holds the bounds of two or four steps")
        AHEAD: gl.constexpr = RING - 1

        pid_m = gl.program_id(0)  # in a cluster, the cluster's
        if CTAS > 1:
            pid_k = cluster_rank(num_warps, CTAS)
        else:
            pid_k = gl.program_id(1)
        pid_n = gl.program_id(2)
        # A's slots, then the entries' ring in one more slot's bytes (buffer_bytes).
        a_smem = gl.allocate_shared_memory(DT, [SLOTS + 1, BM, BK], a_layout)
        ring = a_smem.index(SLOTS)._reinterpret(gl.int32, [RING, CHUNK], one_layout)
        if X_T:
            x_smem = gl.allocate_shared_memory(DT, [STAGES, BN, BK], x_desc.layout)
        else:
            x_smem = gl.allocate_shared_memory(DT, [STAGES, BK, BN], x_desc.layout)
        bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        zeros = gl.zeros((BM, BK), DT, layout=z_layout)
        for s in gl.static_range(SLOTS):
            a_smem.index(s).store(zeros)
        for s in gl.static_range(STAGES):
            mbarrier.init(bars.index(s), count=1)
        steps = gl.cdiv(K_TILES - pid_k, SPLIT_K)
        for s in gl.static_range(STAGES - LAG):
            _load_x(x_desc, bars, x_smem, s, pid_k, pid_n, steps, SPLIT_K, BK, BN, STAGES, X_T)

        # Each thread copies the entries it later reads itself, so only its own cp.async groups are
        # waited for, never a barrier. Entries come cold from DRAM, and a register loaded ahead
        # would be waited for where the loop hands it on (BENCHMARKS.md 7z), hence the ring.
        # The bounds of the steps i .. i + AHEAD stay in registers, each read a step before its copy
        # (or computed where the lists have one capacity: the first copy then waits for no load).
        first_tile = pid_m * K_TILES + pid_k
        row_tiles = tile_ptr + first_tile
        start, end = _tile_bounds(row_tiles, first_tile, capacity_fours, 0, steps, SPLIT_K, FIXED)
        _fetch_entries(ring, ent_ptr, 0, start, end, e_layout, CHUNK, CTAS, num_warps)
        start1, end1 = _tile_bounds(row_tiles, first_tile, capacity_fours, 1, steps, SPLIT_K, FIXED)
        if AHEAD == 3:
            _fetch_entries(ring, ent_ptr, 1, start1, end1, e_layout, CHUNK, CTAS, num_warps)
            start2, end2 = _tile_bounds(row_tiles, first_tile, capacity_fours, 2, steps, SPLIT_K, FIXED)
            _fetch_entries(ring, ent_ptr, 2, start2, end2, e_layout, CHUNK, CTAS, num_warps)
            start3, end3 = _tile_bounds(row_tiles, first_tile, capacity_fours, 3, steps, SPLIT_K, FIXED)
        acc = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
        if FLUSH > 0:
            total = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
        # The previous step's entries: its slot is cleared where they were stored (no entries at first).
        last = gl.zeros((CHUNK,), gl.int32, e_layout)
        last_start = start * 0
        last_end = start * 0
        gl.thread_barrier()
        for i in range(steps):
            if AHEAD == 3:
                _fetch_entries(ring, ent_ptr, (i + AHEAD) % RING, start3, end3, e_layout, CHUNK, CTAS, num_warps)
            else:
                _fetch_entries(ring, ent_ptr, (i + AHEAD) % RING, start1, end1, e_layout, CHUNK, CTAS, num_warps)
            # Handed on at the loop's end: by then the load has had the whole step.
            start_next, end_next = _tile_bounds(row_tiles, first_tile, capacity_fours, i + AHEAD + 1, steps, SPLIT_K,
                                                FIXED)
            first = _ring_entries(A_OFFSET + SLOTS * A_BYTES + (i % RING) * (CHUNK * 4), AHEAD, VEC, e_layout, CHUNK)
            _scatter(first, ent_ptr, start, end, A_OFFSET + (i % SLOTS) * A_BYTES, e_layout, CHUNK)
            mbarrier.wait(bars.index(i % STAGES), (i // STAGES) & 1)
            fence_async_shared()
            gl.thread_barrier()
            x_tile = x_smem.index(i % STAGES)
            if X_T:
                x_tile = x_tile.permute((1, 0))
            if FLUSH > 0:
                # Every FLUSH steps the MMA's sum moves into ``total`` (module docstring) and starts over.
                if i % FLUSH == 0:
                    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
                    total += acc
                acc = warpgroup_mma(a_smem.index(i % SLOTS), x_tile, acc, use_acc=i % FLUSH != 0, is_async=True)
            else:
                acc = warpgroup_mma(a_smem.index(i % SLOTS), x_tile, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            used = (i + SLOTS - 1) % SLOTS
            if CLEAR and num_warps == 4:
                _clear_slot(last, last_start, last_end, a_smem.index(used), zeros, A_OFFSET + used * A_BYTES,
                            e_layout, CHUNK)
            else:
                a_smem.index(used).store(zeros)
            # The next step stores into the slot just cleared (SLOTS = 2), and with two warpgroups
            # into rows whose MMA only the other warpgroup has waited for.
            gl.thread_barrier()
            _load_x(x_desc, bars, x_smem, i + STAGES - LAG, pid_k, pid_n, steps, SPLIT_K, BK, BN, STAGES, X_T)
            last, last_start, last_end = first, start, end
            start, end = start1, end1
            if AHEAD == 3:
                start1, end1 = start2, end2
                start2, end2 = start3, end3
                start3, end3 = start_next, end_next
            else:
                start1, end1 = start_next, end_next
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        if FLUSH > 0:
            acc = total + acc

        offs_m = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
        offs_n = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
        if SCALED:
            # Linear: each split scales its own part before the parts meet.
            acc = acc * gl.load(row_factor_ptr + offs_m, mask=offs_m < M, other=0.0)[:, None]
            acc = acc * gl.load(col_factor_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
        if CTAS > 1:
            # X's stages take the other splits' parts; they follow A's buffer or come first (A_OFFSET).
            X_BYTES: gl.constexpr = STAGES * BK * BN * 2
            X_OFFSET: gl.constexpr = (SLOTS + 1) * A_BYTES if A_OFFSET == 0 else 0
            bar = landing_barrier(x_smem, X_BYTES, BM, BN, CTAS)
            exchange_ready(bar, num_warps, CTAS)
            acc, mine = exchange_parts(acc, bar, pid_k, X_OFFSET, X_OFFSET + (CTAS - 1) * (BM // CTAS) * BN * 4, BM, BN,
                                       num_warps, CTAS)
            ok = mine & (offs_m < M)[:, None] & (offs_n < N)[None, :]
            _store_y(acc, y_ptr, bias_ptr, offs_m, offs_n, ok, M, stride_ym, stride_yn, HAS_BIAS, EVERY_RANK=True,
                     PAIRS=Y_PAIRS)
        else:
            # Not compiled in a cluster, whose launch passes Y for the workspace (no fp32 slices, no
            # counters: the atomic adds of four splits would not compile on it).
            partial_ptrs = partial_ptr + offs_m[:, None].to(gl.int64) * N + offs_n[None, :]
            _finish_tile(acc, y_ptr, bias_ptr, partial_ptrs, count_ptr + pid_m * gl.cdiv(N, BN) + pid_n, offs_m,
                         offs_n, M, N, stride_ym, stride_yn, SPLIT_K, HAS_BIAS, pid_k, M * N,  # < 2^31
                         SLICES, ORDERED=True)
