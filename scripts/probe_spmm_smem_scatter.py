"""Probe a tensor-core SpMM for decode widths that scatters W's tiles into shared memory.

7n's probe (``probe_spmm_scatter.py``) built each dense (BM x BK) tile of W by storing its nonzeros
into a zeroed scratch tile and multiplying that with X's rows on the tensor cores. It ran at
0.44-0.48x of cuBLAS at N = 128, bound by the scratch tile's round trips through L2, because
neither Triton nor Gluon can store to a computed address in shared memory. This probe does that
store with one line of inline PTX (``st.shared.b16``), at an address taken from the symbol Triton
gives the kernel's dynamic shared memory (``global_smem``). A Gluon kernel (Hopper only):

    scatters step i's entries into W slot i % 3          (one 2-byte shared store a nonzero)
    waits for X's cp.async, fences, meets at a barrier
    issues the warpgroup MMA of W slot i % 3 with X's stage; waits for step i - 1's MMA
    zeroes W slot (i - 1) % 3 and starts X's copy for step i + STAGES - 1 into its freed stage

Three slots: a slot is zeroed a step after its MMA was issued (every warp has waited for it) and
written again a step later still (after the next barrier). One warpgroup (4 warps) a program, so a
warp's wait covers the whole MMA.

The address is only right if the kernel's one shared-memory buffer starts at offset 0 of
``global_smem``: the kernel allocates a single byte buffer and carves the W slots and X stages
from it, and the probe checks after compiling that the kernel's shared memory is that buffer's
size (another allocation would show as more). Every config is checked against a float64 reference
twice before it is timed (CUDA graphs, L2 flushed), beside cuBLAS and stuning's own pick.

    python3 scripts/probe_spmm_smem_scatter.py       # $OUT/spmm_smem_scatter_probe.json, a table last
    PROBE_NS=128 PROBE_SPARSITIES=0.9 PROBE_CONFIGS=64x128:4:3 python3 scripts/probe_spmm_smem_scatter.py
"""

from __future__ import annotations

import functools
import itertools
import json
import os

import torch
import triton
from probe_harness import checked_time_us, spmm_baseline_row, spmm_problems, write_results
from stuning.kernels.split_k import add_split
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

NS = [int(v) for v in os.environ.get("PROBE_NS", "16,64,128,256").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
M, K = (int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
SECONDS = float(os.environ.get("PROBE_SECONDS", "400"))
SLOTS = 3

@gluon.jit
def _store_entries(e, ok, slot_byte):
    """Store entries ``e`` (byte offset in the slot << 16 | the value's bits; the offset already in
    the 128-byte swizzle of a (BM x 64) fp16 NVMMA tile, ``tile_entries``) where ``ok`` and the entry
    is not padding (offset 0xFFFF) into the W slot at byte ``slot_byte`` of shared memory."""
    off = (e >> 16) & 0xFFFF
    ok = ok & (off != 0xFFFF)
    addr = slot_byte + off
    # st.shared.b16 of the entry's low half (the value) at byte $1 of global_smem where $3 holds;
    # inline asm must return something, so a dummy.
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
        }""", "=r,r,r,r", [addr, e, ok.to(gl.int32)], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _first_entries(ent_ptr, start, end, e_layout: gl.constexpr, CHUNK: gl.constexpr):
    idx = start + gl.arange(0, CHUNK, layout=e_layout)
    return gl.load(ent_ptr + idx, mask=idx < end, other=0)


@gluon.jit
def _scatter(first, ent_ptr, start, end, slot_byte, e_layout: gl.constexpr, CHUNK: gl.constexpr):
    """Store a tile's entries [start, end) into its W slot: ``first`` holds the first CHUNK of them,
    loaded a step ahead; any more load here."""
    _store_entries(first, start + gl.arange(0, CHUNK, layout=e_layout) < end, slot_byte)
    for e0 in range(start + CHUNK, end, CHUNK):
        idx = e0 + gl.arange(0, CHUNK, layout=e_layout)
        ok = idx < end
        _store_entries(gl.load(ent_ptr + idx, mask=ok, other=0), ok, slot_byte)


@gluon.jit
def _spmm_smem_scatter_kernel(
    tile_ptr, ent_ptr, x_desc, y_ptr, partial_ptr, count_ptr,
    M, N, stride_ym, K_TILES,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr,
    CHUNK: gl.constexpr, SLOTS: gl.constexpr, W_OFFSET: gl.constexpr, num_warps: gl.constexpr,
):
    DT: gl.constexpr = x_desc.dtype
    W_BYTES: gl.constexpr = BM * BK * 2
    X_BYTES: gl.constexpr = BK * BN * 2
    # Zeros by rows as the MMA's warpgroups own them (64 a warpgroup, 16 a warp): a warpgroup's
    # wait covers only its own MMA, so it zeroes only the rows that MMA read.
    z_layout: gl.constexpr = gl.BlockedLayout([BM // (4 * num_warps), 8], [4, 8], [num_warps, 1], [1, 0])
    # X's stage of step i - LAG is free at step i: with one warpgroup, its own wait says MMA i - 1
    # is done; with more, only MMA i - 2 is known done for all of them (the barrier after their waits).
    LAG: gl.constexpr = 1 if num_warps == 4 else 2
    # Entries come padded to fours (tile_ptr counts fours): 16-byte loads where CHUNK allows.
    VEC: gl.constexpr = min(4, CHUNK // (32 * num_warps))
    e_layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [num_warps], [0])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BN, 16])
    ws_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    xs_layout: gl.constexpr = x_desc.layout

    pid_m = gl.program_id(0)
    pid_k = gl.program_id(1)
    pid_n = gl.program_id(2)
    # One buffer, so that it starts at offset 0 of global_smem (the launcher checks the size).
    # Triton places the larger buffer first (at offset 0 of global_smem) and the other after it; the
    # launcher passes where W's slots start (W_OFFSET) and never sizes the two alike.
    w_smem = gl.allocate_shared_memory(DT, [SLOTS, BM, BK], ws_layout)
    x_smem = gl.allocate_shared_memory(DT, [STAGES, BK, BN], xs_layout)
    zeros = gl.zeros((BM, BK), DT, layout=z_layout)
    for s in gl.static_range(SLOTS):
        w_smem.index(s).store(zeros)

    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    steps = gl.cdiv(K_TILES - pid_k, SPLIT_K)
    for s in gl.static_range(STAGES - LAG):
        mbarrier.expect(bars.index(s), X_BYTES, pred=s < steps)
        tma.async_copy_global_to_shared(x_desc, [(pid_k + s * SPLIT_K) * BK, pid_n * BN], bars.index(s),
                                        x_smem.index(s), pred=s < steps)
    row_tiles = tile_ptr + pid_m * K_TILES + pid_k
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
    # A step's entries load a step ahead and its bounds two steps ahead, so that the scatter does
    # not wait on two dependent loads (the first version's ~1 us a step).
    start = 4 * gl.load(row_tiles)
    end = 4 * gl.load(row_tiles + 1)
    next_start = 4 * gl.load(row_tiles + SPLIT_K, mask=steps > 1, other=0)
    next_end = 4 * gl.load(row_tiles + SPLIT_K + 1, mask=steps > 1, other=0)
    first = _first_entries(ent_ptr, start, end, e_layout, CHUNK)
    gl.thread_barrier()
    for i in range(steps):
        later = row_tiles + (i + 2) * SPLIT_K
        later_start = 4 * gl.load(later, mask=i + 2 < steps, other=0)
        later_end = 4 * gl.load(later + 1, mask=i + 2 < steps, other=0)
        next_first = _first_entries(ent_ptr, next_start, next_end, e_layout, CHUNK)
        _scatter(first, ent_ptr, start, end, W_OFFSET + (i % SLOTS) * W_BYTES, e_layout, CHUNK)
        first = next_first
        start = next_start
        end = next_end
        next_start = later_start
        next_end = later_end
        mbarrier.wait(bars.index(i % STAGES), (i // STAGES) & 1)
        fence_async_shared()
        gl.thread_barrier()
        acc = warpgroup_mma(w_smem.index(i % SLOTS), x_smem.index(i % STAGES), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        # This warpgroup's MMA of step i - 1 is done: it zeroes its rows of that W slot. X's stage of
        # step i - LAG takes step i + STAGES - LAG.
        w_smem.index((i + SLOTS - 1) % SLOTS).store(zeros)
        nxt = i + STAGES - LAG
        mbarrier.expect(bars.index(nxt % STAGES), X_BYTES, pred=nxt < steps)
        tma.async_copy_global_to_shared(x_desc, [(pid_k + nxt * SPLIT_K) * BK, pid_n * BN], bars.index(nxt % STAGES),
                                        x_smem.index(nxt % STAGES), pred=nxt < steps)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))

    offs_m = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    offs_n = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    ok = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    y_ptrs = y_ptr + offs_m[:, None].to(gl.int64) * stride_ym + offs_n[None, :]
    if SPLIT_K > 1:
        partial_ptrs = partial_ptr + offs_m[:, None].to(gl.int64) * N + offs_n[None, :]
        tile = pid_m * gl.num_programs(2) + pid_n
        last, acc = add_split(partial_ptrs, acc, ok, count_ptr + tile, SPLIT_K)
        if last:
            gl.store(y_ptrs, acc.to(DT), mask=ok)
    else:
        gl.store(y_ptrs, acc.to(DT), mask=ok)


def tile_entries(w: torch.Tensor, bm: int, bk: int):
    """W's nonzeros per (bm x bk) tile, tiles row-major, each tile's list padded to a multiple of 4
    with entries of offset 0xFFFF: ``tile_ptr`` (tiles + 1,) int32 in fours, and the entries (byte
    offset in the tile's shared-memory slot << 16 | the value's 16 bits) as int32. The offset is
    NVMMA's 128-byte swizzle of an fp16 tile: 64 columns a block, and in a block row r's 16-byte
    chunk j sits at chunk j ^ (r % 8)."""
    m, k = w.shape
    assert bk % 64 == 0 and bm * bk * 2 < 0xFFFF
    r, c = torch.nonzero(w, as_tuple=True)
    v = w[r, c]
    kt = triton.cdiv(k, bk)
    tiles = triton.cdiv(m, bm) * kt
    tile = (r // bm) * kt + c // bk
    tr, tc = r % bm, c % bk
    # A (bm x bk) tile is bk / 64 blocks of (bm x 64), one after another.
    off = (tc // 64) * (bm * 128) + tr * 128 + ((((tc % 64) >> 3) ^ (tr & 7)) << 4) + (tc & 7) * 2
    counts = torch.bincount(tile, minlength=tiles)
    padded = (counts + 3) // 4 * 4
    ptr = torch.zeros(tiles + 1, dtype=torch.int64, device=w.device)
    ptr[1:] = torch.cumsum(padded, 0)
    order = torch.argsort(tile * (bm * bk) + tr * bk + tc)
    tile, off, v = tile[order], off[order], v[order]
    rank = torch.arange(tile.numel(), device=w.device) - (torch.cumsum(counts, 0) - counts)[tile]
    ent = torch.full((int(ptr[-1]),), -65536, dtype=torch.int32, device=w.device)  # offset 0xFFFF, value 0
    ent[ptr[tile] + rank] = (off.to(torch.int32) << 16) | (v.view(torch.int16).to(torch.int32) & 0xFFFF)
    return (ptr // 4).to(torch.int32), ent, float(counts.float().mean())


_CHECKED: set = set()


def spmm_smem_scatter(tiles, x, m, bm, bk, bn, split_k, stages, chunk):
    from stuning.kernels.split_k import split_k_workspace

    ptr, ent, _ = tiles
    k, n = x.shape
    k_tiles = triton.cdiv(k, bk)
    split_k = min(split_k, k_tiles)
    y = torch.empty(m, n, dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(m, bm), split_k, triton.cdiv(n, bn))
    partial, counts = split_k_workspace(x.device, m * n, grid[0] * grid[2]) if split_k > 1 else (y, y)
    w_bytes, x_bytes = SLOTS * bm * bk * 2, stages * bk * bn * 2
    slots = SLOTS + (w_bytes == x_bytes)  # a fourth slot where the two would tie
    w_bytes = slots * bm * bk * 2
    layout = gl.NVMMASharedLayout.get_default_for([bk, bn], gl.float16)
    x_desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [bk, bn], layout)
    kernel = _spmm_smem_scatter_kernel[grid](
        ptr, ent, x_desc, y, partial, counts, m, n, y.stride(0), k_tiles,
        BM=bm, BN=bn, BK=bk, SPLIT_K=split_k, STAGES=stages, CHUNK=chunk, SLOTS=slots,
        W_OFFSET=0 if w_bytes > x_bytes else x_bytes, num_warps=4 * bm // 64)
    key = (bm, bk, bn, split_k, stages, chunk)
    if key not in _CHECKED:
        # A third allocation (scratch of a layout conversion) would move the buffers; the float64
        # checks would then fail, this says why.
        assert w_bytes + x_bytes <= kernel.metadata.shared <= w_bytes + x_bytes + 1024, \
            f"shared memory {kernel.metadata.shared} bytes, expected {w_bytes + x_bytes}"
        _CHECKED.add(key)
    return y


def configs(n: int):
    wanted = os.environ.get("PROBE_CONFIGS")
    if wanted:
        for text in wanted.split(","):
            tiles, split_k, stages = text.split(":")
            bm, bk, bn = (int(v) for v in tiles.split("x"))
            yield bm, bk, min(bn, max(16, n)), int(split_k), int(stages)
        return
    bn = min(max(16, triton.next_power_of_2(n)), 256)
    splits = [int(v) for v in os.environ.get("PROBE_SPLITS", "1,2,4,8").split(",")]
    for bm, bk, split_k, stages in itertools.product((64, 128, 256), (64, 128), splits, (2, 3, 4)):
        if (bm > 64 and stages == 2) or (bm == 64 and stages == 4):
            continue  # more than one warpgroup: X's stages lag two steps, so two stages would not prefetch
        if bm * bk * 2 * 3 + stages * bk * bn * 2 > 200 * 1024:
            continue
        yield bm, bk, bn, split_k, stages


def main() -> int:
    rows = []
    for p in spmm_problems(M, K, NS, SPARSITIES, "cuda", seconds=SECONDS):
        row = {"m": M, "k": K, **spmm_baseline_row(p, False), "scatter": {}}
        tiles = {}
        for bm, bk, bn, split_k, stages in configs(p.n):
            if (bm, bk) not in tiles:
                tiles[(bm, bk)] = tile_entries(p.w, bm, bk)
            chunk = max(128, min(1024, triton.next_power_of_2(int(tiles[(bm, bk)][2]))))
            label = f"{bm}x{bk}x{bn}:{split_k}:{stages}"
            run = functools.partial(spmm_smem_scatter, tiles[(bm, bk)], p.x, M, bm, bk, bn, split_k, stages, chunk)
            row["scatter"][label] = checked_time_us(run, p.ref, f"n={p.n} {p.sparsity} {label}", checks=2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_results(rows, "spmm_smem_scatter_probe.json")
    print(f"{'N':>4} {'zeros':>5} {'cuBLAS':>7} {'pick':>7} {'scatter':>7} {'config':>16} {'vs cuBLAS':>9} "
          f"{'pick vs':>7} failed")
    for r in rows:
        timed = {c: t for c, t in r["scatter"].items() if isinstance(t, float)}
        best = min(timed, key=timed.get) if timed else "-"
        bt = timed.get(best, float("nan"))
        print(f"{r['n']:>4} {r['sparsity']:>5} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {bt:>7.1f} {best:>16} "
              f"{r['cublas_us'] / bt:>8.2f}x {r['cublas_us'] / r['pick_us']:>6.2f}x {len(r['scatter']) - len(timed)}")
        failed = [f"{c}: {t}" for c, t in r["scatter"].items() if not isinstance(t, float)]
        for f in failed[:3]:
            print("   ", f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
