"""Probe the ceiling of "load as sparse, compute as dense" for fp32 SpMM: a dense Triton matmul on the
tensor cores in tf32x3 (three TF32 products: fp32-level accuracy), against SGEMM with TF32 off.

fp32 SpMM from 80% zeros at N >= 128 runs 0.85-0.90x SGEMM on the gather kernels (BENCHMARKS.md 8w),
which are L1-bound there (7q). A tf32x3 kernel that rebuilt A's tiles on chip could at best run as
fast as this dense one, whatever the sparsity (random masks leave no tile empty at 80-95%): if that
is not well ahead of SGEMM, such a kernel is not worth building. Per shape and N: cuBLAS SGEMM (TF32
off), cuBLAS with TF32 (one product: ~1e-3 error, for scale), and the best of a grid of Triton
tf32x3 configs on X row-major and on X^T (K contiguous, SparseLinear's input), each checked against
float64 first. CUDA-graph replays behind an L2 flush.

    python3 scripts/probe_tf32x3_ceiling.py     # $OUT/tf32x3_ceiling.json, a table last
"""

from __future__ import annotations

import functools
import itertools
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_harness import best_checked, checked_time_us, probe_time_us, write_results  # noqa: E402


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
                   PRECISION: tl.constexpr):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    width = GROUP * grid_n
    first_m = (pid // width) * GROUP
    group = min(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % width) % group
    pid_n = (pid % width) // group
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BK), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BK) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def triton_mm(a, b, out, bm, bn, bk, warps, stages, precision="tf32x3"):
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _matmul_kernel[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         out.stride(0), out.stride(1), BM=bm, BN=bn, BK=bk, GROUP=8, PRECISION=precision,
                         num_warps=warps, num_stages=stages)
    return out


CONFIGS = [c for c in itertools.product((64, 128), (64, 128, 256), (32,), (4, 8), (3, 4))
           if c[0] * c[1] // (32 * c[3]) <= 128 and (c[0] + c[1]) * c[2] * 4 * c[4] <= 200_000]


def main():
    shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get(
        "PROBE_SHAPES", "4096x4096,11008x4096,3072x768").split(",")]
    ns = [int(v) for v in os.environ.get("PROBE_NS", "128,2048").split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for (m, k), n in itertools.product(shapes, ns):
        w = torch.randn(m, k, generator=gen).cuda()
        x = torch.randn(k, n, generator=gen).cuda()
        xt = x.t().contiguous().t()  # K contiguous
        ref = w.double() @ x.double()
        out = torch.empty(m, n, device="cuda")
        sgemm = probe_time_us(functools.partial(torch.matmul, w, x), False)
        torch.backends.cuda.matmul.allow_tf32 = True
        tf32 = probe_time_us(functools.partial(torch.matmul, w, x), False)
        torch.backends.cuda.matmul.allow_tf32 = False
        row = {"m": m, "k": k, "n": n, "sgemm_us": sgemm, "cublas_tf32_us": tf32}
        for label, xin in (("x", x), ("xt", xt)):
            results = {str(c): checked_time_us(functools.partial(triton_mm, w, xin, out, *c), ref, f"{c}", tol=1e-5)
                       for c in CONFIGS}
            best, us, failed = best_checked(results)
            row[f"tf32x3_{label}_us"], row[f"tf32x3_{label}_best"] = us, best
            row[f"tf32x3_{label}_failed"] = len(failed)
            err = float((triton_mm(w, xin, out, *eval(best)).double() - ref).norm() / ref.norm()) if us == us else None
            row[f"tf32x3_{label}_err"] = err
        print(row, flush=True)
        rows.append(row)
        write_results(rows, "tf32x3_ceiling.json")
    print("\n| M x K | N | SGEMM | cuBLAS tf32 | tf32x3 X | tf32x3 X^T | SGEMM / tf32x3 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        best = min(r["tf32x3_x_us"], r["tf32x3_xt_us"])
        print(f"| {r['m']}x{r['k']} | {r['n']} | {r['sgemm_us']:.1f} | {r['cublas_tf32_us']:.1f} | "
              f"{r['tf32x3_x_us']:.1f} | {r['tf32x3_xt_us']:.1f} | {r['sgemm_us'] / best:.2f}x |")


if __name__ == "__main__":
    main()
