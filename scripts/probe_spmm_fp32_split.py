"""Probe fp32 SpMM on the fp16 tensor cores: the scatter kernel's fp32 path (``kernels/fp16_split.py``),
each operand split into two fp16 parts and three products summed in fp32, against SGEMM (TF32 off)
and the library's fp32 pick, through ``stuning.spmm`` as users call it.

At 80% zeros and N >= 128 the fp32 gather kernels run 0.74-1.18x SGEMM (BENCHMARKS.md 8w), L1-bound;
a dense tf32x3 product in Triton gained nothing at N = 128 (8x). (Commit 4a1b861's version of this
probe ran the same product with the kernel patched from outside: BENCHMARKS.md 9l, call 1.)

Per problem: SGEMM, the pick, and a few scatter configs (the shapes the fp16 entries chose, each
split and its most stages), each checked against float64 at 1e-5 (the tests' fp32 tolerance) with
its error recorded; CUDA-graph replays behind an L2 flush.

    python3 scripts/probe_spmm_fp32_split.py     # $OUT/spmm_fp32_split.json, a table last
"""

from __future__ import annotations

import functools
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_harness import check_close, env_list, env_shapes, probe_time_us, write_results  # noqa: E402


def configs_for(m: int, k: int, n: int, nnz: int):
    from stuning.kernels import spmm_scatter as sc
    from stuning.kernels.spmm import SpMMProblem

    space = sc.config_space(SpMMProblem(m, k, n, nnz, torch.float32, 4))
    keep = [c for c in space if (c.rows, c.nnz_step) in ((64, 128), (128, 64), (64, 64)) and c.split_k in (1, 2, 4)]
    widest = max(c.block_n for c in keep)
    keep = [c for c in keep if c.block_n == widest or n <= 128]
    top = {}
    for c in keep:  # the most stages a shape and split has: the fp16 entries took them
        key = (c.rows, c.nnz_step, c.block_n, c.split_k)
        if key not in top or c.num_stages > top[key].num_stages:
            top[key] = c
    return list(top.values())


def main():
    import stuning

    shapes = env_shapes("PROBE_SHAPES", "4096x4096,11008x4096,4096x11008,3072x768,768x3072")
    ns = env_list("PROBE_NS", "128,2048", int)
    sparsities = env_list("PROBE_SPARSITIES", "0.8,0.9")
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for (m, k), sparsity in itertools.product(shapes, sparsities):
        w = torch.randn(m, k, generator=gen)
        w = (w * (torch.rand(m, k, generator=gen) >= sparsity)).cuda()
        a = stuning.CSRMatrix.from_dense(w, pad_to=4)
        for n in ns:
            x = torch.randn(k, n, generator=gen).cuda()
            ref = w.double() @ x.double()
            row = {"m": m, "k": k, "n": n, "sparsity": sparsity, "nnz": a.nnz}
            row["sgemm_us"] = probe_time_us(functools.partial(torch.matmul, w, x), False)
            row["sgemm_err"] = float(((w @ x).double() - ref).norm() / ref.norm())
            check_close(stuning.spmm(a, x), ref, "library pick", 1e-5)
            row["pick_us"] = probe_time_us(functools.partial(stuning.spmm, a, x), False)
            row["pick_err"] = float((stuning.spmm(a, x).double() - ref).norm() / ref.norm())
            best, errors, errs = None, {}, {}
            for cfg in configs_for(m, k, n, a.nnz):
                label = f"{cfg.rows}x{cfg.nnz_step}x{cfg.block_n}:{cfg.split_k}:{cfg.num_stages}"
                run = functools.partial(stuning.spmm, a, x, config=cfg)
                try:
                    y = run()
                    errs[label] = float((y.double() - ref).norm() / ref.norm())
                    check_close(y, ref, label, 1e-5)
                    us = probe_time_us(run, False)
                except Exception as e:  # noqa: BLE001 - a failing config is a finding
                    errors[label] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}"
                    continue
                row[f"scatter {label}"] = us
                if best is None or us < row["scatter_us"]:
                    best, row["scatter_us"] = label, us
            row["scatter_best"], row["errors"], row["scatter_errs"] = best, errors, errs
            if best is not None:
                row["scatter_err"] = errs[best]
            print({k_: v for k_, v in row.items() if not k_.startswith("scatter ")}, flush=True)
            rows.append(row)
            write_results(rows, "spmm_fp32_split.json")
        del a, w
    print("\n| M x K | N | zeros | SGEMM | pick | scatter fp32 (best) | SGEMM / scatter | SGEMM / pick | "
          "err scatter / SGEMM |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r["scatter_best"] is None:
            print(f"| {r['m']}x{r['k']} | {r['n']} | {r['sparsity']:.0%} | failed: {list(r['errors'].items())[:1]} |")
            continue
        print(f"| {r['m']}x{r['k']} | {r['n']} | {r['sparsity']:.0%} | {r['sgemm_us']:.1f} | {r['pick_us']:.1f} | "
              f"{r['scatter_us']:.1f} ({r['scatter_best']}) | {r['sgemm_us'] / r['scatter_us']:.2f}x | "
              f"{r['sgemm_us'] / r['pick_us']:.2f}x | {r['scatter_err']:.1e} / {r['sgemm_err']:.1e} |")


if __name__ == "__main__":
    main()
