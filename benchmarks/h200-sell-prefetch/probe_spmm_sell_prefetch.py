"""Sliced ELL with the next step's entries loaded before this step's gather (``prefetch``) against the
plain loop, on the decode rows.

For each problem (M x K, N, zeros, row-length cv) it times a grid of sorted sliced-ELL configs near
the decode entries' picks twice, plain and prefetching, each checked against float64; in the same
run dense cuBLAS and the config ``stuning.spmm`` picks (database, else cost model). Cold-L2
CUDA-graph medians. Writes ``$OUT/sell-prefetch.json`` when $OUT is set; prints one row a problem::

    PROBE_SHAPES=768x3072,3072x768 PROBE_NS=16,128 PROBE_SPARSITIES=0.95 PROBE_CVS=0,0.4 \\
        python3 scripts/probe_spmm_sell_prefetch.py
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import torch
from probe_harness import check_close, probe_time_us, write_results
from probe_spmm_sell_cut import env_list
from stuning.kernels import spmm_sell
from stuning.kernels.spmm import SpMMProblem

import stuning
from stuning.matrices import random_sparse
from stuning.ops.inputs import tuned_config
from stuning.ops.spmm import spmm_features


def grid(problem: SpMMProblem) -> list:
    """Sorted configs of the library's sell space near the decode picks: at N <= 32 steps of 16-128
    on 2-4 warps, above that steps of 8-32 on 2-4 warps with N tiles of 64."""
    if problem.n <= 32:
        keep = lambda c: c.nnz_step >= 16 and c.num_warps <= 4  # noqa: E731
    else:
        keep = lambda c: c.nnz_step <= 32 and c.num_warps <= 4 and c.block_n == 64  # noqa: E731
    return [c for c in spmm_sell.config_space(problem) if c.swizzle and c.rows <= 8 and keep(c)]


def measure(m: int, k: int, n: int, sp: float, cv: float, gen: torch.Generator, device: str, smoke: bool) -> dict:
    """One problem: cuBLAS, the pick, and every grid config plain and prefetching."""
    w = random_sparse(m, k, sp, skew_cv=cv, dtype=torch.float16, generator=gen).to(device)
    x = torch.randn(k, n, generator=gen).half().to(device)
    ref = w.double() @ x.double()
    a = stuning.CSRMatrix.from_dense(w, pad_to=4)
    problem = SpMMProblem(m, k, n, a.nnz, torch.float16, 4)
    dense_us = probe_time_us(lambda: w @ x, smoke)
    pick = tuned_config(a, "spmm", n, a.dtype, lambda: spmm_features(a, n))
    check_close(stuning.spmm(a, x), ref, "pick")
    pick_us = probe_time_us(lambda: stuning.spmm(a, x), smoke)
    times = {"plain": {}, "prefetch": {}}
    for cfg in grid(problem):
        for form in times:
            c = dataclasses.replace(cfg, prefetch=form == "prefetch")
            check_close(stuning.spmm(a, x, config=c), ref, f"{form} {c}")
            times[form][json.dumps(dataclasses.asdict(cfg))] = probe_time_us(lambda c=c: stuning.spmm(a, x, config=c),
                                                                             smoke)
    best = {f: min(t.items(), key=lambda kv: kv[1]) if t else (None, float("nan")) for f, t in times.items()}
    ratios = [times["plain"][c] / times["prefetch"][c] for c in times["plain"]]
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios and not smoke else float("nan")
    return {"m": m, "k": k, "n": n, "sparsity": sp, "cv": cv, "dense_us": dense_us, "pick_us": pick_us,
            "pick": dataclasses.asdict(pick), "best_plain": best["plain"], "best_prefetch": best["prefetch"],
            "gain_geomean": geo, "times": times}


def main() -> None:
    smoke = not torch.cuda.is_available()
    device = "cpu" if smoke else "cuda"
    shapes = [tuple(int(v) for v in s.split("x")) for s in env_list("PROBE_SHAPES", "768x3072,3072x768", str)]
    ns = env_list("PROBE_NS", "16,128", int)
    sparsities = env_list("PROBE_SPARSITIES", "0.95", float)
    cvs = env_list("PROBE_CVS", "0,0.4", float)
    gen = torch.Generator().manual_seed(0)
    rows_out = []
    for (m, k), n, sp, cv in itertools.product(shapes, ns, sparsities, cvs):
        row = measure(m, k, n, sp, cv, gen, device, smoke)
        rows_out.append(row)
        print(f"{m}x{k} n={n} {sp:.0%} cv={cv}: cuBLAS {row['dense_us']:.2f}  pick {row['pick_us']:.2f} "
              f"({row['pick'].get('kernel', '?')})  sell plain {row['best_plain'][1]:.2f}  "
              f"prefetch {row['best_prefetch'][1]:.2f}  per-config gain {row['gain_geomean']:.3f}", flush=True)
        write_results(rows_out, "sell-prefetch.json")  # each problem: a call cut short keeps the rest


if __name__ == "__main__":
    main()
