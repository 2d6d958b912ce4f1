"""Probe a tensor-core SpMM for decode widths: W's tiles scattered into a zeroed scratch tile, then
one ``tl.dot`` with X's rows.

Not a shipped kernel (yet). At N = 128 the CSR kernel gathers a row of X for every nonzero (215 MB
through L2 at 95% zeros, BENCHMARKS.md 7l), and the tensor-core designs tried so far built W's
dense tile by compares over the whole tile (7c: 40x too slow) or by one-hot products (7l). This one
builds it by memory: each (BM x BK) tile of W is a list of entries, one int32 each (position in
the tile << 16 | the value's 16 bits). A program

    stores its tile's entries into a zeroed scratch tile of its own   (one 2-byte store a nonzero)
    waits at a barrier
    loads the scratch tile (L1) and adds tl.dot(tile, X[k-step, n-block]) to its accumulator
    after the next step's barrier, stores zeros where this step's entries were

so the CUDA cores do a few instructions per nonzero and the tensor cores the dense product. Three
scratch tiles rotate: a tile is zeroed a step after it is read (all threads have read it by the
next barrier) and written again a step later still (all threads have zeroed it by then).

Timed (CUDA graphs, L2 flushed) against dense cuBLAS and stuning's own pick, 4096 x 4096 fp16,
uniform random rows; every config is checked against a float64 reference first (twice: a race
shows as a wrong result).

    python3 scripts/probe_spmm_scatter.py                      # $OUT/spmm_scatter_probe.json, a table last
    PROBE_DTYPE=fp32 python3 scripts/probe_spmm_scatter.py     # fp32 (tf32x3 tiles) against SGEMM
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_scatter.py   # tiny, CPU

First run (H200, 2026-11-24, N = 16 and 128 at 90/95%; benchmarks/h200-spmm-scatter-probe/,
BENCHMARKS.md 7n): at N = 128, 34.2 / 30.5 us against the CSR/ELL picks' 72.1 / 41.9 and cuBLAS's
15.1 / 14.8; at N = 16 slower than the picks (26.7 / 22.3 against 13.8 / 9.5). Not pursued: the
scratch tile's traffic (two partial-sector L2 writes a nonzero, the tile read back every step)
bounds it above cuBLAS, and neither Triton nor Gluon can scatter into shared memory instead.
"""

from __future__ import annotations

import functools
import itertools
import json
import os

import torch
import triton
import triton.language as tl
from probe_harness import check_close, checked_time_us, probe_time_us, spmm_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
NS = [int(v) for v in os.environ.get("PROBE_NS", "16,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
M, K = (96, 160) if SMOKE else (int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
SECONDS = float(os.environ.get("PROBE_SECONDS", "300"))
# fp32: the entries are int64 (position << 32 | the value's bits) and the tiles multiply as three
# TF32 products (tf32x3); cuBLAS's SGEMM runs with TF32 off, on CUDA cores.
DTYPE = {"fp16": torch.float16, "fp32": torch.float32}[os.environ.get("PROBE_DTYPE", "fp16")]
TOL = {torch.float16: 1e-2, torch.float32: 1e-5}[DTYPE]
SLOTS = 3


@triton.jit
def _scatter_tile(slot, ent_ptr, start, end, first, ZERO: tl.constexpr, CHUNK: tl.constexpr):
    """Store a tile's entries (or zeros where they go) into ``slot``: ``first`` holds its first
    CHUNK entries, already loaded; the rest load here."""
    e = first
    for e0 in range(start, end, CHUNK):
        idx = e0 + tl.arange(0, CHUNK)
        ok = idx < end
        if e0 != start:
            e = tl.load(ent_ptr + idx, mask=ok, other=0)
        BITS: tl.constexpr = slot.dtype.element_ty.primitive_bitwidth
        pos = ((e >> BITS) & 0xFFFF).to(tl.int32)
        if ZERO:
            tl.store(slot + pos, tl.zeros((CHUNK,), dtype=slot.dtype.element_ty), mask=ok)
        else:
            if BITS == 16:
                val = (e & 0xFFFF).to(tl.int16).to(slot.dtype.element_ty, bitcast=True)
            else:
                val = e.to(tl.int32).to(slot.dtype.element_ty, bitcast=True)
            tl.store(slot + pos, val, mask=ok)


@triton.jit
def _first_entries(ent_ptr, start, end, CHUNK: tl.constexpr):
    idx = start + tl.arange(0, CHUNK)
    return tl.load(ent_ptr + idx, mask=idx < end, other=0)


@triton.jit
def _x_step(x_ptr, i, offs_k, offs_n, K, N, stride_xk, BK: tl.constexpr):
    ks = i * BK + offs_k
    return tl.load(x_ptr + ks[:, None] * stride_xk + offs_n[None, :],
                   mask=(ks < K)[:, None] & (offs_n < N)[None, :], other=0.0)


@triton.jit
def _next_step(row_tiles, ent_ptr, x_ptr, i, kb1, start, offs_k, offs_n, K, N, stride_xk, BK: tl.constexpr,
               CHUNK: tl.constexpr):
    """Step i + 1's end of entries, first entries and X tile (its entries start at ``start``)."""
    end = tl.load(row_tiles + i + 2, mask=i + 1 < kb1, other=0)
    return end, _first_entries(ent_ptr, start, end, CHUNK), _x_step(x_ptr, i + 1, offs_k, offs_n, K, N, stride_xk, BK)


@triton.jit
def _spmm_scatter_kernel(tile_ptr, ent_ptr, scratch_ptr, x_ptr, y_ptr, M, N, K, stride_xk, stride_ym,
                         K_TILES, STEPS,
                         BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, CHUNK: tl.constexpr,
                         SPLIT: tl.constexpr, PREFETCH: tl.constexpr, PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_s = tl.program_id(1)
    pid_n = tl.program_id(2)
    prog = (pid_m * SPLIT + pid_s) * tl.num_programs(2) + pid_n
    scratch = scratch_ptr + prog.to(tl.int64) * (3 * BM * BK)
    offs_m = tl.arange(0, BM)
    offs_k = tl.arange(0, BK)
    offs_n = pid_n * BN + tl.arange(0, BN)
    tile_offs = offs_m[:, None] * BK + offs_k[None, :]
    kb0 = tl.minimum(pid_s * STEPS, K_TILES)
    kb1 = tl.minimum(kb0 + STEPS, K_TILES)
    row_tiles = tile_ptr + pid_m * K_TILES
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    start = tl.load(row_tiles + kb0)
    end = tl.load(row_tiles + kb0 + 1, mask=kb0 < kb1, other=0)
    # The previous step's entries: none yet. (end, start) is empty like (start, start), but
    # start would alias: Triton carries a variable through the loop only where the body leaves it
    # holding a different value than it entered with, and `prev_start = start` would not.
    prev_start = tl.maximum(end, start)
    prev_end = start
    first = _first_entries(ent_ptr, start, end, CHUNK)
    x = _x_step(x_ptr, kb0, offs_k, offs_n, K, N, stride_xk, BK)
    for i in range(kb0, kb1):
        slot = scratch + (i % 3) * (BM * BK)
        _scatter_tile(slot, ent_ptr, start, end, first, False, CHUNK)
        if PREFETCH:
            # The next step's X, bounds and first entries do not touch the scratch: they load
            # while this step waits at the barrier and multiplies.
            next_end, next_first, next_x = _next_step(row_tiles, ent_ptr, x_ptr, i, kb1, end, offs_k, offs_n, K, N,
                                                      stride_xk, BK, CHUNK)
        tl.debug_barrier()
        # The previous step's tile: every thread read it before this barrier.
        prev_first = _first_entries(ent_ptr, prev_start, prev_end, CHUNK)
        _scatter_tile(scratch + ((i + 2) % 3) * (BM * BK), ent_ptr, prev_start, prev_end, prev_first, True, CHUNK)
        w = tl.load(slot + tile_offs)
        acc = tl.dot(w, x, acc, input_precision=PRECISION)
        prev_start = start
        prev_end = end
        if PREFETCH:
            start = end
            end = next_end
            first = next_first
            x = next_x
        else:
            start = end
            end, first, x = _next_step(row_tiles, ent_ptr, x_ptr, i, kb1, start, offs_k, offs_n, K, N, stride_xk,
                                       BK, CHUNK)
    tl.debug_barrier()
    prev_first = _first_entries(ent_ptr, prev_start, prev_end, CHUNK)
    _scatter_tile(scratch + ((kb1 + 2) % 3) * (BM * BK), ent_ptr, prev_start, prev_end, prev_first, True, CHUNK)
    rows = pid_m * BM + offs_m
    ptrs = y_ptr + rows[:, None] * stride_ym + offs_n[None, :]
    ok = (rows < M)[:, None] & (offs_n < N)[None, :]
    if SPLIT == 1:
        tl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=ok)
    else:
        tl.atomic_add(ptrs, acc, mask=ok, sem="relaxed")


def tile_entries(w: torch.Tensor, bm: int, bk: int):
    """W's nonzeros per (bm x bk) tile, tiles in row-major order: ``tile_ptr`` (tiles + 1,) int32
    and the entries (position in the tile << 16 | the value's bits) as int32; fp32 values as int64
    (position << 32 | the bits)."""
    m, k = w.shape
    assert bm * bk <= 1 << 16
    r, c = torch.nonzero(w, as_tuple=True)
    v = w[r, c]
    kt = triton.cdiv(k, bk)
    tile = (r // bm) * kt + c // bk
    pos = (r % bm) * bk + c % bk
    order = torch.argsort(tile * (bm * bk) + pos)
    counts = torch.bincount(tile, minlength=triton.cdiv(m, bm) * kt)
    ptr = torch.zeros(counts.numel() + 1, dtype=torch.int32, device=w.device)
    ptr[1:] = torch.cumsum(counts, 0)
    if w.dtype == torch.float32:
        ent = (pos[order].to(torch.int64) << 32) | (v[order].view(torch.int32).to(torch.int64) & 0xFFFFFFFF)
    else:
        ent = (pos[order].to(torch.int32) << 16) | (v[order].view(torch.int16).to(torch.int32) & 0xFFFF)
    # Entries a program takes at a time: the mean tile's, to a power of two.
    chunk = max(32, triton.next_power_of_2(int(counts.float().mean())))
    return ptr, ent, chunk


def spmm_scatter(tiles, x, m, bm, bk, bn, split, warps, stages, scratch_cache):
    ptr, ent, chunk = tiles
    k, n = x.shape
    k_tiles = triton.cdiv(k, bk)
    steps = triton.cdiv(k_tiles, split)
    grid = (triton.cdiv(m, bm), split, triton.cdiv(n, bn))
    size = grid[0] * grid[1] * grid[2] * SLOTS * bm * bk
    key = (x.dtype, size)
    if key not in scratch_cache:
        scratch_cache[key] = torch.zeros(size, dtype=x.dtype, device=x.device)
    scratch = scratch_cache[key]
    if split == 1:
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    else:
        y = torch.zeros((m, n), dtype=torch.float32, device=x.device)
    _spmm_scatter_kernel[grid](ptr, ent, scratch, x, y, m, n, k, x.stride(0), y.stride(0), k_tiles, steps,
                               BM=bm, BK=bk, BN=bn, CHUNK=chunk, SPLIT=split, PREFETCH=stages == 2,
                               PRECISION="tf32x3" if x.dtype == torch.float32 and x.is_cuda else "ieee",
                               num_warps=warps)
    return y


def grid(n: int):
    for (bm, warps), bk, bn, split, stages in itertools.product(
            ((64, 4), (128, 8)), (64, 128), (16, 64, 128), (1, 2, 4, 8), (1, 2)):
        if bn > max(16, n) or bn < min(n, 64):
            continue
        yield bm, bk, bn, split, warps, stages


def main() -> int:
    import stuning

    device = "cpu" if SMOKE else "cuda"
    rows_out = []
    scratch_cache = {}
    torch.backends.cuda.matmul.allow_tf32 = False
    for p in spmm_problems(M, K, NS if not SMOKE else [16], SPARSITIES, device, seconds=SECONDS, dtype=DTYPE):
        n, sparsity, w, x, ref, a = p.n, p.sparsity, p.w, p.x, p.ref, p.a
        row = {"m": M, "k": K, "n": n, "sparsity": sparsity, "nnz": a.nnz, "dtype": str(DTYPE)}
        row["cublas_us"] = probe_time_us(functools.partial(torch.matmul, w, x), SMOKE)
        row["pick"] = p.pick.as_dict()
        row["stuning_us"] = probe_time_us(functools.partial(stuning.spmm, a, x), SMOKE)
        tiles = {}
        times = []
        configs = list(grid(n))
        if SMOKE:
            configs = [(64, 32, 16, 2, 4, 1), (64, 64, 16, 1, 4, 2), (128, 32, 16, 3, 8, 1), (32, 16, 16, 4, 4, 1)]
        for cfg in configs:
            bm, bk, bn, split, warps, stages = cfg
            name = f"{bm}x{bk}x{bn}:split{split}:w{warps}:s{stages}"
            if (bm, bk) not in tiles:
                tiles[(bm, bk)] = tile_entries(w, bm, bk)
            run = functools.partial(spmm_scatter, tiles[(bm, bk)], x, M, bm, bk, bn, split, warps, stages,
                                    scratch_cache)
            if SMOKE:
                check_close(run(), ref, name, TOL)
                check_close(run(), ref, name + " (again)", TOL)
                times.append({"config": name, "us": float("nan")})
                continue
            t = checked_time_us(run, ref, name, checks=2, tol=TOL)
            times.append({"config": name, "us": t} if isinstance(t, float) else {"config": name, "error": t})
        ok = sorted((t for t in times if "us" in t), key=lambda t: t["us"])
        row["chunk"] = {f"{bm}x{bk}": v[2] for (bm, bk), v in tiles.items()}
        row["best"] = ok[:5]
        row["errors"] = [t for t in times if "error" in t][:5]
        row["n_errors"] = sum("error" in t for t in times)
        row["configs"] = times
        rows_out.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "configs"}), flush=True)

    write_results(rows_out, "spmm_scatter_probe.json")
    print(f"{'n':>5} {'sparsity':>8} {'cublas':>8} {'stuning':>8} {'scatter':>8}  vs cuBLAS: stuning scatter"
          "  errors  best")
    for r in rows_out:
        best = r["best"][0] if r["best"] else {"us": float("nan"), "config": "-"}
        print(f"{r['n']:>5} {r['sparsity']:>8} {r['cublas_us']:>8.1f} {r['stuning_us']:>8.1f} {best['us']:>8.1f}"
              f"  {r['cublas_us'] / r['stuning_us']:>17.2f} {r['cublas_us'] / best['us']:>7.2f}"
              f"  {r['n_errors']:>6}  {best['config']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
