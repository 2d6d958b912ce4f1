"""Where a scatter SpMM step's time goes: the library kernel's loop (before its entries' ring, 7z)
with its parts switched off.

BENCHMARKS.md 7y measured 0.61 us a program step at N = 128 (64 x 128 x 128 tiles), 2.3x what the
MMA alone would take at the tensor cores' peak, and 7r found two programs an SM taking twice as
long as one. This probe copies ``kernels/spmm_scatter.py``'s kernel with a constexpr per part
(the entries' loads, their stores into the A slot, the zeroing of a used slot, X's TMA loads, the
MMA) and times each subset, so the part whose removal frees the most time is the one to redesign.
With a part off the result is wrong, so nothing is checked here except the full kernel, against
float64; the library's own launch is timed beside it.

    PROBE_PARTS="full;MMA only" PROBE_CONFIGS=64x128x128:2:3,64x128x128:1:3 python3 scripts/probe_spmm_scatter_parts.py
"""

from __future__ import annotations

import functools
import json
import os

import torch
import triton
from probe_harness import check_close, probe_time_us, random_problem, write_results
from stuning.kernels import spmm_scatter as lib
from stuning.kernels.semi24_hopper import _finish_tile, nvmma_layout
from stuning.kernels.split_k import split_k_workspace
from stuning.kernels.spmm import SpMMConfig
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

import stuning
from stuning.formats.scatter import ScatterTiles

M, K = (int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
N = int(os.environ.get("PROBE_N", "128"))
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9").split(",")]
CONFIGS = os.environ.get("PROBE_CONFIGS", "64x128x128:2:3,64x128x128:1:3,64x128x128:4:2")
# name: (ENTRIES, SCATTER, ZERO, XLOAD, MMA, AHEAD, HOT[, PREFETCH]): entries loaded AHEAD (2 as in the
# library, or 4) steps before their scatter; HOT: every step's entries those of the program's first
# tile; PREFETCH: entries asked of L2 that many steps ahead (no register written).
PARTS = {
    "full": (1, 1, 1, 1, 1, 2, 0),
    "no scatter": (1, 0, 1, 1, 1, 2, 0),
    "no zeroing": (1, 1, 0, 1, 1, 2, 0),
    "no scatter, no zeroing": (1, 0, 0, 1, 1, 2, 0),
    "no X loads": (1, 1, 1, 0, 1, 2, 0),
    "no MMA": (1, 1, 1, 1, 0, 2, 0),
    "MMA + X only": (0, 0, 0, 1, 1, 2, 0),
    "MMA only": (0, 0, 0, 0, 1, 2, 0),
    "scatter + zeroing only": (1, 1, 1, 0, 0, 2, 0),
    "X loads only": (0, 0, 0, 1, 0, 2, 0),
    "empty loop": (0, 0, 0, 0, 0, 2, 0),
    "full, hot entries": (1, 1, 1, 1, 1, 2, 1),
    "scatter + zeroing, hot": (1, 1, 1, 0, 0, 2, 1),
    "full, 4 ahead": (1, 1, 1, 1, 1, 4, 0),
    "scatter + zeroing, 4 ahead": (1, 1, 1, 0, 0, 4, 0),
    "full, L2 prefetch 4": (1, 1, 1, 1, 1, 2, 0, 4),
    "full, L2 prefetch 8": (1, 1, 1, 1, 1, 2, 0, 8),
    "scatter + zeroing, L2 prefetch 4": (1, 1, 1, 0, 0, 2, 0, 4),
    "scatter + zeroing, L2 prefetch 8": (1, 1, 1, 0, 0, 2, 0, 8),
}
if os.environ.get("PROBE_PARTS"):
    PARTS = {name: PARTS[name] for name in os.environ["PROBE_PARTS"].split(";")}


@gluon.jit
def _first_entries(ent_ptr, start, end, e_layout: gl.constexpr, CHUNK: gl.constexpr):
    """A tile's first CHUNK entries into registers: how the kernel loaded them before its ring."""
    idx = start + gl.arange(0, CHUNK, layout=e_layout)
    return gl.load(ent_ptr + idx, mask=idx < end, other=0)


@gluon.jit
def _bounds(row_tiles, j, steps, SPLIT_K: gl.constexpr, HOT: gl.constexpr):
    """Entries [start, end) of the program's tile j; with HOT, of its first tile whatever j (so that
    every step's entries come from L2, not DRAM)."""
    tile = row_tiles if HOT else row_tiles + j * SPLIT_K
    return 4 * gl.load(tile, mask=j < steps, other=0), 4 * gl.load(tile + 1, mask=j < steps, other=0)


@gluon.jit
def _parts_kernel(
    tile_ptr, ent_ptr, x_desc, y_ptr, bias_ptr, partial_ptr, count_ptr,
    M, N, stride_ym, stride_yn, K_TILES,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr,
    SLOTS: gl.constexpr, A_OFFSET: gl.constexpr, CHUNK: gl.constexpr, SLICES: gl.constexpr,
    ENTRIES: gl.constexpr, SCATTER: gl.constexpr, ZERO: gl.constexpr, XLOAD: gl.constexpr, MMA: gl.constexpr,
    AHEAD: gl.constexpr, HOT: gl.constexpr, PREFETCH: gl.constexpr,
    num_warps: gl.constexpr,
):
    DT: gl.constexpr = x_desc.dtype
    A_BYTES: gl.constexpr = BM * BK * 2
    VEC: gl.constexpr = min(4, CHUNK // (32 * num_warps))
    e_layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [num_warps], [0])
    z_layout: gl.constexpr = gl.BlockedLayout([BM // (4 * num_warps), 8], [4, 8], [num_warps, 1], [1, 0])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BN, 16])
    a_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    LAG: gl.constexpr = 1 if num_warps == 4 else 2

    pid_m = gl.program_id(0)
    pid_k = gl.program_id(1)
    pid_n = gl.program_id(2)
    a_smem = gl.allocate_shared_memory(DT, [SLOTS, BM, BK], a_layout)
    x_smem = gl.allocate_shared_memory(DT, [STAGES, BK, BN], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    zeros = gl.zeros((BM, BK), DT, layout=z_layout)
    for s in gl.static_range(SLOTS):
        a_smem.index(s).store(zeros)
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    steps = gl.cdiv(K_TILES - pid_k, SPLIT_K)
    if XLOAD:
        for s in gl.static_range(STAGES - LAG):
            lib._load_x(x_desc, bars, x_smem, s, pid_k, pid_n, steps, SPLIT_K, BK, BN, STAGES, False)

    row_tiles = tile_ptr + pid_m * K_TILES + pid_k
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
    s0, e0 = _bounds(row_tiles, 0, steps, SPLIT_K, HOT)
    s1, e1 = _bounds(row_tiles, 1, steps, SPLIT_K, HOT)
    s2, e2 = _bounds(row_tiles, 2, steps, SPLIT_K, HOT)
    q0 = _first_entries(ent_ptr, s0, e0, e_layout, CHUNK)
    q1 = _first_entries(ent_ptr, s1, e1, e_layout, CHUNK)
    if AHEAD == 4:
        s3, e3 = _bounds(row_tiles, 3, steps, SPLIT_K, HOT)
        s4, e4 = _bounds(row_tiles, 4, steps, SPLIT_K, HOT)
        q2 = _first_entries(ent_ptr, s2, e2, e_layout, CHUNK)
        q3 = _first_entries(ent_ptr, s3, e3, e_layout, CHUNK)
    if PREFETCH > 0:
        for j in gl.static_range(2, PREFETCH):
            js, je = _bounds(row_tiles, j, steps, SPLIT_K, HOT)
            lib._prefetch_l2(ent_ptr, js, je, num_warps)
    gl.thread_barrier()
    for i in range(steps):
        if ENTRIES:
            if PREFETCH > 0:
                ps, pe = _bounds(row_tiles, i + PREFETCH, steps, SPLIT_K, HOT)
            # Entries load AHEAD steps before their scatter, a tile's bounds one step before that.
            if AHEAD == 4:
                s5, e5 = _bounds(row_tiles, i + 5, steps, SPLIT_K, HOT)
                q4 = _first_entries(ent_ptr, s4, e4, e_layout, CHUNK)
            else:
                s3, e3 = _bounds(row_tiles, i + 3, steps, SPLIT_K, HOT)
                q2 = _first_entries(ent_ptr, s2, e2, e_layout, CHUNK)
            if SCATTER:
                lib._scatter(q0, ent_ptr, s0, e0, A_OFFSET + (i % SLOTS) * A_BYTES, e_layout, CHUNK)
            else:  # the same entries loaded and the stores issued, every one predicated off
                lib._store_entries(q0, q0 != q0, A_OFFSET + (i % SLOTS) * A_BYTES)
            if PREFETCH > 0:
                lib._prefetch_l2(ent_ptr, ps, pe, num_warps)
            q0 = q1
            q1 = q2
            s0, e0 = s1, e1
            s1, e1 = s2, e2
            s2, e2 = s3, e3
            if AHEAD == 4:
                q2 = q3
                q3 = q4
                s3, e3 = s4, e4
                s4, e4 = s5, e5
        if XLOAD:
            mbarrier.wait(bars.index(i % STAGES), (i // STAGES) & 1)
        fence_async_shared()
        gl.thread_barrier()
        if MMA:
            acc = warpgroup_mma(a_smem.index(i % SLOTS), x_smem.index(i % STAGES), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        if ZERO:
            a_smem.index((i + SLOTS - 1) % SLOTS).store(zeros)
        if XLOAD:
            lib._load_x(x_desc, bars, x_smem, i + STAGES - LAG, pid_k, pid_n, steps, SPLIT_K, BK, BN, STAGES, False)
    if MMA:
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))

    offs_m = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    offs_n = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    partial_ptrs = partial_ptr + offs_m[:, None].to(gl.int64) * N + offs_n[None, :]
    _finish_tile(acc, y_ptr, bias_ptr, partial_ptrs, count_ptr + pid_m * gl.cdiv(N, BN) + pid_n, offs_m, offs_n,
                 M, N, stride_ym, stride_yn, SPLIT_K, False, pid_k, M * N, SLICES)


def launch(tiles: ScatterTiles, b: torch.Tensor, out: torch.Tensor, bn: int, split: int, stages: int,
           parts: tuple) -> torch.Tensor:
    """The library launcher's steps (``spmm_scatter.spmm_scatter``) for X row-major, no bias."""
    m, k = tiles.shape
    n = b.shape[1]
    bm, bk = tiles.block_m, tiles.block_k
    k_tiles = triton.cdiv(k, bk)
    grid = (triton.cdiv(m, bm), split, triton.cdiv(n, bn))
    slices = 1 < split <= lib.SLICES_MAX_SPLIT
    if split > 1:
        partial, counts = split_k_workspace(b.device, (split if slices else 1) * m * n, grid[0] * grid[2],
                                            zeroed=not slices)
    else:
        partial, counts = out, out
    # The kernel before its ring (BENCHMARKS.md 7z): three A slots, a fourth where A and X tie.
    a_bytes, x_bytes = 3 * bm * bk * 2, stages * bk * bn * 2
    slots = 3 + (a_bytes == x_bytes)
    a_bytes = slots * bm * bk * 2
    x_desc = TensorDescriptor(b, list(b.shape), list(b.stride()), [bk, bn], nvmma_layout((bk, bn), b.dtype))
    _parts_kernel[grid](
        tiles.tile_ptr, tiles.entries, x_desc, out, b, partial, counts, m, n, out.stride(0), out.stride(1), k_tiles,
        BM=bm, BN=bn, BK=bk, SPLIT_K=split, STAGES=stages, SLOTS=slots,
        # With neither X's loads nor the MMA, X's stages are not allocated and A's slots come first.
        A_OFFSET=0 if a_bytes > x_bytes or not (parts[3] or parts[4]) else x_bytes,
        CHUNK=lib.chunk_size(tiles, 4 * bm // 64), SLICES=slices,
        ENTRIES=parts[0], SCATTER=parts[1], ZERO=parts[2], XLOAD=parts[3], MMA=parts[4], AHEAD=parts[5], HOT=parts[6],
        PREFETCH=parts[7] if len(parts) > 7 else 0,
        num_warps=4 * bm // 64,
    )
    return out


def main() -> int:
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for sparsity in SPARSITIES:
        w, x, ref = random_problem(M, K, N, sparsity, gen, "cuda")
        a = stuning.CSRMatrix.from_dense(w, pad_to=4)
        dense_us = probe_time_us(functools.partial(torch.matmul, w, x), False)
        for text in CONFIGS.split(","):
            tiles_text, split, stages = text.split(":")
            bm, bk, bn = (int(v) for v in tiles_text.split("x"))
            split, stages = int(split), int(stages)
            tiles = ScatterTiles.from_csr(a, bm, bk)
            out = torch.empty(M, N, dtype=x.dtype, device="cuda")
            row = {"m": M, "k": K, "n": N, "sparsity": sparsity, "config": text, "cublas_us": dense_us}
            cfg = SpMMConfig(bm, bk, bn, 1, False, 4 * bm // 64, stages, "scatter", split_k=split)
            library = functools.partial(stuning.spmm, a, x, config=cfg)
            check_close(library(), ref, f"library {text}")
            row["library"] = probe_time_us(library, False)
            for name, parts in PARTS.items():
                run = functools.partial(launch, tiles, x, out, bn, split, stages, parts)
                if parts[:5] == (1, 1, 1, 1, 1) and not parts[6]:
                    check_close(run(), ref, f"probe copy {text}, {name}")
                row[name] = probe_time_us(run, False)
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_results(rows, "spmm_scatter_parts.json")
    names = ["library", *PARTS]
    print(f"{'zeros':>5} {'config':>16} {'cuBLAS':>6} " + " ".join(f"{n[:12]:>12}" for n in names))
    for r in rows:
        print(f"{r['sparsity']:>5} {r['config']:>16} {r['cublas_us']:>6.1f} "
              + " ".join(f"{r[n]:>12.1f}" for n in names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
