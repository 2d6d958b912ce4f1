"""Probe fp16 partial sums in the sliced-ELL SpMM kernel at wide N (fp16).

Under Nsight Compute (BENCHMARKS.md 7q) the fp16 sliced-ELL picks at N = 2048 keep the issue slots
53-58% busy, L1 49-55% and L2 61-71%: unlike fp32 (L1 94%), no unit is full. Per multiply-add they
issue 3.2 instructions in sm_90a SASS, two of them the fp16-to-fp32 conversion of B's element and
the fp32 FFMA. Here each thread instead keeps fp16 partial sums, one packed HFMA2 per two
multiply-adds, and adds them into the fp32 accumulator every ``F16_STEPS`` steps (2.1 instructions
per multiply-add between the adds, 2.3-2.6 with them; ``scripts/sass_stats.py``-style counts).
The cost is accuracy: up to ``F16_STEPS`` products summed in fp16 before the fp32 sum.

For each problem (4096 x 4096, uniform rows, ``PROBE_NS`` x ``PROBE_SPARSITIES``) it times the
library's pick, then the pick's tiles (or, where the pick is the CSR kernel, 8x8x128 slices) in this
kernel at F16_STEPS = 0 (plain fp32 accumulation: the library's kernel, re-written here) and at
each of ``PROBE_F16_STEPS``, with warps 2 and 4; each checked against a float64 reference, its
error recorded.

    python3 scripts/probe_spmm_f16_partial.py          # $OUT/spmm_f16_partial_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_f16_partial.py   # tiny, CPU
"""

from __future__ import annotations

import json
import os

import torch
import triton
import triton.language as tl
from probe_harness import check_close, probe_time_us, spmm_baseline_row, spmm_problems, write_results
from stuning.kernels.spmm import b_row_index

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
NS = [16] if SMOKE else [int(v) for v in os.environ.get("PROBE_NS", "2048,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
F16_STEPS = [int(v) for v in os.environ.get("PROBE_F16_STEPS", "2,4,8").split(",")]
M, K = (64, 64) if SMOKE else (4096, 4096)


@triton.jit
def _sell_partial_kernel(
    slice_ptr, col_ptr, val_ptr, row_id_ptr, b_ptr, y_ptr,
    stride_bk, stride_bn, stride_ym, stride_yn,
    SLICE_ROWS: tl.constexpr, STEP: tl.constexpr, BLOCK_N: tl.constexpr, VEC: tl.constexpr,
    F16_STEPS: tl.constexpr,
):
    pid_s = tl.program_id(0)
    pid_n = tl.program_id(1)
    start = tl.multiple_of(tl.load(slice_ptr + pid_s).to(tl.int64), SLICE_ROWS * STEP)
    end = tl.load(slice_ptr + pid_s + 1).to(tl.int64)
    length = (end - start) // SLICE_ROWS
    slot = tl.arange(0, SLICE_ROWS)
    rows = tl.load(row_id_ptr + pid_s * SLICE_ROWS + slot).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, VEC), VEC)
    acc = tl.zeros((SLICE_ROWS, STEP, BLOCK_N), dtype=tl.float32)
    part = tl.zeros((SLICE_ROWS, STEP, BLOCK_N), dtype=tl.float16)
    for step in range(0, length, STEP):
        idx = start + (step + tl.arange(0, STEP))[None, :, None] * SLICE_ROWS + slot[:, None, None]
        cols = b_row_index(tl.load(col_ptr + idx), True)
        b = tl.load(b_ptr + (cols * stride_bk + offs_n[None, None, :] * stride_bn))
        if F16_STEPS == 0:
            acc += tl.load(val_ptr + idx).to(tl.float32) * b.to(tl.float32)
        else:
            part = tl.fma(tl.load(val_ptr + idx), b, part)
            if (step // STEP) % F16_STEPS == F16_STEPS - 1:
                acc += part.to(tl.float32)
                part = tl.zeros((SLICE_ROWS, STEP, BLOCK_N), dtype=tl.float16)
    acc += part.to(tl.float32)
    y_ptrs = y_ptr + rows[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, tl.sum(acc, axis=1).to(y_ptr.dtype.element_ty), mask=(rows >= 0)[:, None])


def sell_run(a, x, rows: int, step: int, block_n: int, vec: int, warps: int, f16_steps: int, *,
             swizzle: bool = False, maxnreg: int | None = None):
    """A call of the kernel on A cut into slices (``maxnreg``: a cap on registers per thread)."""
    from stuning.formats import SlicedELLMatrix

    s = SlicedELLMatrix.from_csr(a, rows, swizzle, step)
    extra = {} if maxnreg is None else {"maxnreg": maxnreg}
    y = torch.empty(a.shape[0], x.shape[1], dtype=x.dtype, device=x.device)
    grid = (s.slice_ptr.numel() - 1, triton.cdiv(x.shape[1], block_n))

    def run():
        _sell_partial_kernel[grid](s.slice_ptr, s.cols, s.values, s.row_ids, x, y, x.stride(0), x.stride(1),
                                   y.stride(0), y.stride(1), SLICE_ROWS=rows, STEP=step, BLOCK_N=block_n, VEC=vec,
                                   F16_STEPS=f16_steps, num_warps=warps, num_stages=1, **extra)
        return y

    return run


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y.double() - ref).norm() / ref.norm())


def main() -> int:
    device = "cpu" if SMOKE else "cuda"
    rows_out = []
    for p in spmm_problems(M, K, NS, SPARSITIES, device):
        n, a, x, pick = p.n, p.a, p.x, p.pick
        row = {**spmm_baseline_row(p, SMOKE), "runs": []}
        tiles = ((pick.rows, pick.nnz_step, pick.block_n, pick.vec) if pick.kernel == "sell"
                 else (8, 8, min(128, n), 8))
        if SMOKE:
            tiles = (4, 4, 16, 8)
        for warps in (2, 4):
            for f16 in (0, *F16_STEPS):
                run = sell_run(a, x, *tiles, warps, f16)
                y = run()
                check_close(y, p.ref, f"n={n} {tiles} w{warps} f16={f16}")
                row["runs"].append({"tiles": tiles, "warps": warps, "f16_steps": f16, "rel_err": rel_err(y, p.ref),
                                    "us": probe_time_us(run, SMOKE)})
        base = min(r["us"] for r in row["runs"] if r["f16_steps"] == 0)
        best = min((r for r in row["runs"] if r["f16_steps"]), key=lambda r: r["us"])
        row.update(fp32_best_us=base, f16_best_us=best["us"], f16_best=best["f16_steps"], gain=base / best["us"])
        rows_out.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    write_results(rows_out, "spmm_f16_partial_probe.json")
    print(f"{'n':>5} {'zeros':>6} {'cuBLAS':>7} {'pick':>7} {'fp32 acc':>9} {'f16 parts':>10} {'steps':>6} "
          f"{'gain':>5} {'err fp32':>9} {'err f16':>9}")
    for r in rows_out:
        err0 = min(x["rel_err"] for x in r["runs"] if x["f16_steps"] == 0)
        err1 = max(x["rel_err"] for x in r["runs"] if x["f16_steps"] == r["f16_best"])
        print(f"{r['n']:>5} {r['sparsity']:>6} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {r['fp32_best_us']:>9.1f} "
              f"{r['f16_best_us']:>10.1f} {r['f16_best']:>6} {r['gain']:>5.2f} {err0:>9.1e} {err1:>9.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
