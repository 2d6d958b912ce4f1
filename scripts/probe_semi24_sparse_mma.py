"""Probe the 2:4 kernel on the sparse tensor cores (``kernels/semi24_sparse_mma.py``, ``mma.sp``).

First a correctness gate on odd problems (ragged M, K not a multiple of the step, ragged N, split-K,
bias, fp16 and bf16) against float64; then, for each Llama-7B problem (``PROBE_NS``), a grid of
configs checked and timed (CUDA graphs, L2 flushed) beside cuBLAS and the library's pick (the
shipped database's config for the other 2:4 kernels).

    python3 scripts/probe_semi24_sparse_mma.py     # $OUT/semi24_sparse_mma_probe.json, a table last
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import time

import torch
from probe_harness import (
    best_checked,
    checked_time_us,
    semi24_baseline_row,
    semi24_gate_failure,
    semi24_gate_problems,
    semi24_problems,
    write_results,
)

from stuning.suite import WEIGHT_SHAPES

SHAPES = WEIGHT_SHAPES["llama7b"]
NS = [int(v) for v in os.environ.get("PROBE_NS", "16,128").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "300"))
GATE_TILES = ((64, 4), (128, 4), (128, 8))  # (block_m, num_warps)


def configs(n: int):
    """(block_m, block_n, split_k, num_warps, num_stages): the library's tiles up to its ``MAX_N``,
    wider column blocks (beyond its space) above."""
    from stuning.kernels import semi24_sparse_mma

    splits = [int(v) for v in os.environ.get("PROBE_SPLITS", "4,8,16" if n <= 16 else "1,2,4").split(",")]
    stages = int(os.environ.get("PROBE_STAGES", "3"))
    block_ns = (16,) if n <= 16 else (32,) if n <= semi24_sparse_mma.MAX_N else (64, 128)
    for (bm, warps), bn, split in itertools.product(semi24_sparse_mma.TILES, block_ns, splits):
        yield bm, bn, split, warps, stages


def run(w, x, bm, bn, split, warps, stages, bias=None, out=None):
    import triton
    from stuning.kernels import semi24_sparse_mma
    from stuning.kernels.split_k import split_k_workspace

    m, k, n = w.shape[0], w.shape[1], x.shape[1]

    out = torch.empty(m, n, dtype=x.dtype, device=x.device) if out is None else out
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    partial, counts = split_k_workspace(x.device, m * n, tiles) if split > 1 else (out, out)
    semi24_sparse_mma.launch(w.values, w.mma_metadata(), x, out, bias, partial, counts, m=m, n=n, k=k, block_m=bm,
                             block_n=bn, split_k=split, num_warps=warps, num_stages=stages)
    return out


def gate() -> list[str]:
    """Odd problems, every tile, both dtypes: the failures (none: the kernel is right)."""
    failures = []
    for label, w, x, bias, ref in semi24_gate_problems(((200, 1000, 48), (64, 64, 16), (333, 4096, 128)), 1):
        for (bm, warps), bn, split in itertools.product(GATE_TILES, (16, 32), (1, 3)):
            stages = 2 + split % 2
            call = functools.partial(run, w, x, bm, bn, split, warps, stages)
            failures.append(semi24_gate_failure(f"{label} {bm}x{bn}:{split}:{warps}:{stages}", ref, bias,
                                                call if bm == 64 else None, call))
    return [f for f in failures if f]


def main() -> int:
    started = time.perf_counter()
    failures = gate() if os.environ.get("PROBE_GATE", "1") == "1" else []
    print(f"gate: {len(failures)} failures ({time.perf_counter() - started:.0f} s)", flush=True)
    for f in failures[:12]:
        print("   ", f)
    rows = []
    for p in semi24_problems(SHAPES, NS, "cuda"):
        row = {**semi24_baseline_row(p), "sparse_mma": {}}
        for cfg in configs(p.n):
            if time.perf_counter() - started > SECONDS:
                break
            label = f"{cfg[0]}x{cfg[1]}:" + ":".join(map(str, cfg[2:]))
            row["sparse_mma"][label] = checked_time_us(functools.partial(run, p.w, p.x, *cfg), p.ref,
                                                       f"{p.m}x{p.k} n={p.n} {label}", checks=2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_results({"gate_failures": failures, "rows": rows}, "semi24_sparse_mma_probe.json")
    print(f"{'M x K':>11} {'N':>4} {'cuBLAS':>7} {'pick':>7} {'vs cuBLAS':>9} {'mma.sp':>7} {'config':>14} "
          f"{'vs cuBLAS':>9} failed")
    for r in rows:
        best, bt, fails = best_checked(r["sparse_mma"])
        print(f"{r['m']:>5}x{r['k']:<5} {r['n']:>4} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} "
              f"{r['cublas_us'] / r['pick_us']:>8.2f}x {bt:>7.1f} {best:>14} {r['cublas_us'] / bt:>8.2f}x "
              f"{len(fails)}")
        for failure in fails[:1]:
            print("   ", failure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
