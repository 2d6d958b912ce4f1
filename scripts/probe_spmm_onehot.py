"""Probe a tensor-core SpMM for decode widths: gathered rows of X summed by a one-hot ``tl.dot``.

Not a shipped kernel (yet). At N = 128 the CSR kernel is bound by instruction issue, not memory
(ncu, BENCHMARKS.md 7i: 69% issue slots busy, 3.0 IPC, DRAM at 3%): every multiply-add of a
gathered element of X costs about 5-7 SASS instructions (fp16 -> fp32 conversion, FFMA, 64-bit
addresses; ``scripts/sass_stats.py --kernel spmm``).

This design keeps the gather and moves the arithmetic to the tensor cores. A program owns BM rows
of W and BN columns of Y. Its nonzeros are one list (W's rows of the block, in column order or in
row order), STEP at a time:

    Xg = X[col[s], n-block]            (STEP x BN), gathered
    E  = val[s] where lrow[s] == r     (BM x STEP), one compare-and-select per (row, nonzero)
    acc += tl.dot(E, Xg)               (BM x BN), fp32

so the per-nonzero work on CUDA cores is BM selects and the gather, and each row's sum is the dot.
In column order the STEP nonzeros of a step share rows of X (at 95% zeros a column of a 32-row
block holds 1.6 nonzeros), and all programs sweep X's rows from the first to the last together.

Timed (CUDA graphs, L2 flushed) against dense cuBLAS and stuning's own pick, 4096 x 4096 fp16,
uniform random rows, over a grid of (order, BM, STEP, BN, warps, stages); each config is checked
against a float64 reference first.

    python3 scripts/probe_spmm_onehot.py                      # $OUT/spmm_onehot_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_onehot.py   # tiny, CPU

First run (H200, 2026-11-24, defaults; benchmarks/h200-spmm-onehot-probe/run1.json, BENCHMARKS.md
7l): 1.6-2.7x slower than the CSR kernel everywhere (N = 128, 95%: 68.9 us against 41.9, cuBLAS
15.9). Column order and row order ran within 1% of each other, and the time followed the number
of steps a program walks (about 1.2 us a step), not the bytes: each step waits on its indices,
then on its gather, with 4 programs an SM to hide it. Not pursued: even at full bandwidth the
gathered rows of X (nnz x N x 2 bytes through L2, 215 MB at 95% and N = 128) take longer than
cuBLAS's whole product.
"""

from __future__ import annotations

import functools
import itertools
import json
import os

import torch
import triton
import triton.language as tl
from probe_harness import check_close, probe_time_us, spmm_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
NS = [int(v) for v in os.environ.get("PROBE_NS", "64,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
M, K = (64, 64) if SMOKE else (int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
SECONDS = float(os.environ.get("PROBE_SECONDS", "300"))


@triton.jit
def _spmm_onehot_kernel(blk_ptr, col_ptr, lrow_ptr, val_ptr, x_ptr, y_ptr, M, N, stride_xk, stride_ym,
                        BM: tl.constexpr, STEP: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    start = tl.load(blk_ptr + pid_m)
    end = tl.load(blk_ptr + pid_m + 1)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rows = tl.arange(0, BM)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    # Blocks are padded to a multiple of STEP (value 0, column and row 0): no masks in the loop.
    for s in tl.range(start, end, STEP, num_stages=STAGES):
        idx = s + tl.arange(0, STEP)
        cols = tl.load(col_ptr + idx).to(tl.int32)
        lrow = tl.load(lrow_ptr + idx).to(tl.int32)
        vals = tl.load(val_ptr + idx)
        xg = tl.load(x_ptr + cols[:, None] * stride_xk + offs_n[None, :])
        e = tl.where(lrow[None, :] == rows[:, None], vals[None, :], 0.0).to(xg.dtype)
        acc = tl.dot(e, xg, acc)
    out_rows = pid_m * BM + rows
    tl.store(y_ptr + out_rows[:, None] * stride_ym + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(out_rows < M)[:, None])


def block_lists(w: torch.Tensor, bm: int, step: int, order: str):
    """W's nonzeros as one list per block of ``bm`` rows, each padded to a multiple of ``step``."""
    m, k = w.shape
    r, c = torch.nonzero(w, as_tuple=True)
    v = w[r, c]
    blk = r // bm
    key = blk * (k * bm) + (c * bm + r % bm if order == "col" else (r % bm) * k + c)
    o = torch.argsort(key)
    r, c, v, blk = r[o], c[o], v[o], blk[o]
    nblk = triton.cdiv(m, bm)
    counts = torch.bincount(blk, minlength=nblk)
    padded = (counts + step - 1) // step * step
    ptr = torch.zeros(nblk + 1, dtype=torch.int64, device=w.device)
    ptr[1:] = torch.cumsum(padded, 0)
    total = int(ptr[-1])
    starts = torch.zeros(nblk + 1, dtype=torch.int64, device=w.device)
    starts[1:] = torch.cumsum(counts, 0)
    pos = ptr[blk] + (torch.arange(r.numel(), device=w.device) - starts[blk])
    cols = torch.zeros(total, dtype=torch.int16 if k < 32768 else torch.int32, device=w.device)
    lrow = torch.zeros(total, dtype=torch.uint8, device=w.device)
    vals = torch.zeros(total, dtype=w.dtype, device=w.device)
    cols[pos] = c.to(cols.dtype)
    lrow[pos] = (r % bm).to(torch.uint8)
    vals[pos] = v
    return ptr.to(torch.int32), cols, lrow, vals


def spmm_onehot(lists, x, m, bm, step, bn, warps, stages):
    ptr, cols, lrow, vals = lists
    n = x.shape[1]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    grid = (ptr.numel() - 1, triton.cdiv(n, bn))
    _spmm_onehot_kernel[grid](ptr, cols, lrow, vals, x, y, m, n, x.stride(0), y.stride(0),
                              BM=bm, STEP=step, BN=bn, STAGES=stages, num_warps=warps)
    return y


def timer(fn) -> float:
    return probe_time_us(fn, SMOKE)




def grid(n: int):
    for order, bm, step, bn, warps, stages in itertools.product(
            ("col", "row"), (16, 32, 64), (16, 32, 64), (64, 128), (4, 8), (2, 3)):
        if bn > max(16, n) or (bm == 64 and order == "row"):
            continue
        yield order, bm, step, bn, warps, stages


def main() -> int:
    import stuning

    device = "cpu" if SMOKE else "cuda"
    rows_out = []
    for p in spmm_problems(M, K, NS if not SMOKE else [64], SPARSITIES, device, seconds=SECONDS):
        n, sparsity, w, x, ref, a = p.n, p.sparsity, p.w, p.x, p.ref, p.a
        row = {"m": M, "k": K, "n": n, "sparsity": sparsity, "nnz": a.nnz}
        row["cublas_us"] = timer(functools.partial(torch.matmul, w, x))
        row["pick"] = p.pick.as_dict()
        row["stuning_us"] = timer(functools.partial(stuning.spmm, a, x))
        lists = {}
        times = []
        for cfg in grid(n):
            order, bm, step, bn, warps, stages = cfg
            name = f"{order}:{bm}x{step}x{bn}:{warps}:{stages}"
            key = (order, bm, step)
            if key not in lists:
                lists[key] = block_lists(w, bm, step, order)
            try:
                run = functools.partial(spmm_onehot, lists[key], x, M, bm, step, bn, warps, stages)
                check_close(run(), ref, name)
                t = timer(run)
                times.append({"config": name, "us": t})
            except Exception as e:
                times.append({"config": name, "error": str(e).splitlines()[0][:200]})
            if SMOKE and len(times) >= 3:
                break
        ok = sorted((t for t in times if "us" in t), key=lambda t: t["us"])
        row["best"] = ok[:5]
        row["errors"] = [t for t in times if "error" in t][:3]
        row["configs"] = times
        rows_out.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "configs"}), flush=True)

    write_results(rows_out, "spmm_onehot_probe.json")
    print(f"{'n':>5} {'sparsity':>8} {'cublas':>8} {'stuning':>8} {'onehot':>8}  vs cuBLAS: stuning onehot  best")
    for r in rows_out:
        best = r["best"][0] if r["best"] else {"us": float("nan"), "config": "-"}
        print(f"{r['n']:>5} {r['sparsity']:>8} {r['cublas_us']:>8.1f} {r['stuning_us']:>8.1f} {best['us']:>8.1f}"
              f"  {r['cublas_us'] / r['stuning_us']:>17.2f} {r['cublas_us'] / best['us']:>6.2f}  {best['config']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
