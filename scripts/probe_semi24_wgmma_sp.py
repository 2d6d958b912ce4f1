"""Probe 2:4 on the sparse *warpgroup* MMA (``wgmma.mma_async.sp``), the instruction cuSPARSELt uses.

The sparse-MMA kernel (``kernels/semi24_sparse_mma.py``) issues ``mma.sp`` per warp: at N = 128 every
16-row warp reads the whole X tile from shared memory each step, and mma.sync runs below the
warpgroup MMA's rate (BENCHMARKS.md 7u). ``wgmma.mma_async.sp.m64nNk32`` reads B (X) from shared
memory by a descriptor once per warpgroup and takes A (W's stored values) from registers. Gluon has
no sparse warpgroup MMA, so this probe issues it by inline PTX:

- The accumulator is the sparse-MMA kernel's tile layout with one m16 tile a warp: a thread's
  registers, in order, are exactly the m64nN fragment ``d[4 j + 2 h + c % 2]``, so one
  ``inline_asm_elementwise`` with ``pack = BLOCK_N / 2`` hands the instruction a warp's whole
  accumulator (tied operands: read and written in place).
- A's four registers and the metadata word are the sparse-MMA kernel's (assumed: the same lanes
  per warp as ``mma.sp``, both selectors), broadcast over N; the instruction reads the first four.
- X's tile is Triton's 128-byte-swizzled layout (``NVMMASharedLayout``), its rows in the MMAs' k
  order; the descriptor is built in the asm from ``global_smem`` (X is the kernel's only shared
  allocation, checked after compiling) with the leading and stride offsets Triton's own dense
  ``wgmma`` uses for that layout. Each instruction is fenced, committed and waited for at once.

    python3 scripts/probe_semi24_wgmma_sp.py      # gate vs float64, then timings; $OUT/semi24_wgmma_sp_probe.json
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import time

import torch
import triton
from probe_harness import (
    best_checked,
    checked_time_us,
    probe_time_us,
    semi24_baseline_row,
    semi24_gate_failure,
    semi24_gate_problems,
    semi24_problems,
    write_results,
)
from stuning.kernels.semi24_hopper import _finish_tile, _load_x, _program_tile
from stuning.kernels.semi24_sparse_mma import _lane_layout, _load_w, _spread, _tile_layout, _w_pointers, _x_pointers
from stuning.kernels.split_k import split_k_workspace
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared

from stuning.suite import WEIGHT_SHAPES

SHAPES = WEIGHT_SHAPES["llama7b"]
NS = [int(v) for v in os.environ.get("PROBE_NS", "128").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "240"))
BLOCK_K = 64
BK = gl.constexpr(BLOCK_K)  # the kernel's step (a global it reads must be a constexpr)


@gluon.constexpr_function
def _wgmma_sp_asm(P, BLOCK_N, DESC_HI, BF16):
    """The PTX of a 64-column step (X fp16 or bf16, N a multiple of 16): two k32 MMAs, selectors 0
    and 1, in one group waited for at once. Operands: ``P`` accumulator registers ($0.., tied to
    inputs $P..), the two MMAs' A at $2P.. and $3P.., the metadata at $4P, X's stage's byte offset
    from ``global_smem`` at $5P (MMA 1 reads 32 k-rows, 4096 bytes, further)."""
    d = ", ".join(f"${i}" for i in range(P))
    dt = "bf16" if BF16 else "f16"
    mma = ""
    for kk in range(2):
        a = f"{{${(2 + kk) * P}, ${(2 + kk) * P + 2}, ${(2 + kk) * P + 1}, ${(2 + kk) * P + 3}}}"
        mma += (f"wgmma.mma_async.sp.sync.aligned.m64n{BLOCK_N}k32.f32.{dt}.{dt} {{{d}}}, {a}, desc{kk}, "
                f"${4 * P}, {kk}, p, 1, 1, 1; ")
    return ("{ .reg .b32 sa; .reg .b64 desc0, desc1; .reg .pred p; "
            f"mov.u32 sa, global_smem; add.u32 sa, sa, ${5 * P}; bfe.u32 sa, sa, 4, 14; "
            f"cvt.u64.u32 desc0, sa; or.b64 desc0, desc0, {DESC_HI}; add.s64 desc1, desc0, 256; "
            "setp.eq.u32 p, 1, 1; wgmma.fence.sync.aligned; " + mma +
            "wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned 0; }")


@gluon.constexpr_function
def _wgmma_sp_constraints(P):
    return ",".join(["=f"] * P + [str(i) for i in range(P)] + ["r"] * (4 * P))


@gluon.jit
def _wgmma_sp_step(acc, a0, a1, meta, off, BLOCK_N: gl.constexpr, DESC_HI: gl.constexpr, DT: gl.constexpr):
    P: gl.constexpr = BLOCK_N // 2
    asm: gl.constexpr = _wgmma_sp_asm(P, BLOCK_N, DESC_HI, gl.bfloat16 == DT)  # X's dtype: A is int32
    return gl.inline_asm_elementwise(asm, _wgmma_sp_constraints(P), [acc, a0, a1, meta, off], dtype=gl.float32,
                                     is_pure=False, pack=P)


@gluon.jit
def _copy_w(w0, w1, wm, pair_ptrs, meta_ptrs, step, SPLIT_K: gl.constexpr, pid_k, q, c, n_groups,
            BK: gl.constexpr, EVEN_K: gl.constexpr):
    """Start copying a step's W words (as ``_load_w`` loads them) into a stage of shared memory; the
    caller's commit puts them in the step's group. Groups past K are copied as zeros."""
    kt = step * SPLIT_K
    async_copy.async_copy_global_to_shared(wm, meta_ptrs + kt * 32)
    if EVEN_K:
        async_copy.async_copy_global_to_shared(w0, pair_ptrs + kt * (BK // 4))
        async_copy.async_copy_global_to_shared(w1, pair_ptrs + kt * (BK // 4) + 2)
    else:
        grp = (pid_k + kt) * (BK // 4) + 4 * q + (c % 2)
        async_copy.async_copy_global_to_shared(w0, pair_ptrs + kt * (BK // 4), mask=grp < n_groups)
        async_copy.async_copy_global_to_shared(w1, pair_ptrs + kt * (BK // 4) + 2, mask=grp + 2 < n_groups)


@gluon.jit
def _semi24_wgmma_sp_kernel(val_ptr, meta_ptr, x_ptr, y_ptr, bias_ptr, partial_ptr, count_ptr, M, N, K,
                            stride_vm, stride_xk, stride_ym, stride_yn,
                            BLOCK_N: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr,
                            EVEN_K: gl.constexpr, HAS_BIAS: gl.constexpr, DESC_HI: gl.constexpr,
                            W_STAGED: gl.constexpr, X_OFFSET: gl.constexpr, FENCE: gl.constexpr,
                            num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = 16 * num_warps  # one m16 tile a warp: a warpgroup per 64 rows
    TM: gl.constexpr = num_warps
    NB: gl.constexpr = BLOCK_N // 8
    DT: gl.constexpr = x_ptr.dtype.element_ty
    L: gl.constexpr = _tile_layout(num_warps)
    XT: gl.constexpr = BLOCK_N // 8
    x_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // XT, XT], [num_warps, 1], [1, 0])
    xs_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BK, BLOCK_N], DT)

    pid, pid_k, pid_m, pid_n, steps = _program_tile(N, K, BLOCK_N, BK, SPLIT_K)
    n_groups = gl.cdiv(K, 4)

    LQ: gl.constexpr = _lane_layout(TM, num_warps)
    pair_ptrs, meta_ptrs, q, c = _w_pointers(val_ptr, meta_ptr, M, K, stride_vm, pid_m, pid_k, BLOCK_M, L, LQ)
    x_ptrs, n_ok, x_row = _x_pointers(x_ptr, N, stride_xk, pid_n, pid_k, BLOCK_N, x_layout)
    x_smem = gl.allocate_shared_memory(DT, [STAGES, BK, BLOCK_N], xs_layout)
    # W_STAGED: W's words go through shared memory in X's stages, STAGES - 1 steps ahead (each lane
    # copies and reads back its own); else into registers, one step ahead.
    ws_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [4, 3, 2, 1, 0])
    ms_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0])
    WS: gl.constexpr = STAGES if W_STAGED else 1
    w0_smem = gl.allocate_shared_memory(gl.int32, [WS, TM, 2, 8, 1, 8], ws_layout)
    w1_smem = gl.allocate_shared_memory(gl.int32, [WS, TM, 2, 8, 1, 8], ws_layout)
    wm_smem = gl.allocate_shared_memory(gl.int32, [WS, TM, 8, 4], ms_layout)
    for s in gl.static_range(STAGES - 1):
        if W_STAGED:
            _copy_w(w0_smem.index(s), w1_smem.index(s), wm_smem.index(s), pair_ptrs, meta_ptrs,
                    gl.minimum(s, steps - 1), SPLIT_K, pid_k, q, c, n_groups, BK, EVEN_K)
        _load_x(x_smem.index(s), x_ptrs, n_ok, gl.minimum(s, steps - 1), SPLIT_K, pid_k, stride_xk, K,
                x_row, BK, EVEN_K)

    a0, a1, am = _load_w(pair_ptrs, meta_ptrs, 0, SPLIT_K, pid_k, q, c, n_groups, BK, EVEN_K)
    acc = gl.zeros((TM, 2, 8, NB, 8), dtype=gl.float32, layout=L)
    zero = gl.zeros((TM, 2, 8, NB, 8), dtype=gl.int32, layout=L)
    for i in range(steps):
        if not W_STAGED:
            pairs0, pairs1, meta = a0, a1, am
            a0, a1, am = _load_w(pair_ptrs, meta_ptrs, gl.minimum(i + 1, steps - 1), SPLIT_K, pid_k, q, c,
                                 n_groups, BK, EVEN_K)
        async_copy.wait_group(STAGES - 2)
        gl.thread_barrier()
        if FENCE:  # cp.async wrote X (generic proxy); the MMA reads it by descriptor (async proxy)
            fence_async_shared()
        gl.thread_barrier()
        if W_STAGED:
            pairs0 = w0_smem.index(i % STAGES).load(L)
            pairs1 = w1_smem.index(i % STAGES).load(L)
            meta = wm_smem.index(i % STAGES).load(LQ)
        meta = _spread(meta, L) + zero
        # X's stage in bytes from global_smem (X is allocated first: run() checks).
        off = zero + X_OFFSET + (i % STAGES) * (BK * BLOCK_N * 2)
        acc = _wgmma_sp_step(acc, pairs0 + zero, pairs1 + zero, meta, off, BLOCK_N, DESC_HI, DT)
        nxt = i + STAGES - 1
        if W_STAGED:
            _copy_w(w0_smem.index(nxt % STAGES), w1_smem.index(nxt % STAGES), wm_smem.index(nxt % STAGES),
                    pair_ptrs, meta_ptrs, gl.minimum(nxt, steps - 1), SPLIT_K, pid_k, q, c, n_groups, BK, EVEN_K)
        _load_x(x_smem.index(nxt % STAGES), x_ptrs, n_ok, gl.minimum(nxt, steps - 1), SPLIT_K, pid_k,
                stride_xk, K, x_row, BK, EVEN_K)
    async_copy.wait_group(0)

    out_layout: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [num_warps, 1], [1, 0])
    acc2 = gl.convert_layout(gl.reshape(acc, (BLOCK_M, BLOCK_N)), out_layout)
    offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, out_layout))
    offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, out_layout))
    partial_ptrs = partial_ptr + offs_n[None, :].to(gl.int64) * M + offs_m[:, None]
    _finish_tile(acc2, y_ptr, bias_ptr, partial_ptrs, count_ptr + pid, offs_m, offs_n, M, N, stride_ym, stride_yn,
                 SPLIT_K, HAS_BIAS)


def desc_hi(block_n: int) -> int:
    """The descriptor's constant bits for X's [64, BLOCK_N] 128-byte-swizzled tile (as Triton's
    dense wgmma builds them): leading offset 8192 bytes between 64-column blocks, stride 1024 bytes
    between 8-row groups, swizzle mode 1."""
    lbo = 512 if block_n > 64 else 0
    return (lbo << 16) | (64 << 32) | (1 << 62)


def run(w, x, bn, split, warps, stages, w_staged=0, bias=None, out=None, fence=True):
    m, k, n = w.shape[0], w.shape[1], x.shape[1]
    out = torch.empty(m, n, dtype=x.dtype, device=x.device) if out is None else out
    bm = 16 * warps
    split = min(split, triton.cdiv(k, BLOCK_K))  # as the library's launcher: no split without a step
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    partial, counts = split_k_workspace(x.device, m * n, tiles) if split > 1 else (out, out)
    values = w.values
    compiled = _semi24_wgmma_sp_kernel[(tiles, split)](
        values, w.mma_metadata(), x, out, values if bias is None else bias, partial, counts, m, n, k,
        values.stride(0), x.stride(0), out.stride(0), out.stride(1),
        BLOCK_N=bn, SPLIT_K=split, STAGES=stages, EVEN_K=k % BLOCK_K == 0, HAS_BIAS=bias is not None,
        DESC_HI=desc_hi(bn), W_STAGED=bool(w_staged), X_OFFSET=0, FENCE=fence, num_warps=warps)
    stage_bytes = stages * BLOCK_K * bn * x.element_size()
    # Triton places the largest buffer first: X's stages, strictly larger than each of W's (configs()
    # keeps it so); a wrong offset would show as wrong results in every check.
    if compiled.metadata.shared < stage_bytes:
        raise RuntimeError(f"X's stages ({stage_bytes} B) exceed the kernel's shared memory "
                           f"({compiled.metadata.shared} B)")
    return out


def configs():
    """(block_n, split_k, num_warps, num_stages, w_staged); block_n 256 spills (72 B of stack)."""
    splits = [int(v) for v in os.environ.get("PROBE_SPLITS", "1,2,4").split(",")]
    for bn, warps, split, stages, ws in itertools.product((128, 64), (4, 8), splits, (3, 4), (1, 0)):
        if ws and 2 * bn <= 16 * warps:  # W's stage as large as X's: X might not come first
            continue
        yield bn, split, warps, stages, ws


def gate() -> list[str]:
    """Odd problems, both dtypes, split-K, bias and Y^T: the failures (none: the kernel is right)."""
    failures = []
    for label, w, x, bias, ref in semi24_gate_problems(((64, 64, 64), (200, 1000, 144), (128, 4096, 128)), 3):
        for bn, split, warps, ws in itertools.product((64, 128), (1, 3), (4, 8), (0, 1)):
            if ws and 2 * bn <= 16 * warps:
                continue
            failures.append(semi24_gate_failure(f"{label} bn={bn} split={split} warps={warps} staged={ws}", ref, bias,
                                                functools.partial(run, w, x, bn, split, warps, 3, ws),
                                                functools.partial(run, w, x, bn, split, warps, 2, ws)))
    return [f for f in failures if f]


def main() -> int:
    started = time.perf_counter()
    failures = gate()
    print(f"gate: {len(failures)} failures ({time.perf_counter() - started:.0f} s)", flush=True)
    for f in failures[:8]:
        print("   ", f)
    rows = []
    if len(failures) < 4 or os.environ.get("PROBE_ALWAYS") == "1":
        for p in semi24_problems(SHAPES, NS, "cuda"):
            row = {**semi24_baseline_row(p), "wgmma_sp": {}}
            for cfg in configs():
                if time.perf_counter() - started > SECONDS:
                    break
                if cfg[0] > max(64, p.n):
                    continue
                label = ":".join(map(str, cfg))
                row["wgmma_sp"][label] = checked_time_us(functools.partial(run, p.w, p.x, *cfg), p.ref,
                                                         f"{p.m}x{p.k} n={p.n} {label}", checks=2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    # Ablation: each problem's best config without the proxy fence before the MMAs (not a correct
    # kernel: it may read X's stage before cp.async's writes are visible to the MMA; its error is
    # reported), to see whether the fence (MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC in SASS) is the bound.
    for p, r in zip(semi24_problems(SHAPES, NS, "cuda"), rows, strict=True):
        best, _, _ = best_checked(r["wgmma_sp"])
        if best == "-":
            continue
        cfg = [int(v) for v in best.split(":")]
        fn = functools.partial(run, p.w, p.x, *cfg, fence=False)
        err = float((fn().double() - p.ref).norm() / p.ref.norm())
        r["no_fence"] = {"config": best, "us": probe_time_us(fn, False), "rel_err": err}
        print(f"{p.m}x{p.k} n={p.n} {best}: with fence {r['wgmma_sp'][best]:.1f} us, without "
              f"{r['no_fence']['us']:.1f} us (error {err:.1e})", flush=True)
    write_results({"gate_failures": failures, "rows": rows}, "semi24_wgmma_sp_probe.json")
    print(f"{'M x K':>11} {'N':>4} {'cuBLAS':>7} {'pick':>7} {'wgmma.sp':>8} {'bn:split:warps:st:ws':>18} "
          f"{'vs cuBLAS':>9} failed")
    for r in rows:
        best, bt, fails = best_checked(r["wgmma_sp"])
        print(f"{r['m']:>5}x{r['k']:<5} {r['n']:>4} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {bt:>8.1f} "
              f"{best:>18} {r['cublas_us'] / bt:>8.2f}x {len(fails)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
