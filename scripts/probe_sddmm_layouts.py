"""Probe: what the layouts of A and B cost each SDDMM kernel.

The tuner and the bench hand every SDDMM kernel A with rows contiguous along K and B as the
transpose of an (N x K) matrix, so that a column of B is contiguous along K too, as attention's
``Q @ K^T`` is. A weight gradient, ``dW = (dY^T @ X) * spy(W)``, arrives the other way: A = dY^T is
a transposed view (K = tokens strided) and B = X is row-major (N contiguous). The gather kernel
reads one row of A and one column of B per nonzero, K elements each: with K strided every element
is a sector of its own.

For each problem (``PROBE_CASES``: ``family:m:n:k:sparsity:dtype``) and each layout of A (``k``: K
contiguous; ``m``: a transposed view) and of B (``k``: K contiguous; ``n``: row-major), this times
``stuning.sddmm`` with each kernel's config (the gather and tiled heuristics, the dense kernel's
pass by rows) and with the database's lookup (``auto``), as CUDA graphs behind an L2 flush. Every
output is checked against a float64 reference first.

    OUT=/tmp/o python3 scripts/probe_sddmm_layouts.py      # $OUT/sddmm_layouts.json, a table last
    PROBE_LAYOUTS="A m, B n" PROBE_KERNELS=auto python3 scripts/probe_sddmm_layouts.py  # the lookup alone
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_sddmm_layouts.py   # tiny, CPU
"""

from __future__ import annotations

import json
import os

import torch
from probe_harness import check_close, probe_time_us  # scripts/ is on the path
from stuning.kernels import sddmm as sddmm_kernel

import stuning
from stuning.formats import CSRMatrix
from stuning.matrices import random_sparse

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
CASES = (["wgrad:32:48:24:0.9:float16"] if SMOKE else os.environ.get(
    "PROBE_CASES",
    "wgrad:4096:4096:256:0.95:float16,wgrad:4096:4096:256:0.98:float16,wgrad:4096:4096:2048:0.98:float16,"
    "attention:4096:4096:64:0.98:float16,wgrad:4096:4096:256:0.98:float32",
).split(","))
ALL_LAYOUTS = ["A k, B k", "A m, B k", "A k, B n", "A m, B n"]
ALL_KERNELS = ["gather", "tiled", "dense", "auto"]  # auto: the database's lookup
# PROBE_LAYOUTS / PROBE_KERNELS: subsets, "|"-separated (e.g. "A m, B n" and "auto": only the
# lookup on a weight gradient's layout).


def _subset(variable: str, every: list[str]) -> list[str]:
    chosen = [x for x in os.environ.get(variable, "|".join(every)).split("|") if x]
    unknown = [x for x in chosen if x not in every]
    if unknown or not chosen:
        raise SystemExit(f"{variable}: {unknown or 'nothing'} is not among {every} ('|'-separated)")
    return chosen


LAYOUTS = _subset("PROBE_LAYOUTS", ALL_LAYOUTS)
KERNELS = _subset("PROBE_KERNELS", ALL_KERNELS)


def operands(m: int, n: int, k: int, dtype, gen, device, layout: str):
    """A (m x k) and B (k x n) with the same values in every layout."""
    a = torch.randn(m, k, generator=gen, device=device).to(dtype)
    b = torch.randn(k, n, generator=gen, device=device).to(dtype)
    a_l, b_l = layout.split(", ")
    a = a if a_l == "A k" else a.t().contiguous().t()
    b = b.t().contiguous().t() if b_l == "B k" else b
    return a, b


def main() -> None:
    device = "cpu" if SMOKE else "cuda"
    rows = []
    for case in CASES:
        family, m, n, k, sparsity, dtype_name = case.split(":")
        m, n, k, sparsity, dtype = int(m), int(n), int(k), float(sparsity), getattr(torch, dtype_name)
        gen = torch.Generator(device=device).manual_seed(0)
        mask = CSRMatrix.from_dense(random_sparse(m, n, sparsity, dtype=dtype, device=device, generator=gen))
        problem = sddmm_kernel.SDDMMProblem(m=m, n=n, k=k, nnz=mask.nnz, dtype=dtype)
        configs = dict(zip(ALL_KERNELS, (
            sddmm_kernel.heuristic(problem), sddmm_kernel.tiled_heuristic(problem),
            sddmm_kernel.dense_config(sddmm_kernel.sddmm_dense.rows_per_program(mask.nnz, m)), None), strict=True))
        configs = {name: configs[name] for name in KERNELS}
        row_ids, cols = mask.row_ids().long(), mask.col.long()
        for layout in LAYOUTS:
            gen = torch.Generator(device=device).manual_seed(1)
            a, b = operands(m, n, k, dtype, gen, device, layout)
            ref = (a.double() @ b.double())[row_ids, cols]
            for name, cfg in configs.items():
                def call(cfg=cfg, mask=mask, a=a, b=b):
                    return stuning.sddmm(mask, a, b, config=cfg)
                check_close(call().values, ref, f"{case} {layout} {name}")
                us = probe_time_us(call, SMOKE)
                rows.append({"case": case, "family": family, "layout": layout, "kernel": name, "us": us,
                             "a_strides": list(a.stride()), "b_strides": list(b.stride())})
                print(f"{case:38} {layout:9} {name:7} {us:9.1f} us", flush=True)
    out = os.environ.get("OUT", ".")
    with open(os.path.join(out, "sddmm_layouts.json"), "w") as f:
        device_name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
        json.dump({"device": device_name, "torch": torch.__version__, "rows": rows}, f, indent=1)
    print(f"\n{'case':38} " + " ".join(f"{lay:>10}" for lay in LAYOUTS) + "   (us; A k/B k is what the tuner times)")
    for case in CASES:
        for name in KERNELS:
            us = {r["layout"]: r["us"] for r in rows if r["case"] == case and r["kernel"] == name}
            print(f"{case[:31] + ' ' + name:38} " + " ".join(f"{us[lay]:10.1f}" for lay in LAYOUTS))


if __name__ == "__main__":
    main()
