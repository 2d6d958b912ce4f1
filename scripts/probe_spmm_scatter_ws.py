"""Probe a warp-specialized form of the scatter SpMM kernel (``kernels/spmm_scatter.py``) on the H200.

Written 2026-11-25 and compiled for sm_90a offline only: **it has not run on a GPU yet**. The next
session runs it; until then nothing here is a result.

Why (BENCHMARKS.md 7x): the library kernel's one warpgroup does everything a step needs in a row
(scatter the step's entries, fence, barrier, issue the MMA, wait for the previous one, zero a slot,
start an X load), and ncu counted 0.2 eligible warps a scheduler: a latency chain, not a busy unit.
Neither halving X's traffic nor spreading its reads over L2 moved it. Here three partitions run
those parts side by side and meet at mbarriers:

- the default partition (one warpgroup, ``num_warps = 4``): waits for a slot of A and a stage of X,
  issues the MMA, and after the previous step's MMA completes frees that step's slot and stage;
- a scatter partition (4 warps): waits for a free slot, zeroes it, stores the step's entries with the
  library's ``_scatter`` (entries loaded two steps ahead, as there), fences, and marks the slot full;
- a TMA partition (1 warp): waits for a free stage of X and loads it.

So the scatter of later steps overlaps the MMA of this one, up to SLOTS - 1 steps ahead. The
epilogue (split-K sums, Y) is the library's ``_finish_tile``. X (K x N, N contiguous) only, no bias.

    python3 scripts/probe_spmm_scatter_ws.py     # $OUT/spmm_scatter_ws_probe.json, a table last

Run it under ``timeout`` the first time (``timeout 120 python3 ...``): a wrong mbarrier phase hangs the
kernel rather than failing it. The phases: a barrier starts with its parity-1 phase complete, so a
partition's first wait on an "empty" barrier (parity ``((i // SLOTS) & 1) ^ 1``) passes at once, and
the k-th arrival on a barrier completes its phase k.
    PROBE_NS=128 PROBE_SPARSITIES=0.9 PROBE_CONFIGS=64x128x128:2:3 python3 scripts/probe_spmm_scatter_ws.py
    PROBE_SPLITS=1,2,4 python3 scripts/probe_spmm_scatter_ws.py   # the library probe's grid, its 64-row tiles

Every config is checked against a float64 reference twice before it is timed (CUDA graphs, L2 flushed),
beside the library kernel's same config.
"""

from __future__ import annotations

import functools
import json
import os

import torch
import triton
from probe_harness import best_checked, checked_time_us, spmm_baseline_row, spmm_problems, write_results
from probe_spmm_scatter_parts import _first_entries
from probe_spmm_smem_scatter import configs as scatter_configs
from stuning.kernels import spmm_scatter
from stuning.kernels.semi24_hopper import _finish_tile, nvmma_layout
from stuning.kernels.split_k import split_k_workspace
from stuning.kernels.spmm import SpMMConfig
from stuning.kernels.spmm_scatter import _scatter
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

import stuning
from stuning.formats.scatter import ScatterTiles

NS = [int(v) for v in os.environ.get("PROBE_NS", "16,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95").split(",")]
M, K = (int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
SECONDS = float(os.environ.get("PROBE_SECONDS", "300"))
SLOTS = int(os.environ.get("PROBE_SLOTS", "3"))
SCATTER_WARPS = int(os.environ.get("PROBE_SCATTER_WARPS", "4"))
SCATTER_REGS = int(os.environ.get("PROBE_SCATTER_REGS", "96"))
MAXNREG = int(os.environ.get("PROBE_MAXNREG", "168"))


@gluon.jit
def _mma_partition(a_smem, x_smem, a_full, a_empty, x_ready, x_empty, steps, BM: gl.constexpr, BN: gl.constexpr,
                   SLOTS: gl.constexpr, STAGES: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
    for i in range(steps):
        mbarrier.wait(a_full.index(i % SLOTS), (i // SLOTS) & 1)
        mbarrier.wait(x_ready.index(i % STAGES), (i // STAGES) & 1)
        acc = warpgroup_mma(a_smem.index(i % SLOTS), x_smem.index(i % STAGES), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        # Step i - 1's MMA is done: its slot and its stage are free.
        mbarrier.arrive(a_empty.index((i + SLOTS - 1) % SLOTS), pred=i > 0)
        mbarrier.arrive(x_empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    return (acc,)  # warp_specialize takes the default partition's results as a tuple


@gluon.jit
def _scatter_partition(a_smem, a_full, a_empty, tile_ptr, ent_ptr, steps, pid_m, pid_k, K_TILES, BM: gl.constexpr,
                       BK: gl.constexpr, SPLIT_K: gl.constexpr, SLOTS: gl.constexpr, A_OFFSET: gl.constexpr,
                       CHUNK: gl.constexpr, WARPS: gl.constexpr):
    A_BYTES: gl.constexpr = BM * BK * 2
    VEC: gl.constexpr = min(4, CHUNK // (32 * WARPS))
    e_layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [WARPS], [0])
    z_layout: gl.constexpr = gl.BlockedLayout([BM // (4 * WARPS), 8], [4, 8], [WARPS, 1], [1, 0])
    zeros = gl.zeros((BM, BK), gl.float16, layout=z_layout)
    row_tiles = tile_ptr + pid_m * K_TILES + pid_k
    start = 4 * gl.load(row_tiles)
    end = 4 * gl.load(row_tiles + 1)
    next_start = 4 * gl.load(row_tiles + SPLIT_K, mask=steps > 1, other=0)
    next_end = 4 * gl.load(row_tiles + SPLIT_K + 1, mask=steps > 1, other=0)
    first = _first_entries(ent_ptr, start, end, e_layout, CHUNK)
    next_first = _first_entries(ent_ptr, next_start, next_end, e_layout, CHUNK)
    after_start = 4 * gl.load(row_tiles + 2 * SPLIT_K, mask=steps > 2, other=0)
    after_end = 4 * gl.load(row_tiles + 2 * SPLIT_K + 1, mask=steps > 2, other=0)
    for i in range(steps):
        later = row_tiles + (i + 3) * SPLIT_K
        later_start = 4 * gl.load(later, mask=i + 3 < steps, other=0)
        later_end = 4 * gl.load(later + 1, mask=i + 3 < steps, other=0)
        ahead = _first_entries(ent_ptr, after_start, after_end, e_layout, CHUNK)
        slot = i % SLOTS
        # Free once the MMA that read it has completed; the first SLOTS steps find it free (phase 1).
        mbarrier.wait(a_empty.index(slot), ((i // SLOTS) & 1) ^ 1)
        if i >= SLOTS:
            a_smem.index(slot).store(zeros)
        gl.thread_barrier()  # the zeroes land before any warp's entries
        _scatter(first, ent_ptr, start, end, A_OFFSET + slot * A_BYTES, e_layout, CHUNK)
        fence_async_shared()
        mbarrier.arrive(a_full.index(slot))
        first = next_first
        next_first = ahead
        start = next_start
        end = next_end
        next_start = after_start
        next_end = after_end
        after_start = later_start
        after_end = later_end


@gluon.jit
def _tma_partition(x_desc, x_smem, x_ready, x_empty, steps, pid_k, pid_n, SPLIT_K: gl.constexpr, BK: gl.constexpr,
                   BN: gl.constexpr, STAGES: gl.constexpr):
    for i in range(steps):
        stage = i % STAGES
        mbarrier.wait(x_empty.index(stage), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(x_ready.index(stage), BK * BN * 2)
        tma.async_copy_global_to_shared(x_desc, [(pid_k + i * SPLIT_K) * BK, pid_n * BN], x_ready.index(stage),
                                        x_smem.index(stage))


@gluon.jit
def _spmm_scatter_ws_kernel(
    tile_ptr, ent_ptr, x_desc, y_ptr, partial_ptr, count_ptr,
    M, N, stride_ym, stride_yn, K_TILES,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr,
    SLOTS: gl.constexpr, A_OFFSET: gl.constexpr, CHUNK: gl.constexpr, SCATTER_WARPS: gl.constexpr,
    SCATTER_REGS: gl.constexpr, num_warps: gl.constexpr,
):
    pid_m = gl.program_id(0)
    pid_k = gl.program_id(1)
    pid_n = gl.program_id(2)
    a_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    a_smem = gl.allocate_shared_memory(gl.float16, [SLOTS, BM, BK], a_layout)
    x_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BK, BN], x_desc.layout)
    a_full = gl.allocate_shared_memory(gl.int64, [SLOTS, 1], mbarrier.MBarrierLayout())
    a_empty = gl.allocate_shared_memory(gl.int64, [SLOTS, 1], mbarrier.MBarrierLayout())
    x_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    x_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    z_layout: gl.constexpr = gl.BlockedLayout([BM // (4 * num_warps), 8], [4, 8], [num_warps, 1], [1, 0])
    zeros = gl.zeros((BM, BK), gl.float16, layout=z_layout)
    for s in gl.static_range(SLOTS):
        a_smem.index(s).store(zeros)
        mbarrier.init(a_full.index(s), count=1)
        mbarrier.init(a_empty.index(s), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(x_ready.index(s), count=1)
        mbarrier.init(x_empty.index(s), count=1)
    fence_async_shared()  # these warps' zeroes, before the MMA (async proxy) reads the slots
    gl.thread_barrier()
    steps = gl.cdiv(K_TILES - pid_k, SPLIT_K)
    (acc,) = gl.warp_specialize([
        (_mma_partition, (a_smem, x_smem, a_full, a_empty, x_ready, x_empty, steps, BM, BN, SLOTS, STAGES)),
        (_scatter_partition, (a_smem, a_full, a_empty, tile_ptr, ent_ptr, steps, pid_m, pid_k, K_TILES, BM, BK,
                              SPLIT_K, SLOTS, A_OFFSET, CHUNK, SCATTER_WARPS)),
        (_tma_partition, (x_desc, x_smem, x_ready, x_empty, steps, pid_k, pid_n, SPLIT_K, BK, BN, STAGES)),
    ], [SCATTER_WARPS, 1], [SCATTER_REGS, 24])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BN, 16])
    offs_m = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    offs_n = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    partial_ptrs = partial_ptr + offs_m[:, None].to(gl.int64) * N + offs_n[None, :]
    _finish_tile(acc, y_ptr, y_ptr, partial_ptrs, count_ptr + pid_m * gl.cdiv(N, BN) + pid_n, offs_m, offs_n,
                 M, N, stride_ym, stride_yn, SPLIT_K, False)


def spmm_scatter_ws(a: stuning.CSRMatrix, x: torch.Tensor, cfg: SpMMConfig) -> torch.Tensor:
    """Y = A X with the warp-specialized kernel: fp16, X (K x N) N-contiguous, one warpgroup of 64 rows."""
    bm, bk, bn = cfg.rows, cfg.nnz_step, cfg.block_n
    tiles = ScatterTiles.from_csr(a, bm, bk)
    m, k = tiles.shape
    n = x.shape[1]
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    k_tiles = triton.cdiv(k, bk)
    split = max(1, min(cfg.split_k, k_tiles))
    grid = (triton.cdiv(m, bm), split, triton.cdiv(n, bn))
    partial, counts = split_k_workspace(x.device, m * n, grid[0] * grid[2]) if split > 1 else (out, out)
    a_bytes, x_bytes = SLOTS * bm * bk * 2, cfg.num_stages * bk * bn * 2
    if a_bytes == x_bytes:
        raise ValueError("A's slots and X's stages the same size: Triton's order between them is unknown")
    x_desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [bk, bn], nvmma_layout((bk, bn), x.dtype))
    kernel = _spmm_scatter_ws_kernel[grid](
        tiles.tile_ptr, tiles.entries, x_desc, out, partial, counts, m, n, out.stride(0), out.stride(1), k_tiles,
        BM=bm, BN=bn, BK=bk, SPLIT_K=split, STAGES=cfg.num_stages, SLOTS=SLOTS,
        A_OFFSET=0 if a_bytes > x_bytes else x_bytes, CHUNK=spmm_scatter.chunk_size(tiles, SCATTER_WARPS),
        SCATTER_WARPS=SCATTER_WARPS, SCATTER_REGS=SCATTER_REGS, num_warps=4, maxnreg=MAXNREG,
    )
    used = kernel.metadata.shared
    if not a_bytes + x_bytes <= used <= a_bytes + x_bytes + 1024:
        raise RuntimeError(f"the kernel uses {used} bytes of shared memory, expected {a_bytes + x_bytes} and barriers")
    return out


def configs(n: int):
    """The library probe's configs (``probe_spmm_smem_scatter.configs``: ``PROBE_CONFIGS`` or its grid)
    that this kernel runs: 64-row tiles on one warpgroup, A's slots and X's stages of different sizes."""
    for bm, bk, bn, split_k, stages, warps in scatter_configs(n):
        if bm == 64 and warps == 4 and SLOTS * bm * bk != stages * bk * bn:
            yield bm, bk, bn, split_k, stages


def main() -> int:
    rows = []
    for p in spmm_problems(M, K, NS, SPARSITIES, "cuda", seconds=SECONDS):
        row = {"m": M, "k": K, **spmm_baseline_row(p, False), "ws": {}, "library": {}}
        for bm, bk, bn, split_k, stages in configs(p.n):
            cfg = SpMMConfig(bm, bk, bn, 1, False, 4, stages, "scatter", split_k=split_k)
            label = f"{bm}x{bk}x{bn}:{split_k}:{stages}"
            what = f"n={p.n} {p.sparsity} {label}"
            row["ws"][label] = checked_time_us(functools.partial(spmm_scatter_ws, p.a, p.x, cfg), p.ref, what, checks=2)
            row["library"][label] = checked_time_us(functools.partial(stuning.spmm, p.a, p.x, config=cfg), p.ref,
                                                    what, checks=2)
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_results(rows, "spmm_scatter_ws_probe.json")
    print(f"{'N':>4} {'zeros':>5} {'cuBLAS':>7} {'pick':>7} {'ws':>7} {'config':>14} {'library':>7} {'config':>14} "
          "ws vs cuBLAS failed")
    for r in rows:
        best, bt, failures = best_checked(r["ws"])
        lib, lt, _ = best_checked(r["library"])
        print(f"{r['n']:>4} {r['sparsity']:>5} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {bt:>7.1f} {best:>14} "
              f"{lt:>7.1f} {lib:>14} {r['cublas_us'] / bt:>8.2f}x {len(failures)}")
        for failure in failures[:3]:
            print("   ", failure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
