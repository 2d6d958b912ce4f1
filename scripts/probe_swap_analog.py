"""Dense analogs of the scatter kernel's step, the way it runs today and with its operands swapped.

BENCHMARKS.md 8t: the scatter kernel's time per step hardly moves with the entries it scatters
(4096 x 4096, N = 128, its pick 64x128x128 on two splits: 15.0 / 14.2 / 13.8 us at 90 / 95 / 98%
zeros, 820 / 410 / 164 entries a tile), so what a step costs is its fixed path: X's tile through
shared memory (TMA writes it, the MMA reads it) and the MMA. These kernels keep that path and drop
the scatter: A's (BM x BK) tile comes by TMA from a small matrix every band shares (so it stays in
L2, as a scattered tile costs no DRAM), and the grid, steps and splits are the scatter kernel's.

- ``ax``: today's step. A's tile and X's (BK x N) tile by TMA into shared memory, STAGES deep; one
  warpgroup's MMA reads both from there (A as its A operand, X as its B operand).
- ``ax-xonce`` / ``ax-aonce``: ``ax`` with X's (or A's) stages filled once before the loop and
  read again every step: the same MMAs and shared-memory reads, that operand's L2 traffic gone.
- ``ax128``: ``ax`` on 128-row tiles (two warpgroups, one X tile): half X's traffic a row.
- ``axh``: ``ax`` with the scatter kernel's split-K hand-off (``_finish_tile``: the first split's
  slice through L2, the last split sums in order), as the library runs two splits.
- ``xta``: swapped, Y^T = X^T A^T. A's tile by TMA as before, now the MMA's B operand (a permuted
  view); X^T (N x BK, K contiguous: a layer's input) by ``gl.load`` from L2 straight into the
  registers of the MMA's A operand, a step ahead; no shared memory for X. ``num_warps`` 8 splits
  N between two warpgroups that read the same A tile.

Each split writes its partial product into a slice of its own (no hand-off, except ``axh``: the loop
alone is timed), and the product is checked against float64 (not ``ax-xonce`` / ``ax-aonce``, which
multiply the wrong tiles on purpose). Cold-L2 CUDA-graph medians, a table last:

    python3 scripts/probe_swap_analog.py          # on an sm_90 GPU with Triton 3.6
    PROBE_SHAPES=4096x4096,11008x4096 PROBE_SPLITS=2 PROBE_KINDS=ax:4,xta:4,xta:8 python3 scripts/probe_swap_analog.py
"""

from __future__ import annotations

import dataclasses
import itertools
import os

import torch
from probe_harness import check_close, probe_time_us, write_results
from stuning.kernels.semi24_hopper import _finish_tile, nvmma_layout
from stuning.kernels.split_k import split_k_workspace
from stuning.kernels.split_k_cluster import (
    cluster_rank,
    exchange_parts,
    exchange_ready,
    landing_barrier,
    replicated,
    store_rows,
)
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

A_ROWS = 256  # rows of the shared A: 2 MB at K = 4096, resident in L2


@gluon.jit
def _ax_load(a_desc, x_desc, bars, a_smem, x_smem, step, steps, a_row, pid_k, SPLIT_K: gl.constexpr, BM: gl.constexpr,
             BK: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, FIXED: gl.constexpr):
    """Step ``step``'s tiles into its stage; FIXED 1 (X) or 2 (A): that operand's stages were filled
    once before the loop and are read again every step (what its traffic from L2 costs)."""
    stage = step % STAGES
    k0 = (pid_k + step * SPLIT_K) * BK
    nbytes: gl.constexpr = (BM * BK * 2 if FIXED != 2 else 0) + (BN * BK * 2 if FIXED != 1 else 0)
    mbarrier.expect(bars.index(stage), nbytes, pred=step < steps)
    if FIXED != 2:
        tma.async_copy_global_to_shared(a_desc, [a_row, k0], bars.index(stage), a_smem.index(stage), pred=step < steps)
    if FIXED != 1:
        tma.async_copy_global_to_shared(x_desc, [k0, 0], bars.index(stage), x_smem.index(stage), pred=step < steps)


@gluon.jit
def _ax_steps(a_desc, x_desc, bars, a_smem, x_smem, acc, steps, a_row, pid_k, SPLIT_K: gl.constexpr,
              BM: gl.constexpr, BK: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, FIXED: gl.constexpr):
    """The pipeline: STAGES - 1 steps ahead, the MMA of each step left in flight over the next."""
    for s in gl.static_range(STAGES - 1):
        _ax_load(a_desc, x_desc, bars, a_smem, x_smem, s, steps, a_row, pid_k, SPLIT_K, BM, BK, BN, STAGES, FIXED)
    for i in range(steps):
        stage = i % STAGES
        mbarrier.wait(bars.index(stage), (i // STAGES) & 1)
        acc = warpgroup_mma(a_smem.index(stage), x_smem.index(stage), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        # Step i - 1's MMA is done: its stage takes step i + STAGES - 1.
        _ax_load(a_desc, x_desc, bars, a_smem, x_smem, i + STAGES - 1, steps, a_row, pid_k, SPLIT_K, BM, BK, BN,
                 STAGES, FIXED)
    return warpgroup_mma_wait(num_outstanding=0, deps=(acc,))


@gluon.jit
def _ax_kernel(a_desc, x_desc, y_ptr, out_ptr, count_ptr, M, N, K_TILES, A_ROWS, SPLIT_K: gl.constexpr,
               BM: gl.constexpr, BK: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, FIXED: gl.constexpr,
               HANDOFF: gl.constexpr, num_warps: gl.constexpr):
    pid_m = gl.program_id(0)
    pid_k = gl.program_id(1)
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BN, 16])
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    x_smem = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BK, BN], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    once = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    mbarrier.init(once, count=1)
    steps = gl.cdiv(K_TILES - pid_k, SPLIT_K)
    a_row = (pid_m * BM) % A_ROWS
    if FIXED != 0:
        mbarrier.expect(once, STAGES * (BN if FIXED == 1 else BM) * BK * 2)
        for s in gl.static_range(STAGES):
            if FIXED == 1:
                tma.async_copy_global_to_shared(x_desc, [s * BK, 0], once, x_smem.index(s))
            else:
                tma.async_copy_global_to_shared(a_desc, [a_row, s * BK], once, a_smem.index(s))
        mbarrier.wait(once, 0)
    acc = gl.zeros((BM, BN), gl.float32, acc_layout)
    acc = _ax_steps(a_desc, x_desc, bars, a_smem, x_smem, acc, steps, a_row, pid_k, SPLIT_K, BM, BK, BN, STAGES, FIXED)
    offs_m = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    offs_n = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    ptrs = y_ptr + pid_k * M * N + offs_m[:, None] * N + offs_n[None, :]
    if HANDOFF:
        # The scatter kernel's hand-off: the first split's slice through L2, the last one sums in order.
        _finish_tile(acc, out_ptr, out_ptr, ptrs - pid_k * M * N, count_ptr + pid_m, offs_m, offs_n, M, N, N, 1,
                     SPLIT_K, False, pid_k, M * N, True, ORDERED=True)
    else:
        gl.store(ptrs, acc)


@gluon.jit
def _axb_kernel(a_desc, x_desc, y_ptr, M, N, K_TILES, A_ROWS, BM: gl.constexpr, BK: gl.constexpr, BN: gl.constexpr,
                STAGES: gl.constexpr, EARLY: gl.constexpr, PAIRS: gl.constexpr, num_warps: gl.constexpr):
    """``ax`` on two splits as a cluster of two CTAs (``num_ctas=2``), the hand-off by
    ``split_k_cluster.exchange_parts``: each rank sums and writes half the tile's rows. The other's
    half lands in X's stages, the mbarrier initialised after the loop; EARLY: in one more stage of
    X's, the mbarrier (one more of ``bars``) initialised and the cluster arrive before the loop.
    PAIRS: Y stored 32 bits at a time, else 16."""
    pid_m = gl.program_id(0)  # the cluster's id: one band
    pid_k = cluster_rank(num_warps, 2)
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BN, 16], cga_layout=replicated(2, 2).value)
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    x_smem = gl.allocate_shared_memory(x_desc.dtype, [STAGES + EARLY, BK, BN], x_desc.layout)
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout(cga_layout=replicated(1, 2).value)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES + EARLY, 1], bar_layout)
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    # Triton puts the larger of A's and X's buffers first (the scatter kernel's A_OFFSET), then the barriers.
    A_BYTES: gl.constexpr = STAGES * BM * BK * 2
    X_BYTES: gl.constexpr = (STAGES + EARLY) * BK * BN * 2
    X_OFFSET: gl.constexpr = 0 if X_BYTES > A_BYTES else A_BYTES
    if EARLY:
        exchange_ready(bars.index(STAGES), num_warps, 2)
    steps = gl.cdiv(K_TILES - pid_k, 2)
    a_row = (pid_m * BM) % A_ROWS
    acc = gl.zeros((BM, BN), gl.float32, acc_layout)
    acc = _ax_steps(a_desc, x_desc, bars, a_smem, x_smem, acc, steps, a_row, pid_k, 2, BM, BK, BN, STAGES, 0)
    if EARLY:
        acc, mine = exchange_parts(acc, bars.index(STAGES), pid_k, X_OFFSET + STAGES * BK * BN * 2,
                                    A_BYTES + X_BYTES + STAGES * 8, BM, BN, num_warps, 2)
    else:
        bar = landing_barrier(x_smem, X_BYTES, BM, BN, 2)
        exchange_ready(bar, num_warps, 2)
        acc, mine = exchange_parts(acc, bar, pid_k, X_OFFSET, X_OFFSET + BM * BN * 2, BM, BN, num_warps, 2)
    rows = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    offs_n = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    store_rows(y_ptr + rows[:, None] * N + offs_n[None, :], acc.to(y_ptr.dtype.element_ty), mine, PAIRS)


@gluon.jit
def _xta_kernel(a_desc, xt_ptr, y_ptr, M, N, K_TILES, A_ROWS, stride_xn, SPLIT_K: gl.constexpr, BM: gl.constexpr,
                BK: gl.constexpr, NX: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
    pid_m = gl.program_id(0)
    pid_k = gl.program_id(1)
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BM, 16])
    xt_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    steps = gl.cdiv(K_TILES - pid_k, SPLIT_K)
    a_row = (pid_m * BM) % A_ROWS
    for s in gl.static_range(STAGES - 1):
        mbarrier.expect(bars.index(s), BM * BK * 2, pred=s < steps)
        tma.async_copy_global_to_shared(a_desc, [a_row, (pid_k + s * SPLIT_K) * BK], bars.index(s), a_smem.index(s),
                                        pred=s < steps)
    offs_n = gl.arange(0, NX, layout=gl.SliceLayout(1, xt_layout))
    offs_k = gl.arange(0, BK, layout=gl.SliceLayout(0, xt_layout))
    xt_ptrs = xt_ptr + offs_n[:, None] * stride_xn + offs_k[None, :]
    last_k = (K_TILES - 1) * BK
    xt = gl.load(xt_ptrs + pid_k * BK)
    acc = gl.zeros((NX, BM), gl.float32, acc_layout)
    for i in range(steps):
        stage = i % STAGES
        # X^T for the next step, clamped to the last tile (a load past it would fault); unused then.
        xt_next = gl.load(xt_ptrs + gl.minimum((pid_k + (i + 1) * SPLIT_K) * BK, last_k))
        mbarrier.wait(bars.index(stage), (i // STAGES) & 1)
        acc = warpgroup_mma(xt, a_smem.index(stage).permute((1, 0)), acc, is_async=True)
        # X^T's registers are the MMA's operand until it completes.
        acc, xt = warpgroup_mma_wait(num_outstanding=0, deps=(acc, xt))
        # The refill below takes stage (i - 1) % STAGES: every warpgroup's MMA of step i - 1 has read it.
        gl.thread_barrier()
        nxt = i + STAGES - 1
        ns = nxt % STAGES
        mbarrier.expect(bars.index(ns), BM * BK * 2, pred=nxt < steps)
        tma.async_copy_global_to_shared(a_desc, [a_row, (pid_k + nxt * SPLIT_K) * BK], bars.index(ns),
                                        a_smem.index(ns), pred=nxt < steps)
        xt = xt_next
    offs_yn = gl.arange(0, NX, layout=gl.SliceLayout(1, acc_layout))
    offs_ym = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(0, acc_layout))
    ptrs = y_ptr + pid_k * M * N + offs_ym[None, :] * N + offs_yn[:, None]
    gl.store(ptrs, acc)


def run_kind(kind: str, warps: int, a: torch.Tensor, x: torch.Tensor, m: int, split: int, stages: int,
             bm: int = 64, bk: int = 128, fixed: int = 0):
    """A callable that launches one analog, and one that returns its product (fp32, M x N)."""
    k, n = x.shape
    y = torch.empty(split, m, n, dtype=torch.float32, device=x.device)
    a_desc = TensorDescriptor(a, list(a.shape), list(a.stride()), [bm, bk], nvmma_layout((bm, bk), a.dtype))
    grid = (m // bm, split)
    if kind in ("axb", "axe", "axb2", "axe2"):
        return _run_axb(warps, a, x, m, stages, bm, bk, kind.startswith("axe"), kind.endswith("2"))
    if kind.startswith("ax"):
        x_desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [bk, n], nvmma_layout((bk, n), x.dtype))
        handoff = kind == "axh"
        out = torch.full((m, n), float("nan"), dtype=x.dtype, device=x.device)  # no stale product passes
        partial, counts = split_k_workspace(x.device, split * m * n, m // bm, zeroed=False)

        def launch():
            _ax_kernel[grid](a_desc, x_desc, partial if handoff else y, out, counts, m, n, k // bk, A_ROWS,
                             SPLIT_K=split, BM=bm, BK=bk, BN=n, STAGES=stages, FIXED=fixed, HANDOFF=handoff,
                             num_warps=warps)
        return launch, (lambda: out.float()) if handoff else (lambda: y.sum(0))
    xt = x.t().contiguous()

    def launch():
        _xta_kernel[grid](a_desc, xt, y, m, n, k // bk, A_ROWS, xt.stride(0), SPLIT_K=split, BM=bm, BK=bk, NX=n,
                          STAGES=stages, num_warps=warps)
    return launch, lambda: y.sum(0)


def _run_axb(warps: int, a: torch.Tensor, x: torch.Tensor, m: int, stages: int, bm: int, bk: int, early: bool,
             pairs: bool):
    """``axb``: the descriptors' layouts replicated over the cluster's two CTAs (each holds its tiles)."""
    k, n = x.shape

    def desc(t, block):
        # get_default_for(..., cga_layout=) sizes the swizzle for half the block: the plain one, replicated.
        layout = dataclasses.replace(nvmma_layout(tuple(block), t.dtype), cga_layout=[[0, 0]])
        return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)

    a_desc, x_desc = desc(a, [bm, bk]), desc(x, [bk, n])
    out = torch.full((m, n), float("nan"), dtype=x.dtype, device=x.device)  # no stale product passes

    def launch():
        _axb_kernel[(m // bm,)](a_desc, x_desc, out, m, n, k // bk, A_ROWS, BM=bm, BK=bk, BN=n, STAGES=stages,
                                EARLY=early, PAIRS=pairs, num_warps=warps, num_ctas=2)
    return launch, lambda: out.float()


def main() -> None:
    shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("PROBE_SHAPES", "4096x4096").split(",")]
    splits = [int(v) for v in os.environ.get("PROBE_SPLITS", "2").split(",")]
    kinds = [(s.split(":")[0], int(s.split(":")[1]))
             for s in os.environ.get("PROBE_KINDS", "ax:4,xta:4,xta:8").split(",")]
    stages_list = [int(v) for v in os.environ.get("PROBE_STAGES", "3,4").split(",")]
    n = int(os.environ.get("PROBE_N", "128"))
    gen = torch.Generator().manual_seed(0)
    rows = []
    for (m, k), split in itertools.product(shapes, splits):
        a = torch.randn(A_ROWS, k, generator=gen).half().cuda()
        x = torch.randn(k, n, generator=gen).half().cuda()
        ref = a.double()[torch.arange(m) % A_ROWS] @ x.double()
        dense_w = a[torch.arange(m, device="cuda") % A_ROWS].contiguous()
        cublas_us = probe_time_us(lambda w=dense_w, x=x: w @ x, False)
        for (kind, warps), stages in itertools.product(kinds, stages_list):
            label = f"{kind}:{warps}w:{stages}st"
            try:
                fixed = {"ax-xonce": 1, "ax-aonce": 2}.get(kind, 0)
                bm = 128 if kind == "ax128" else 64
                launch, product = run_kind(kind, warps, a, x, m, split, stages, bm=bm, fixed=fixed)
                launch()
                if not fixed:  # the others multiply the wrong tiles on purpose: a cost, not a product
                    check_close(product(), ref, f"{m}x{k} {label}")
                us = probe_time_us(launch, False)
            except Exception as e:  # noqa: BLE001 - a config that fails to compile or check is a result
                us, err = float("nan"), f"{type(e).__name__}: {str(e)[:200]}"
                print(f"{m}x{k} split {split} {label}: {err}", flush=True)
            rows.append({"m": m, "k": k, "n": n, "split": split, "kind": label, "us": us, "cublas_us": cublas_us})
            write_results(rows, "swap-analog.json")
    print(f"{'shape':>11} {'split':>5} {'analog':>14} {'us':>7} {'cuBLAS':>7}")
    for r in rows:
        print(f"{r['m']}x{r['k']:<6} {r['split']:>5} {r['kind']:>14} {r['us']:>7.2f} {r['cublas_us']:>7.2f}")


if __name__ == "__main__":
    main()
