"""Probe a tiled SpMM design on the GPU: unstructured W expanded tile by tile into tensor-core dots.

Not a shipped kernel. The CSR SpMM gathers a row of X per nonzero of W, so at N >= 128 it moves
nnz x N x 2 bytes through L2 (215 MB at 95%, 4096 x 4096, N = 128) and loses to dense cuBLAS
(BENCHMARKS.md 7c). This design reuses X across a block of rows instead:

  W (M x K) is cut into BM x BK tiles; each row of a tile keeps its nonzeros in R slots (local
  column, value; padded with value 0), R the most any row of any tile holds. A program owns a
  BM x BN block of Y; per K block it loads the tile's slots, expands them into a dense BM x BK tile
  in registers (one compare-and-select per slot), and multiplies it with the X tile by ``tl.dot``.

Timed against dense cuBLAS and stuning's own `spmm` (its database or cost model) at 4096 x 4096,
N = 16 / 128 / 2048, 90 / 95 / 98 % zeros, fp16, over a sample of configs; each config is checked
against a float64 reference first.

    PROBE_CONFIGS=12 python3 scripts/probe_spmm_tiled.py        # $OUT gets spmm_tiled_probe.json

First run (H200, 2026-11-23, PROBE_NS=128,2048 PROBE_SPARSITIES=0.95 PROBE_CONFIGS=5;
benchmarks/h200-spmm-tiled-probe/run1.json): 369 us at N = 128 and 2088 us at N = 2048 against
cuBLAS's 9.5 / 89.6 and the CSR kernel's 38.7 / 538: 0.03-0.04x cuBLAS. Expanding R = 10-14 slots
by compare-and-select over the whole BM x BK tile costs far more than the dot it feeds; the next
variant to probe builds the tile in shared memory by scattered stores, or sorts W's nonzeros into
tiles with one slot per column (ELL over columns) so each slot is a row of the tile.
Through the interpreter (TRITON_INTERPRET=1) it only checks the design on small shapes.
"""

import itertools
import json
import os
import random

import torch
import triton
import triton.language as tl
import triton.testing

INTERP = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@triton.jit
def _spmm_tiled_kernel(
    col_ptr, val_ptr, x_ptr, y_ptr,
    M, N, K_BLOCKS,
    stride_xk, stride_ym,
    R: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = tl.arange(0, BM)
    ks = tl.arange(0, BK)
    ns = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    # Slots of tile (pid_m, kb): [BM, R] contiguous, tiles of one row block consecutive in kb.
    tile = (pid_m * K_BLOCKS) * BM * R
    for kb in range(0, K_BLOCKS):
        w = tl.zeros((BM, BK), dtype=tl.float32)
        for r in tl.static_range(R):
            c = tl.load(col_ptr + tile + rows * R + r)
            v = tl.load(val_ptr + tile + rows * R + r).to(tl.float32)
            w = tl.where(c[:, None] == ks[None, :], v[:, None], w)
        x = tl.load(x_ptr + (kb * BK + ks)[:, None] * stride_xk + ns[None, :], mask=ns[None, :] < N, other=0.0)
        if UPCAST:
            acc += tl.dot(w, x.to(tl.float32))
        else:
            acc += tl.dot(w.to(x.dtype), x)
        tile += BM * R
    out_rows = pid_m * BM + rows
    tl.store(y_ptr + out_rows[:, None] * stride_ym + ns[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(out_rows[:, None] < M) & (ns[None, :] < N))


def tile_slots(w: torch.Tensor, bm: int, bk: int):
    """(cols uint8-range int32 [M/BM, K/BK, BM, R], vals, R) of ``w``; M, K multiples of BM, BK."""
    m, k = w.shape
    t = w.reshape(m // bm, bm, k // bk, bk).permute(0, 2, 1, 3)  # [Mb, Kb, BM, BK]
    nz = t != 0
    r = max(1, int(nz.sum(-1).max()))
    # Stable order of the nonzero columns first: the top-r positions of a 0/1 key with column tiebreak.
    key = nz.to(torch.int32) * (2 * bk) + (bk - torch.arange(bk, device=w.device))
    cols = torch.topk(key, r, dim=-1).indices.to(torch.int32)
    vals = torch.gather(t, -1, cols.long())
    return cols.contiguous(), vals.contiguous(), r


def spmm_tiled(cols, vals, r, x, m, bm, bn, bk, warps=4, stages=2):
    k, n = x.shape
    y = torch.empty(m, n, device=x.device, dtype=x.dtype)
    grid = (m // bm, triton.cdiv(n, bn))
    _spmm_tiled_kernel[grid](
        cols, vals, x, y, m, n, k // bk, x.stride(0), y.stride(0),
        R=r, BM=bm, BN=bn, BK=bk, UPCAST=INTERP and x.dtype == torch.bfloat16, num_warps=warps, num_stages=stages,
    )
    return y


def configs(n, rng, count):
    grid = [
        (bm, bn, bk, warps, stages)
        for bm, bn, bk, warps, stages in itertools.product((64, 128), (16, 32, 64, 128, 256), (32, 64),
                                                           (4, 8), (2, 3, 4))
        if bn <= max(16, triton.next_power_of_2(n))
        # Compiled for sm_90a with Triton 3.6: above these, per-thread W tile or accumulator spilled.
        and bm * bk <= 16 * 32 * warps and bm * bn <= 128 * 32 * warps
    ]
    rng.shuffle(grid)
    return grid[:count]


def main():
    device = "cuda" if torch.cuda.is_available() and not INTERP else "cpu"
    small = device == "cpu"
    shapes = [(128, 128)] if small else [(4096, 4096)]
    ns = [16, 40] if small else [int(v) for v in os.environ.get("PROBE_NS", "16,128,2048").split(",")]
    sparsities = [0.9] if small else [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
    count = 2 if small else int(os.environ.get("PROBE_CONFIGS", "12"))
    rng = random.Random(0)
    gen = torch.Generator(device=device).manual_seed(0)
    rows = []
    for (m, k), sparsity, n in itertools.product(shapes, sparsities, ns):
        keep = torch.rand(m, k, generator=gen, device=device) >= sparsity
        w = (torch.randn(m, k, generator=gen, device=device) * keep).to(torch.float16)
        x = torch.randn(k, n, generator=gen, device=device).to(torch.float16)
        ref = w.double() @ x.double()
        row = {"m": m, "k": k, "n": n, "sparsity": sparsity}
        best = None
        for bm, bn, bk, warps, stages in configs(n, rng, count):
            cols, vals, r = tile_slots(w, bm, bk)

            def run(cfg=(cols, vals, r, x, m, bm, bn, bk, warps, stages)):
                return spmm_tiled(*cfg)

            err = ((run().double() - ref).norm() / ref.norm()).item()
            if err > 1e-2:
                cfg = (bm, bn, bk, warps, stages)
                raise SystemExit(f"wrong result {err:.2e} at {(m, k, n, sparsity)}, config {cfg}")
            if small:
                continue
            t = triton.testing.do_bench_cudagraph(run) * 1e3
            if best is None or t < best[0]:
                best = (t, (bm, bn, bk, warps, stages), r)
        if small:
            print(f"ok {row}")
            continue
        import stuning

        csr = stuning.CSRMatrix.from_dense(w)
        row["tiled_us"], row["tiled_cfg"], row["slots"] = best[0], best[1], best[2]
        row["cublas_us"] = triton.testing.do_bench_cudagraph(lambda w=w, x=x: w @ x) * 1e3
        row["csr_us"] = triton.testing.do_bench_cudagraph(lambda csr=csr, x=x: stuning.spmm(csr, x)) * 1e3
        rows.append(row)
        print(json.dumps(row), flush=True)
    if rows:
        out = os.environ.get("OUT", ".")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "spmm_tiled_probe.json"), "w") as f:
            json.dump(rows, f, indent=1)
        print(f"{'n':>6} {'sparsity':>8} {'slots':>5} {'cublas':>8} {'csr':>8} {'tiled':>8} {'tiled/cublas':>12}")
        for r in rows:
            print(f"{r['n']:>6} {r['sparsity']:>8} {r['slots']:>5} {r['cublas_us']:>8.1f} {r['csr_us']:>8.1f} "
                  f"{r['tiled_us']:>8.1f} {r['cublas_us'] / r['tiled_us']:>12.2f}")


if __name__ == "__main__":
    main()
