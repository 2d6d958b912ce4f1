"""Probe 2:4 on the sparse warpgroup MMA with both operands in shared memory, fed by TMA.

The first ``wgmma.sp`` probe (``probe_semi24_wgmma_sp.py``, BENCHMARKS.md 7u) took A (W's values) from
registers in the sparse-MMA kernel's k order, so cp.async had to permute X's rows, W came from
global memory one step ahead, and each step waited for its own MMAs: ~1250 cycles a step against
~260 of MMA. Here the whole step is asynchronous:

- A is W's stored values by descriptor: a (BLOCK_M, 32 KS) tile of the (M, K/2) values, K-major,
  swizzled 64 or 128 bytes as TMA writes it. Stored values are in column order, so the MMAs' k order
  is X's natural row order and X's (64 KS, BLOCK_N) tile comes by TMA too.
- The metadata must follow that order: ``wgmma_metadata`` builds it as ``sparse_mma_metadata`` does
  (the same lanes, measured for mma.sp and holding for wgmma.sp) with group j of MMA kk being the
  step's group 8 kk + j. It comes by TMA as well; each lane then reads its word from shared memory.
- A stage holds X, W and the metadata of KS 64-column steps behind one mbarrier. A step issues
  2 KS MMAs as one group and waits only for the previous step's (``WAIT = 1``), whose stage is then
  refilled. The MMAs read the metadata registers while they run: see ``_step_asm`` for how a step's
  registers are kept from ptxas until its MMAs have retired (without it, configs of 2-4 warpgroups
  gave 1-17% errors now and then).
- Every warpgroup multiplies 64 rows (``BLOCK_M = 16 num_warps``); the descriptors are built in the
  asm from ``global_smem`` and the buffers' offsets where Triton places them (``buffer_offsets``:
  largest first; checked in the PTX of compiled configs, and any error would show in every check).

On the H200 its best configs ran 1.27-1.37x cuBLAS at N = 128 and 1.25-1.31x at N = 1024-2048 on
the Llama-7B shapes (BENCHMARKS.md 7v). The kernel is now the library's ``kernels/semi24_wgmma_sp.py``
(``Semi24Config(kernel="wgmma_sp")``); this probe drives it over its own config list, with the
``wait0`` ablation (``launch(wait=0)``).

    python3 scripts/probe_semi24_wgmma_tma.py      # gate vs float64, then timings; $OUT/semi24_wgmma_tma_probe.json
    PROBE_NS=128,2048 PROBE_KS=2 PROBE_SPLITS=1,2 PROBE_SECONDS=360 ...   # N's, KS's, splits, seconds for timings
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import random
import time

import torch
import triton
from probe_harness import (
    best_checked,
    checked_time_us,
    probe_time_us,
    semi24_baseline_row,
    semi24_gate_failure,
    semi24_gate_problems,
    semi24_problems,
    write_results,
)
from stuning.kernels import semi24_wgmma_sp
from stuning.kernels.semi24_wgmma_sp import buffer_bytes
from stuning.kernels.split_k import split_k_workspace

from stuning.formats.semi24 import wgmma_metadata
from stuning.suite import WEIGHT_SHAPES

SHAPES = WEIGHT_SHAPES["llama7b"]
NS = [int(v) for v in os.environ.get("PROBE_NS", "128").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "240"))
SMEM_BYTES = 227 * 1024


def run(w, x, meta, bn, ks, split, warps, stages, wait=1, bias=None, out=None):
    """Y = W X (``meta[ks]``: ``wgmma_metadata(w.masks, M, K, ks)``) by the library's launcher."""
    m, k, n = w.shape[0], w.shape[1], x.shape[1]
    out = torch.empty(m, n, dtype=x.dtype, device=x.device) if out is None else out
    split = min(split, triton.cdiv(k, 64 * ks))  # as the library's launcher: no split without a step
    tiles = triton.cdiv(m, 16 * warps) * triton.cdiv(n, bn)
    partial, counts = split_k_workspace(x.device, m * n, tiles) if split > 1 else (out, out)
    semi24_wgmma_sp.launch(w.values, meta[ks], x, out, bias, partial, counts, m=m, n=n, k=k, block_m=16 * warps,
                           block_n=bn, block_k=64 * ks, split_k=split, num_warps=warps, num_stages=stages, wait=wait)
    return out


def max_stages(bn: int, ks: int, warps: int) -> int:
    return min(8, SMEM_BYTES // sum(buffer_bytes(bn, 64 * ks, warps, 1).values()))


def configs(n: int) -> list[tuple[int, ...]]:
    """(block_n, ks, split_k, num_warps, num_stages) within shared memory, in a fixed shuffled order: a
    problem's time budget then samples the whole space. Wide N: no splits."""
    splits = [int(v) for v in os.environ.get("PROBE_SPLITS", "1,2,4,8").split(",")] if n <= 128 else [1]
    kss = [int(v) for v in os.environ.get("PROBE_KS", "1,2").split(",")]
    space = {(bn, ks, split, warps, stages)
             for bn, ks, warps, split in itertools.product((128, 64), kss, (8, 4, 16), splits)
             for stages in (3, 4, 6, max_stages(bn, ks, warps))
             if bn <= max(64, n) and 3 <= stages <= max_stages(bn, ks, warps)}
    space = sorted(space)
    random.Random(0).shuffle(space)
    return space


def gate() -> list[str]:
    """Odd problems, both dtypes, split-K, bias and Y^T: the failures (none: the kernel is right)."""
    failures = []
    for label, w, x, bias, ref in semi24_gate_problems(((64, 64, 64), (200, 1008, 144), (320, 4096, 128)), 5):
        meta = {ks: wgmma_metadata(w.masks, w.shape[0], w.shape[1], ks) for ks in (1, 2)}
        for bn, ks, split, warps in itertools.product((64, 128), (1, 2), (1, 3), (4, 8, 16)):
            cfg = (w, x, meta, bn, ks, split, warps)
            failures.append(semi24_gate_failure(f"{label} bn={bn} ks={ks} split={split} warps={warps}", ref, bias,
                                                functools.partial(run, *cfg, 3), functools.partial(run, *cfg, 2)))
    return [f for f in failures if f]


def main() -> int:
    started = time.perf_counter()
    failures = gate()
    print(f"gate: {len(failures)} failures ({time.perf_counter() - started:.0f} s)", flush=True)
    for f in failures[:8]:
        print("   ", f)
    rows = []
    if len(failures) < 4 or os.environ.get("PROBE_ALWAYS") == "1":
        budget = (SECONDS - (time.perf_counter() - started)) / (len(SHAPES) * len(NS))
        for p in semi24_problems(SHAPES, NS, "cuda"):
            until = time.perf_counter() + budget
            meta = {ks: wgmma_metadata(p.w.masks, p.m, p.k, ks) for ks in (1, 2)}
            row = {**semi24_baseline_row(p), "wgmma_tma": {}}
            for cfg in configs(p.n):
                if time.perf_counter() > until:
                    break
                label = ":".join(map(str, cfg))
                row["wgmma_tma"][label] = checked_time_us(functools.partial(run, p.w, p.x, meta, *cfg), p.ref,
                                                          f"{p.m}x{p.k} n={p.n} {label}", checks=3)
            best, _, _ = best_checked(row["wgmma_tma"])
            if best != "-":  # ablation: the same config waiting for each step's own MMAs
                cfg = [int(v) for v in best.split(":")]
                row["wait0"] = {"config": best, "us": probe_time_us(functools.partial(run, p.w, p.x, meta, *cfg, 0),
                                                                   False)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_results({"gate_failures": failures, "rows": rows}, "semi24_wgmma_tma_probe.json")
    print(f"{'M x K':>11} {'N':>4} {'cuBLAS':>7} {'pick':>7} {'tma':>7} {'bn:ks:split:warps:st':>20} "
          f"{'vs cuBLAS':>9} {'wait0':>6} failed")
    for r in rows:
        best, bt, fails = best_checked(r["wgmma_tma"])
        w0 = r.get("wait0", {}).get("us", float("nan"))
        print(f"{r['m']:>5}x{r['k']:<5} {r['n']:>4} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {bt:>7.1f} "
              f"{best:>20} {r['cublas_us'] / bt:>8.2f}x {w0:>6.1f} {len(fails)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
