"""Run a random sample of every kernel's config space on the GPU and check each result.

Catches configs that compile in the interpreter but not on the device (tile limits, shared memory,
registers) and wrong answers at realistic sizes. Usage:
    python3 scripts/check_configs.py --samples 12 [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from stuning.kernels import sddmm as sddmm_kernel
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_sell as sell_kernel

import stuning
from stuning.formats import CSRMatrix, Semi24Matrix, magnitude_prune
from stuning.ops.sddmm import problem_of as sddmm_problem
from stuning.ops.semi24 import problem_of as semi24_problem
from stuning.ops.spmm import problem_of as spmm_problem

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def rel_err(out, ref):
    e = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    return e if e == e else float("inf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    big = dev == "cuda"
    m, k = (2048, 1536) if big else (64, 96)
    failures, runs = [], 0
    t0 = time.time()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        w = torch.randn(m, k, device=dev, dtype=dtype)
        for n in ((16, 100, 512) if big else (16, 20)):
            x = torch.randn(k, n, device=dev, dtype=dtype)
            dense = magnitude_prune(w, 0.9)
            a = CSRMatrix.from_dense(dense, pad_to=4)
            ref = dense.double() @ x.double()
            problem = spmm_problem(a, x)
            space = spmm_kernel.config_space(problem) + sell_kernel.config_space(problem)  # CSR and sliced ELL
            for cfg in rng.sample(space, min(args.samples, len(space))) + [None]:
                runs += 1
                try:
                    err = rel_err(stuning.spmm(a, x, config=cfg), ref)
                except Exception as e:  # report every failure, keep going
                    failures.append(("spmm", dtype, n, cfg, repr(e)[:300]))
                    continue
                if err > TOL[dtype]:
                    failures.append(("spmm", dtype, n, cfg, f"rel_err {err:.2e}"))
            # SDDMM on the same pattern: dY (m x n) @ X^T (n x k)
            dy = torch.randn(m, n, device=dev, dtype=dtype)
            mask = CSRMatrix.from_dense(dense)
            sref = (dy.double() @ x.double().t()) * (dense != 0)
            space = sddmm_kernel.config_space(sddmm_problem(mask, dy))
            for cfg in rng.sample(space, min(args.samples, len(space))) + [None]:
                runs += 1
                try:
                    err = rel_err(stuning.sddmm(mask, dy, x.t(), config=cfg).to_dense(), sref)
                except Exception as e:
                    failures.append(("sddmm", dtype, n, cfg, repr(e)[:300]))
                    continue
                if err > TOL[dtype]:
                    failures.append(("sddmm", dtype, n, cfg, f"rel_err {err:.2e}"))
            if dtype == torch.float32:
                continue
            w24 = Semi24Matrix.from_dense(w, prune=True)
            ref24 = w24.to_dense().double() @ x.double()
            space = semi24_kernel.config_space(semi24_problem(w24, x))
            for cfg in rng.sample(space, min(args.samples, len(space))) + [None]:
                runs += 1
                try:
                    err = rel_err(stuning.semi24_mm(w24, x, config=cfg), ref24)
                except Exception as e:
                    failures.append(("semi24", dtype, n, cfg, repr(e)[:300]))
                    continue
                if err > TOL[dtype]:
                    failures.append(("semi24", dtype, n, cfg, f"rel_err {err:.2e}"))
    for f in failures:
        print("FAIL", *f)
    print(f"check_configs: {runs} runs, {len(failures)} failures, {time.time() - t0:.0f} s")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
