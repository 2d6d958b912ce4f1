"""Sweep the scatter SpMM kernel's configs (``stuning.kernels.spmm_scatter``) against cuBLAS and the
library's pick, on 4096 x 4096 fp16 with uniform random rows.

This began as the probe that found the kernel (BENCHMARKS.md 7r): a Gluon kernel that stores A's
tiles into shared memory with one line of PTX and multiplies them on the tensor cores. Its copy of
the kernel grew, call by call, into ``kernels/spmm_scatter.py`` (commit 71a371e has the probe's last
own version); it now times the library's kernel, so that it measures what users run.

Every config is checked against a float64 reference twice before it is timed (CUDA graphs, L2
flushed); a failure is recorded with its error, not raised.

    python3 scripts/probe_spmm_smem_scatter.py       # $OUT/spmm_smem_scatter_probe.json, a table last
    PROBE_NS=128 PROBE_SPARSITIES=0.9 PROBE_CONFIGS=64x128x128:4:2 python3 scripts/probe_spmm_smem_scatter.py
    PROBE_NS=2048 PROBE_SPLITS=1,2 python3 scripts/probe_spmm_smem_scatter.py
    PROBE_LAYOUTS=fixed,listed ...   # each config with A's lists of one capacity, then of their own
    PROBE_MORE_STAGES=5 PROBE_CONFIGS=64x128x128:2:5 ...   # X stages the library's space lacks
    PROBE_CLUSTER4=always,never PROBE_SHAPE=3072x4096 ...   # four splits as a cluster or through L2
"""

from __future__ import annotations

import functools
import itertools
import json
import os

import triton
from probe_harness import best_checked, checked_time_us, spmm_baseline_row, spmm_problems, write_results
from stuning.kernels import spmm_scatter
from stuning.kernels.spmm import SpMMConfig

import stuning
from stuning.formats import capacity as capacity_format
from stuning.formats.scatter import ScatterTiles

NS = [int(v) for v in os.environ.get("PROBE_NS", "16,64,128,256").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
M, K = (int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
SECONDS = float(os.environ.get("PROBE_SECONDS", "400"))
# PROBE_CLEAR=0: used A slots zeroed whole, not where their entries were stored (BENCHMARKS.md 7z).
spmm_scatter.CLEAR_BY_ENTRIES = os.environ.get("PROBE_CLEAR", "1") == "1"
# PROBE_SLICES_MAX: the most splits that meet in slices (more add atomically).
spmm_scatter.SLICES_MAX_SPLIT = int(os.environ.get("PROBE_SLICES_MAX", spmm_scatter.SLICES_MAX_SPLIT))
# PROBE_CLUSTER=0: two splits meet through L2 (slices), not as a cluster of two CTAs (BENCHMARKS.md 8u).
spmm_scatter.CLUSTER_SPLIT = os.environ.get("PROBE_CLUSTER", "1") == "1"
# PROBE_CLUSTER4: time each config with four splits as a cluster of four wherever X's stages take the
# parts ("always"), through L2 ("never"), by the library's rule (``cluster_ctas``: "rule", as unset), or
# several of these.
CLUSTER4 = [v for v in os.environ.get("PROBE_CLUSTER4", "").split(",") if v]
_library_cluster_ctas = spmm_scatter.cluster_ctas


def cluster_ctas_as(mode: str):
    """``spmm_scatter.cluster_ctas`` with four splits' choice forced by ``mode`` ("" or "rule": not)."""
    def decide(split, block_m, block_k, block_n, stages, tiles, sm_count):
        if split != 4 or mode in ("", "rule"):
            return _library_cluster_ctas(split, block_m, block_k, block_n, stages, tiles, sm_count)
        x_bytes = spmm_scatter.buffer_bytes(block_m, block_k, block_n, stages)[2]
        fits = spmm_scatter.landing_fits(block_m, block_n, x_bytes, 4)
        return 4 if mode == "always" and spmm_scatter.CLUSTER_SPLIT and fits else 1
    return decide


# PROBE_LAYOUTS: time each config on A's lists padded to one capacity ("fixed": bounds computed), on
# lists of their own lengths ("listed": bounds read from tile_ptr), or both; unset, the library's choice.
LAYOUTS = [v for v in os.environ.get("PROBE_LAYOUTS", "").split(",") if v]
# PROBE_MORE_STAGES: X stages to allow beyond the library's STAGES (e.g. 5,6), where shared memory has room.
for _more in (int(v) for v in os.environ.get("PROBE_MORE_STAGES", "").split(",") if v):
    spmm_scatter.STAGES = {bm: tuple(sorted({*stages, _more})) for bm, stages in spmm_scatter.STAGES.items()}


def use_layout(a, bm: int, bk: int, layout: str) -> None:
    """Put the ``layout`` tiles of ``a`` where the launcher finds them (built once per layout)."""
    key = ("probe", layout, bm, bk)
    if key not in a.cache:
        a.cache.pop(ScatterTiles.cache_key(bm, bk), None)
        saved = capacity_format.FIXED_CAPACITY_SLACK
        capacity_format.FIXED_CAPACITY_SLACK = float("inf") if layout == "fixed" else 0.0
        try:
            a.cache[key] = ScatterTiles.from_csr(a, bm, bk)
        finally:
            capacity_format.FIXED_CAPACITY_SLACK = saved
    a.cache[ScatterTiles.cache_key(bm, bk)] = a.cache[key]


def configs(n: int):
    """``PROBE_CONFIGS`` (BMxBKxBN:SPLIT:STAGES[:WARPS], comma-separated; a warpgroup per 64 rows
    unless WARPS says), else a grid wider than the library's space (256-row tiles too, and 128-row
    tiles on one warpgroup), for the splits in ``PROBE_SPLITS``: (bm, bk, bn, split, stages, warps)."""
    wanted = os.environ.get("PROBE_CONFIGS")
    if wanted:
        for text in wanted.split(","):
            tiles, split_k, stages, *warps = text.split(":")
            bm, bk, bn = (int(v) for v in tiles.split("x"))
            yield (bm, bk, min(bn, max(16, triton.next_power_of_2(n))), int(split_k), int(stages),
                   int(warps[0]) if warps else 4 * bm // 64)
        return
    splits = [int(v) for v in os.environ.get("PROBE_SPLITS", "1,2,4,8").split(",")]
    for bm, bk, bn, split_k, stages in itertools.product((64, 128, 256), (64, 128), spmm_scatter.block_ns(n),
                                                         splits, (2, 3, 4)):
        for warps in (8, 4) if bm == 128 and bn <= 128 else (4 * bm // 64,):
            # More than one warpgroup: X's stages lag two steps, so two stages would not prefetch.
            if (warps > 4 and stages == 2) or (warps == 4 and stages == 4):
                continue
            _, a_bytes, x_bytes = spmm_scatter.buffer_bytes(bm, bk, bn, stages)
            if a_bytes + x_bytes > 227 * 1024:
                continue
            yield bm, bk, bn, split_k, stages, warps


def main() -> int:
    rows = []
    for p in spmm_problems(M, K, NS, SPARSITIES, "cuda", seconds=SECONDS):
        row = {"m": M, "k": K, **spmm_baseline_row(p, False), "scatter": {}}
        for bm, bk, bn, split_k, stages, warps in configs(p.n):
            cfg = SpMMConfig(bm, bk, bn, 1, False, warps, stages, "scatter", split_k=split_k)
            for layout, cluster4 in itertools.product(LAYOUTS or [""], CLUSTER4 or [""]):
                label = f"{bm}x{bk}x{bn}:{split_k}:{stages}:{warps}" + "".join(f":{v}" for v in (layout, cluster4) if v)
                if layout:
                    use_layout(p.a, bm, bk, layout)
                spmm_scatter.cluster_ctas = cluster_ctas_as(cluster4)
                run = functools.partial(stuning.spmm, p.a, p.x, config=cfg)
                row["scatter"][label] = checked_time_us(run, p.ref, f"n={p.n} {p.sparsity} {label}", checks=2)
                spmm_scatter.cluster_ctas = _library_cluster_ctas
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_results(rows, "spmm_smem_scatter_probe.json")  # each row: a call cut short keeps the rest
    print(f"{'N':>4} {'zeros':>5} {'cuBLAS':>7} {'pick':>7} {'scatter':>7} {'config':>16} {'vs cuBLAS':>9} "
          f"{'pick vs':>7} failed")
    for r in rows:
        best, bt, failures = best_checked(r["scatter"])
        print(f"{r['n']:>4} {r['sparsity']:>5} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {bt:>7.1f} {best:>16} "
              f"{r['cublas_us'] / bt:>8.2f}x {r['cublas_us'] / r['pick_us']:>6.2f}x {len(failures)}")
        for failure in failures[:3]:
            print("   ", failure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
