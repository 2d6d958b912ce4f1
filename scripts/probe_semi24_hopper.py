"""Probe the Gluon 2:4 kernel for Hopper (``kernels/semi24_hopper.py``) against the Triton one.

The Gluon kernel rebuilds W straight into the warpgroup MMA's register operand (no shared-memory
round trip for W). For each Llama-7B decode problem (N = 16 and 128, ``PROBE_NS``) this checks
every config of a small grid against a float64 reference, then times it (CUDA graphs, L2 flushed)
beside cuBLAS and the library's pick (the Triton kernel as tuned in the shipped database).

    python3 scripts/probe_semi24_hopper.py        # $OUT/semi24_hopper_probe.json, a table last
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import time

from probe_harness import best_checked, checked_time_us, semi24_baseline_row, semi24_problems, write_results

from stuning.suite import WEIGHT_SHAPES

SHAPES = WEIGHT_SHAPES["llama7b"]
NS = [int(v) for v in os.environ.get("PROBE_NS", "16,128").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "400"))


def configs(n: int):
    """(block_m, block_n, split_k, num_warps, num_stages)."""
    block_ns = (16,) if n <= 16 else (128,)
    tiles = ((64, 4), (128, 4), (128, 8))
    for (bm, warps), bn, split, stages in itertools.product(tiles, block_ns, (1, 2, 3, 4, 6, 8), (2, 3)):
        yield bm, bn, split, warps, stages


def run_hopper(w, x, bm, bn, split, warps, stages):
    from stuning.kernels import semi24_hopper
    from stuning.kernels.semi24 import Semi24Config

    import stuning

    assert semi24_hopper.takes(x, x.shape[1]), "the Hopper kernel would not run here"
    config = Semi24Config(bm, bn, semi24_hopper.BLOCK_K, 1, split, warps, stages, kernel="hopper")
    return stuning.semi24_mm(w, x, config=config)


def main() -> int:
    rows, started = [], time.perf_counter()
    for p in semi24_problems(SHAPES, NS, "cuda"):
        row = {**semi24_baseline_row(p), "hopper": {}}
        for cfg in configs(p.n):
            if time.perf_counter() - started > SECONDS:
                break
            label = f"{cfg[0]}x{cfg[1]}:" + ":".join(map(str, cfg[2:]))
            row["hopper"][label] = checked_time_us(functools.partial(run_hopper, p.w, p.x, *cfg), p.ref,
                                                   f"{p.m}x{p.k} n={p.n} {label}", checks=2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_results(rows, "semi24_hopper_probe.json")
    print(f"{'M x K':>11} {'N':>4} {'cuBLAS':>7} {'pick':>7} {'vs cuBLAS':>9} {'hopper':>7} {'config':>14} "
          f"{'vs cuBLAS':>9} failed")
    for r in rows:
        best, bt, failures = best_checked(r["hopper"])
        print(f"{r['m']:>5}x{r['k']:<5} {r['n']:>4} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} "
              f"{r['cublas_us'] / r['pick_us']:>8.2f}x {bt:>7.1f} {best:>14} {r['cublas_us'] / bt:>8.2f}x "
              f"{len(failures)}")
        for failure in failures[:1]:
            print("   ", failure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
