"""Probe: can SparseLinear skip its copy of X^T at decode sizes?

``SparseLinear`` computes ``Y^T = W @ X^T`` with W in CSR. X arrives as (tokens x K), row-major, so
X^T is a strided view: a row of it (what each nonzero gathers) is T elements K apart, one sector
each, where the contiguous copy gives one sector for all T. Then (7g) the layer copied X^T first
(one small kernel, about 2.6 us at 16 tokens: BENCHMARKS.md 7f) and passed the copy; since 8e the
launch copies it for the gathering kernels only. At decode sizes X is small enough (16 x 768 fp16
= 24 KB) for every SM's L1 to hold it, so the strided gathers may cost less than the copy.

For each weight shape (``PROBE_SHAPES``), sparsity (``PROBE_SPARSITIES``) and token count
(``PROBE_TOKENS``), fp16, uniform random zeros, timed as CUDA graphs behind an L2 flush:

* ``dense``: ``F.linear(x, w)`` (cuBLAS);
* ``copy``: the layer's path then, ``spmm(W, X^T.contiguous(), out=Y^T)`` with the tuned config;
* ``strided``: ``spmm(W, X^T, out=Y^T)`` with the same config, and the best of a small config grid.

Every output is checked against a float64 reference first.

    OUT=/tmp/o python3 scripts/probe_strided_input.py        # $OUT/strided_input_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_strided_input.py   # tiny, CPU
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os

import torch
import torch.nn.functional as F
from probe_harness import write_results
from probe_spmm_latency import timer  # graph replays behind an L2 flush, as the tuner times (scripts/ is on the path)

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
SHAPES = ["32x48"] if SMOKE else os.environ.get("PROBE_SHAPES", "768x768,3072x768,768x3072,11008x4096,4096x11008"
                                                ).split(",")
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95").split(",")]
TOKENS = [int(v) for v in os.environ.get("PROBE_TOKENS", "16").split(",")]


def grid(tokens: int):
    """CSR configs around the decode picks (the strided gather may favour other ones)."""
    from stuning.kernels.spmm import SpMMConfig

    vec = 4 if tokens % 4 == 0 else 1
    for rows, step, warps, prefetch in itertools.product((1, 2, 4), (32, 64, 128), (2, 4), (False, True)):
        yield SpMMConfig(rows, step, 16, vec, False, warps, 1, "csr", prefetch)


def main() -> int:
    import stuning
    from stuning.ops.inputs import tuned_config
    from stuning.ops.spmm import spmm_features

    device = "cpu" if SMOKE else "cuda"
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for shape, sparsity, t in itertools.product(SHAPES, SPARSITIES, TOKENS):
        m, k = (int(v) for v in shape.split("x"))
        w = torch.randn(m, k, generator=gen)
        w = (w * (torch.rand(m, k, generator=gen) >= sparsity)).half().to(device)
        x = torch.randn(t, k, generator=gen).half().to(device)
        ref = (x.double() @ w.double().t())
        a = stuning.CSRMatrix.from_dense(w)
        y = torch.empty(t, m, dtype=x.dtype, device=device)
        pick = tuned_config(a, "spmm", t, a.dtype, lambda a=a, t=t: spmm_features(a, t))

        def copy_path(cfg=pick, a=a, x=x, y=y):
            return stuning.spmm(a, x.t().contiguous(), config=cfg, out=y.t())

        def strided_path(cfg=pick, a=a, x=x, y=y):
            return stuning.spmm(a, x.t(), config=cfg, out=y.t())

        row = {"m": m, "k": k, "tokens": t, "sparsity": sparsity, "pick": dataclasses.asdict(pick)}
        for name, fn in (("copy", copy_path), ("strided", strided_path)):
            y.fill_(float("nan"))
            fn()
            err = float((y.double() - ref).norm() / ref.norm())
            assert err < 1e-2, f"{name} {shape} {sparsity}: relative error {err:.2e}"
            row[f"{name}_us"] = timer(fn)
        row["dense_us"] = timer(lambda w=w, x=x: F.linear(x, w))
        row["transpose_copy_us"] = timer(lambda x=x: x.t().contiguous())
        best, timed = None, []
        for cfg in list(grid(t))[: 4 if SMOKE else None]:
            y.fill_(float("nan"))
            strided_path(cfg)
            if not float((y.double() - ref).norm() / ref.norm()) < 1e-2:
                raise AssertionError(f"strided {cfg}: wrong result")
            us = timer(lambda cfg=cfg: strided_path(cfg))
            timed.append({"config": dataclasses.asdict(cfg), "us": us})  # for replaying the cost model
            if best is None or us < best[0]:
                best = (us, cfg)
        row["best_strided_us"] = best[0] if best else None
        row["best_strided_config"] = dataclasses.asdict(best[1]) if best else None
        print(json.dumps(row), flush=True)
        row["strided_configs"] = timed
        rows.append(row)

    write_results(rows, "strided_input_probe.json")
    print(f"{'shape':>11} {'sparsity':>8} {'T':>4} {'dense':>7} {'copy':>7} {'strided':>7} {'best':>7} {'T-copy':>7}")
    for r in rows:
        best = r["best_strided_us"] if r["best_strided_us"] is not None else float("nan")
        print(f"{r['m']}x{r['k']:<6} {r['sparsity']:>8} {r['tokens']:>4} {r['dense_us']:>7.1f} {r['copy_us']:>7.1f} "
              f"{r['strided_us']:>7.1f} {best:>7.1f} {r['transpose_copy_us']:>7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
