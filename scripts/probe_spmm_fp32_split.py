"""Probe fp32 SpMM on the fp16 tensor cores: each fp32 operand split into two fp16 parts, three
products summed in fp32 ("fp16x3"), through the scatter kernel as it stands.

At 80% zeros and N >= 128 the fp32 gather kernels run 0.74-1.18x SGEMM (TF32 off; BENCHMARKS.md 8w),
L1-bound; a dense tf32x3 product in Triton gained nothing at N = 128 (8x), because TF32 runs at half
fp16's rate and Triton's tf32x3 at 3.7-4.8x one TF32 product. fp16 parts keep 22 of fp32's 24 bits
if each operand is scaled by a power of two first (fp16's range is narrow): per row of A, per column
of X, so that |x| < 16. Then with hi = fp16(x) and lo = fp16((x - hi) * 2^11),

    2^11 (A X) ~= A_hi (2^11 X_hi) + A_hi X_lo + A_lo X_hi

which is ONE fp16 product of [A_hi | A_hi | A_lo] (M x 3K, built once with the weights) and the
stack [2^11 X_hi ; X_lo ; X_hi] (3K x N, split at run time by one Triton pass), into an fp32 Y that
one more pass scales back. The scatter kernel runs the product unchanged but for an fp32 output
(its epilogue casts to Y's type; patched here past the launcher's dtype check; clusters off, whose
stores are 16-bit).

Per problem: SGEMM, the library's fp32 pick, the split pass, the best of a few scatter configs and
the scale pass, each timed alone and the whole chain once; every result checked against float64
at 1e-5 (the tests' fp32 tolerance).

    python3 scripts/probe_spmm_fp32_split.py     # $OUT/spmm_fp32_split.json, a table last
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
from probe_harness import check_close, probe_time_us, write_results  # noqa: E402

LO_SCALE = 2048.0  # 2^11: fp16's 11 significant bits


def pow2_scale(amax: torch.Tensor) -> torch.Tensor:
    """Powers of two that bring each ``amax`` into [8, 16): fp16's hi parts then stay < 16 and
    2^11 hi < 2^15 (fp16's largest finite value is 65504)."""
    _, exp = torch.frexp(amax.float())  # amax in [2^(e-1), 2^e)
    return torch.ldexp(torch.ones_like(amax, dtype=torch.float32), 4 - exp)


def split_weights(w: torch.Tensor):
    """(A3 = [A_hi | A_hi | A_lo] fp16 (M x 3K), the rows' scales) of an fp32 W."""
    r = pow2_scale(w.abs().amax(1))
    ws = w * r[:, None]
    hi = ws.half()
    lo = ((ws - hi.float()) * LO_SCALE).half()
    return torch.cat([hi, hi, lo], 1), r


@triton.jit
def _split_x_kernel(x_ptr, scale_ptr, out_ptr, K, N, stride_xk, stride_xn, LO: tl.constexpr,
                    BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_k, pid_n = tl.program_id(0), tl.program_id(1)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = (offs_k < K)[:, None] & (offs_n < N)[None, :]
    x = tl.load(x_ptr + offs_k[:, None] * stride_xk + offs_n[None, :] * stride_xn, mask=ok, other=0.0)
    xs = x * tl.load(scale_ptr + offs_n, mask=offs_n < N, other=1.0)[None, :]
    hi = xs.to(tl.float16)
    lo = ((xs - hi.to(tl.float32)) * LO).to(tl.float16)
    out = out_ptr + offs_k[:, None] * N + offs_n[None, :]
    tl.store(out, (hi.to(tl.float32) * LO).to(tl.float16), mask=ok)
    tl.store(out + K * N, lo, mask=ok)
    tl.store(out + 2 * K * N, hi, mask=ok)


def split_x_pass(x: torch.Tensor, x3: torch.Tensor, col_scale: torch.Tensor) -> None:
    """X3 = [2^11 X_hi ; X_lo ; X_hi] of X scaled per column (``col_scale`` written)."""
    k, n = x.shape
    col_scale.copy_(pow2_scale(torch.linalg.vector_norm(x, float("inf"), dim=0)))
    grid = (triton.cdiv(k, 64), triton.cdiv(n, 64))
    _split_x_kernel[grid](x, col_scale, x3, k, n, x.stride(0), x.stride(1), LO=LO_SCALE, BLOCK_K=64, BLOCK_N=64)


@triton.jit
def _unscale_kernel(y_ptr, row_ptr, col_ptr, M, N, LO: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    ptrs = y_ptr + offs_m[:, None] * N + offs_n[None, :]
    r = tl.load(row_ptr + offs_m, mask=offs_m < M, other=1.0)
    c = tl.load(col_ptr + offs_n, mask=offs_n < N, other=1.0)
    y = tl.load(ptrs, mask=ok, other=0.0)
    tl.store(ptrs, y / (LO * r[:, None] * c[None, :]), mask=ok)


def unscale(y: torch.Tensor, row_scale: torch.Tensor, col_scale: torch.Tensor) -> torch.Tensor:
    m, n = y.shape
    _unscale_kernel[(triton.cdiv(m, 64), triton.cdiv(n, 64))](y, row_scale, col_scale, m, n, LO=LO_SCALE,
                                                               BLOCK_M=64, BLOCK_N=64)
    return y


def split_chain(sc, tiles, cfg, x, x3, y, row_scale, col_scale) -> torch.Tensor:
    """The whole fp32 product: split X, the fp16 product into fp32 Y, Y scaled back."""
    split_x_pass(x, x3, col_scale)
    sc.spmm_scatter(tiles, x3, config=cfg, out=y)
    return unscale(y, row_scale, col_scale)


def patched_scatter():
    """The scatter module with fp32 outputs let through and clusters off (their stores are 16-bit)."""
    from stuning.kernels import spmm_scatter as sc

    plain = sc.check_b_and_out

    def check(what, values, b, m, out):
        if out is not None and out.dtype == torch.float32 and out.shape == (m, b.shape[1]):
            return out
        return plain(what, values, b, m, out)

    sc.check_b_and_out = check
    sc.CLUSTER_SPLIT = False
    return sc


def configs_for(sc, m: int, k3: int, n: int, nnz: int):
    from stuning.kernels.spmm import SpMMProblem

    space = sc.config_space(SpMMProblem(m, k3, n, nnz, torch.float16, 4))
    # The shapes the fp16 entries chose (BENCHMARKS.md 8w's database), each split and stage count.
    keep = [c for c in space if (c.rows, c.nnz_step) in ((64, 128), (128, 64), (64, 64)) and c.split_k in (1, 2, 4)]
    widest = max(c.block_n for c in keep)
    keep = [c for c in keep if c.block_n == widest or n <= 128]
    top = {}
    for c in keep:  # the most stages a shape and split has: each entry above took them
        key = (c.rows, c.nnz_step, c.block_n, c.split_k)
        if key not in top or c.num_stages > top[key].num_stages:
            top[key] = c
    return list(top.values())


def main():
    import stuning

    shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get(
        "PROBE_SHAPES", "4096x4096,11008x4096,4096x11008,3072x768,768x3072").split(",")]
    ns = [int(v) for v in os.environ.get("PROBE_NS", "128,2048").split(",")]
    sparsities = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.8,0.9").split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    sc = patched_scatter()
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for (m, k), sparsity in itertools.product(shapes, sparsities):
        w = torch.randn(m, k, generator=gen)
        w = (w * (torch.rand(m, k, generator=gen) >= sparsity)).cuda()
        a32 = stuning.CSRMatrix.from_dense(w, pad_to=4)
        a3_dense, row_scale = split_weights(w)
        a3 = stuning.CSRMatrix.from_dense(a3_dense, pad_to=4)
        del a3_dense
        for n in ns:
            x = torch.randn(k, n, generator=gen).cuda()
            ref = w.double() @ x.double()
            x3 = torch.empty(3 * k, n, dtype=torch.float16, device="cuda")
            col_scale = torch.empty(n, device="cuda")
            y = torch.empty(m, n, device="cuda")
            row = {"m": m, "k": k, "n": n, "sparsity": sparsity, "nnz": a32.nnz}
            row["sgemm_us"] = probe_time_us(functools.partial(torch.matmul, w, x), False)
            check_close(stuning.spmm(a32, x), ref, "library pick", 1e-5)
            row["pick_us"] = probe_time_us(functools.partial(stuning.spmm, a32, x), False)
            row["split_us"] = probe_time_us(functools.partial(split_x_pass, x, x3, col_scale), False)
            split_x_pass(x, x3, col_scale)
            best, best_us, errors = None, float("inf"), {}
            for cfg in configs_for(sc, m, 3 * k, n, a3.nnz):
                label = f"{cfg.rows}x{cfg.nnz_step}x{cfg.block_n}:{cfg.split_k}:{cfg.num_stages}"
                tiles = stuning.formats.ScatterTiles.from_csr(a3, cfg.rows, cfg.nnz_step)
                run = functools.partial(sc.spmm_scatter, tiles, x3, config=cfg, out=y)
                try:
                    y.fill_(float("nan"))
                    run()
                    check_close(unscale(y, row_scale, col_scale), ref, label, 1e-5)
                    us = probe_time_us(run, False)
                except Exception as e:  # noqa: BLE001 - a failing config is a finding
                    errors[label] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}"
                    continue
                row[f"scatter {label}"] = us
                if us < best_us:
                    best, best_us = (cfg, tiles, label), us
            row["errors"] = errors
            if best is None:
                print(row, flush=True)
                rows.append(row)
                continue
            cfg, tiles, label = best
            row["scatter_us"], row["scatter_best"] = best_us, label
            row["unscale_us"] = probe_time_us(functools.partial(unscale, y, row_scale, col_scale), False)

            chain = functools.partial(split_chain, sc, tiles, cfg, x, x3, y, row_scale, col_scale)
            y.fill_(float("nan"))
            out = chain()
            row["err"] = float((out.double() - ref).norm() / ref.norm())
            row["pick_err"] = float((stuning.spmm(a32, x).double() - ref).norm() / ref.norm())
            check_close(out, ref, "chain", 1e-5)
            row["chain_us"] = probe_time_us(chain, False)
            print({k_: v for k_, v in row.items() if not k_.startswith("scatter ")}, flush=True)
            rows.append(row)
            write_results(rows, "spmm_fp32_split.json")
    print("\n| M x K | N | zeros | SGEMM | pick | split | scatter | unscale | chain | SGEMM/chain | SGEMM/pick | err |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "chain_us" not in r:
            print(f"| {r['m']}x{r['k']} | {r['n']} | {r['sparsity']} | failed: {list(r['errors'].items())[:1]} |")
            continue
        print(f"| {r['m']}x{r['k']} | {r['n']} | {r['sparsity']:.0%} | {r['sgemm_us']:.1f} | {r['pick_us']:.1f} | "
              f"{r['split_us']:.1f} | {r['scatter_us']:.1f} | {r['unscale_us']:.1f} | {r['chain_us']:.1f} | "
              f"{r['sgemm_us'] / r['chain_us']:.2f}x | {r['sgemm_us'] / r['pick_us']:.2f}x | {r['err']:.1e} |")


if __name__ == "__main__":
    main()
