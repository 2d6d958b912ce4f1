"""Sliced ELL with long rows cut into pieces against the same slicing uncut, on skewed rows.

For each problem (M x K, N, zeros, row-length cv) it times a grid of sorted sliced-ELL configs of
up to ``CUT_MAX_SLICE_ROWS`` rows twice, on the format with rows cut (today's) and uncut, each
checked against float64; in the same run dense cuBLAS and the config ``stuning.spmm`` picks
(database, else cost model). Cold-L2 CUDA-graph medians. Writes ``$OUT/sell-cut.json`` when $OUT is
set; prints one row a problem::

    PROBE_SHAPES=768x3072,3072x768 PROBE_NS=16,128 PROBE_SPARSITIES=0.9,0.95 PROBE_CVS=0.4 \\
        python3 scripts/probe_spmm_sell_cut.py
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os

import torch
from probe_harness import check_close, probe_time_us, write_results
from stuning.kernels import spmm_sell
from stuning.kernels.spmm import SpMMProblem

import stuning
from stuning.formats.sell import SlicedELLMatrix
from stuning.matrices import random_sparse
from stuning.ops.inputs import tuned_config
from stuning.ops.spmm import spmm_features


def env_list(name: str, default: str, cast):
    return [cast(v) for v in os.environ.get(name, default).split(",") if v]


def grid(problem: SpMMProblem) -> list:
    """The sorted configs of the library's sell space with slices of 2-8 rows near the decode
    entries' picks: at N = 16 steps of 32-128 on 2-4 warps, at N = 128 steps of 8-32 on 2 warps
    with N tiles of 64."""
    if problem.n <= 32:
        keep = lambda c: c.nnz_step >= 32 and c.num_warps <= 4  # noqa: E731
    else:
        keep = lambda c: c.nnz_step <= 32 and c.num_warps == 2 and c.block_n == 64  # noqa: E731
    return [c for c in spmm_sell.config_space(problem) if c.swizzle and c.rows <= 8 and keep(c)]


def main() -> None:
    smoke = not torch.cuda.is_available()
    device = "cpu" if smoke else "cuda"
    shapes = [tuple(int(v) for v in s.split("x")) for s in env_list("PROBE_SHAPES", "768x3072,3072x768", str)]
    ns = env_list("PROBE_NS", "16,128", int)
    sparsities = env_list("PROBE_SPARSITIES", "0.9,0.95", float)
    cvs = env_list("PROBE_CVS", "0.4", float)
    gen = torch.Generator().manual_seed(0)
    rows_out = []
    for (m, k), n, sp, cv in itertools.product(shapes, ns, sparsities, cvs):
        row = measure(m, k, n, sp, cv, gen, device, smoke)
        rows_out.append(row)
        print(f"{m}x{k} n={n} {sp:.0%} cv={cv}: cuBLAS {row['dense_us']:.2f}  pick {row['pick_us']:.2f} "
              f"({row['pick'].get('kernel', '?')})  sell whole {row['best_whole'][1]:.2f}  "
              f"sell cut {row['best_cut'][1]:.2f}", flush=True)
        write_results(rows_out, "sell-cut.json")  # each problem: a call cut short keeps the rest


def measure(m: int, k: int, n: int, sp: float, cv: float, gen: torch.Generator, device: str, smoke: bool) -> dict:
    """One problem: cuBLAS, the pick, and every grid config on the cut and the uncut slicing."""
    w = random_sparse(m, k, sp, skew_cv=cv, dtype=torch.float16, generator=gen).to(device)
    x = torch.randn(k, n, generator=gen).half().to(device)
    ref = w.double() @ x.double()
    cut_a = stuning.CSRMatrix.from_dense(w, pad_to=4)
    whole_a = stuning.CSRMatrix.from_dense(w, pad_to=4)
    problem = SpMMProblem(m, k, n, cut_a.nnz, torch.float16, 4)
    dense_us = probe_time_us(lambda: w @ x, smoke)
    pick_us = probe_time_us(lambda: stuning.spmm(cut_a, x), smoke)
    pick = tuned_config(cut_a, "spmm", n, cut_a.dtype, lambda: spmm_features(cut_a, n))
    check_close(stuning.spmm(cut_a, x), ref, "pick")
    times = {"cut": {}, "whole": {}}
    for cfg in grid(problem):
        for form, a in (("cut", cut_a), ("whole", whole_a)):
            if form == "whole":
                key = SlicedELLMatrix.cache_key(cfg.rows, True, cfg.nnz_step)
                if key not in a.cache:
                    a.cache[key] = _uncut(a, cfg.rows, cfg.nnz_step)
            check_close(stuning.spmm(a, x, config=cfg), ref, f"{form} {cfg}")
            times[form][json.dumps(dataclasses.asdict(cfg))] = probe_time_us(
                lambda a=a, cfg=cfg: stuning.spmm(a, x, config=cfg), smoke)
    best = {f: min(t.items(), key=lambda kv: kv[1]) if t else (None, float("nan")) for f, t in times.items()}
    return {"m": m, "k": k, "n": n, "sparsity": sp, "cv": cv, "dense_us": dense_us, "pick_us": pick_us,
            "pick": dataclasses.asdict(pick), "best_cut": best["cut"], "best_whole": best["whole"], "times": times}


def _uncut(a, rows: int, step: int) -> SlicedELLMatrix:
    """The sorted slicing with no row cut (the form before cutting), built past the format's rule."""
    rule = SlicedELLMatrix.cuts_rows
    SlicedELLMatrix.cuts_rows = staticmethod(lambda s, sort: False)
    try:
        return SlicedELLMatrix._build(a, rows, True, step)
    finally:
        SlicedELLMatrix.cuts_rows = rule


if __name__ == "__main__":
    main()
