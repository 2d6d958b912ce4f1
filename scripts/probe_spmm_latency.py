"""Probe the CSR SpMM kernel's step latency on the GPU: prefetching the next step, and longer steps.

At decode sizes (N <= 128) the CSR kernel is far from its memory bound: at 95% zeros, 4096 x 4096,
N = 16 it moves about 5 MB in 8.4 us (BENCHMARKS.md 7c), where 5 MB take about 1 us. Its SASS
(scripts/sass_stats.py) shows why: every step loads the rows' column indices, then gathers the rows
of B those indices name, then waits for both before the next step's loads: two dependent memory
latencies per step, and all of a wave's programs are resident at once, so nothing else hides them.

Two ways to shorten that chain, both in ``stuning.kernels.spmm``:

* ``prefetch=True``: load the next step's indices and values before waiting on this step's gather
  (in sm_90a SASS the next step's loads are issued right after the gather's), one latency a step;
* longer steps (``nnz_step`` 64 and 128, outside the tuner's space today): fewer steps, more loads
  in flight per step.

And one way to cut the L2 traffic at wide N, where every nonzero gathers BLOCK_N columns of a row
of B from L2 (1.4 GB at 98%, N = 2048): B stored column block by column block
([N / BLOCK_N, K, BLOCK_N], ``reblocked``), so that the K rows of the block all of a wave's programs
work on are contiguous: 128 KB at BLOCK_N = 16, which an SM's L1 holds, where the row-major layout
spreads them over 4096 lines (one per row) that it cannot. The copy is timed apart (``reblock_us``).

For each problem (``PROBE_SHAPE``, default 4096x4096, fp16, uniform rows, ``PROBE_SPARSITIES`` x
``PROBE_NS``) it times, with CUDA-graph replays behind an L2 flush (``flushed_graph_us``): dense
cuBLAS, stuning's own pick (``config=None``: the shipped database, else
the cost model), that pick with ``prefetch``, and a grid of configs around the decode picks with
and without ``prefetch``. Every config is checked against a float64 reference first.

    python3 scripts/probe_spmm_latency.py            # $OUT/spmm_latency_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_latency.py   # tiny, CPU
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys

import torch
from probe_harness import check_close, probe_time_us, spmm_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
NS = [int(v) for v in os.environ.get("PROBE_NS", "16,128,2048").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
# M x K of A: the decode-width 4096 x 4096 by default; BERT's 768-row layers show the latency chain
# with too few programs to hide it.
M, K = (64, 64) if SMOKE else (int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
SECONDS = float(os.environ.get("PROBE_SECONDS", "330"))  # no new problem starts after this long


def grid(n: int):
    """The configs around the decode picks (rows, nnz_step, block_n, warps), each without and with
    prefetch."""
    from stuning.kernels.spmm import SpMMConfig

    block_ns = [16] if n <= 16 else [16, 32, 64]
    steps, warp_counts = ((16, 32, 64, 128), (2, 4)) if n <= 128 else ((16, 32, 64), (4,))  # wide N: fewer
    for rows, step, bn, warps in itertools.product((1, 2, 4), steps, block_ns, warp_counts):
        tile = rows * step * bn
        if tile // (32 * warps) > 128 or tile < 32 * warps:
            continue  # the tuner's own register and occupancy limits (spmm.tile_configs)
        for prefetch in (False, True):
            yield SpMMConfig(rows, step, bn, 4, False, warps, 1, "csr", prefetch)


def timer(fn) -> float:
    return probe_time_us(fn, SMOKE)


def spmm_reblocked(a, xb, n: int, cfg):
    """The CSR kernel on B stored as [N / BLOCK_N, K, BLOCK_N] (the probe's own launch: the library
    launcher takes B row-major)."""
    import triton
    from stuning.kernels import spmm as spmm_kernel

    m, k, bn = a.shape[0], xb.shape[1], cfg.block_n
    out = torch.empty((m, n), dtype=xb.dtype, device=xb.device)
    spmm_kernel._spmm_kernel[(triton.cdiv(m, cfg.rows), triton.cdiv(n, bn))](
        a.crow, a.col, a.values, a.crow, xb, out, m, n,
        bn, 1, k * bn, out.stride(0), out.stride(1),
        ROWS=cfg.rows, NNZ_STEP=cfg.nnz_step, BLOCK_N=bn, VEC=cfg.vec, ROW_ALIGN=min(a.pad_to, cfg.nnz_step),
        EVEN_N=True, SWIZZLE=False, PREFETCH=cfg.prefetch, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out


def reblock(x: torch.Tensor, bn: int) -> torch.Tensor:
    k, n = x.shape
    return x.view(k, n // bn, bn).permute(1, 0, 2).contiguous()




def main() -> int:
    from stuning.kernels.spmm import SpMMConfig

    import stuning

    device = "cpu" if SMOKE else "cuda"
    rows_out = []
    for p in spmm_problems(M, K, NS if not SMOKE else [16], SPARSITIES, device, seconds=SECONDS):
        n, sparsity, w, x, ref, a, pick = p.n, p.sparsity, p.w, p.x, p.ref, p.a, p.pick
        row = {"m": M, "k": K, "n": n, "sparsity": sparsity, "nnz": a.nnz}
        row["cublas_us"] = timer(lambda w=w, x=x: w @ x)
        candidates = {"pick": pick}
        if pick.kernel == "csr":
            candidates["pick+prefetch"] = dataclasses.replace(pick, prefetch=True)
        for cfg in grid(n):
            candidates.setdefault(json.dumps(dataclasses.asdict(cfg), sort_keys=True), cfg)
        times = {}
        for name, cfg in candidates.items():
            try:
                check_close(stuning.spmm(a, x, config=cfg), ref, name)
            except Exception as e:  # a config that fails to compile or run is reported, not fatal
                times[name] = {"config": dataclasses.asdict(cfg), "error": str(e).splitlines()[0][:200]}
                continue
            t = timer(lambda cfg=cfg, a=a, x=x: stuning.spmm(a, x, config=cfg))
            times[name] = {"config": dataclasses.asdict(cfg), "us": t}
            if SMOKE and len(times) >= 4:
                break
        row["auto_us"] = timer(lambda a=a, x=x: stuning.spmm(a, x))
        row["pick"] = dataclasses.asdict(pick)
        ok = [v for v in times.values() if "us" in v]
        for flag in (False, True):
            best = min((v for v in ok if v["config"]["prefetch"] == flag), key=lambda v: v["us"], default=None)
            key = "prefetch" if flag else "plain"
            row[f"best_{key}_us"] = best["us"] if best else None
            row[f"best_{key}_config"] = best["config"] if best else None
        # The fastest plain and prefetching configs again on reblocked B, and at BLOCK_N 16 and 32.
        reblocked = {}
        tried = set()
        for key in ("plain", "prefetch"):
            best = row[f"best_{key}_config"]
            if best is None:
                continue
            for bn in sorted({best["block_n"], 16, 32}):
                cfg = SpMMConfig(**{**best, "block_n": bn, "swizzle": False, "kernel": "csr"})
                if n % bn or cfg in tried:
                    continue
                tried.add(cfg)
                name = f"{key}-bn{bn}"
                try:
                    xb = reblock(x, bn)
                    check_close(spmm_reblocked(a, xb, n, cfg), ref, name)
                    reblocked[name] = {"config": dataclasses.asdict(cfg),
                                       "us": timer(lambda a=a, xb=xb, n=n, cfg=cfg: spmm_reblocked(a, xb, n, cfg)),
                                       "reblock_us": timer(lambda x=x, bn=bn: reblock(x, bn))}
                except Exception as e:
                    reblocked[name] = {"config": dataclasses.asdict(cfg), "error": str(e).splitlines()[0][:200]}
        done = [v for v in reblocked.values() if "us" in v]
        best_rb = min(done, key=lambda v: v["us"], default=None)
        row["best_reblocked_us"] = best_rb["us"] if best_rb else None
        row["best_reblocked_config"] = best_rb["config"] if best_rb else None
        row["reblock_us"] = best_rb["reblock_us"] if best_rb else None
        row["reblocked"] = reblocked
        row["configs"] = times
        rows_out.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("configs", "reblocked")}), flush=True)

    write_results(rows_out, "spmm_latency_probe.json")
    print(f"{'n':>5} {'sparsity':>8} {'cublas':>8} {'auto':>8} {'plain':>8} {'prefetch':>8} {'reblocked':>9} "
          f"{'copy':>6}   speedup over cuBLAS: plain prefetch reblocked")
    nan = float("nan")
    for r in rows_out:
        plain, pre = r["best_plain_us"] or nan, r["best_prefetch_us"] or nan
        rb, copy = r["best_reblocked_us"] or nan, r["reblock_us"] or nan
        print(f"{r['n']:>5} {r['sparsity']:>8} {r['cublas_us']:>8.1f} {r['auto_us']:>8.1f} {plain:>8.1f} "
              f"{pre:>8.1f} {rb:>9.1f} {copy:>6.1f}   {r['cublas_us'] / plain:>5.2f} {r['cublas_us'] / pre:>5.2f} "
              f"{r['cublas_us'] / rb:>5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
