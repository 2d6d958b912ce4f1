"""Probe a Gluon 2:4 kernel for Hopper that keeps one warpgroup MMA in flight.

The Triton 2:4 kernel waits for its warpgroup MMA at every K step (``wait0`` in
``sass_stats.py``): the rebuilt W tile goes to shared memory from registers, and Triton's pipeliner
only overlaps MMAs whose shared-memory operands it multi-buffers itself. This probe writes the same
rebuild in Gluon, where the tile is double-buffered by hand and ``warpgroup_mma_wait(1)`` lets the
MMA of step i run while step i + 1 is rebuilt. X comes in through cp.async, STAGES deep.

For each Llama-7B shape at N = 128 (``PROBE_NS``) it checks every config against a float64
reference, then times it (CUDA graphs, L2 flushed) beside cuBLAS and the library's own pick.

    python3 scripts/probe_semi24_wgmma.py        # $OUT/semi24_wgmma_probe.json, a table last
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import time

import torch
import triton
from probe_harness import best_checked, checked_time_us, semi24_baseline_row, semi24_problems, write_results
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

from stuning.suite import WEIGHT_SHAPES

SHAPES = WEIGHT_SHAPES["llama7b"]
NS = [int(v) for v in os.environ.get("PROBE_NS", "128").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "400"))


@gluon.jit
def _split_fields(x, BITS: gl.constexpr):
    mask: gl.constexpr = (1 << BITS) - 1
    return gl.reshape(gl.join(x & mask, (x >> BITS) & mask), (x.shape[0], 2 * x.shape[1]))


@gluon.jit
def _rebuild(pairs, words, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, DTYPE: gl.constexpr):
    b = _split_fields(_split_fields(_split_fields(words, 16), 8), 4)
    b = gl.convert_layout(b, pairs.type.layout)
    zero = gl.zeros_like(pairs)
    lo = gl.where((b & 1) != 0, gl.where((b & 2) != 0, pairs, pairs & 0xFFFF),
                  gl.where((b & 2) != 0, pairs << 16, zero))
    hi = gl.where((b & 8) != 0, gl.where((b & 4) != 0, pairs, pairs & -65536),
                  gl.where((b & 4) != 0, (pairs >> 16) & 0xFFFF, zero))
    w0 = lo.to(gl.int16).to(DTYPE, bitcast=True)
    w1 = (lo >> 16).to(gl.int16).to(DTYPE, bitcast=True)
    w2 = hi.to(gl.int16).to(DTYPE, bitcast=True)
    w3 = (hi >> 16).to(gl.int16).to(DTYPE, bitcast=True)
    w = gl.join(gl.join(w0, w2), gl.join(w1, w3))
    return gl.reshape(w, (BLOCK_M, BLOCK_K))


@gluon.jit
def _semi24_wgmma_kernel(
    val_ptr, mask_ptr, x_ptr, y_ptr, partial_ptr, count_ptr,
    M, N, K, stride_vm, stride_mm, stride_xk, stride_ym,
    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, SPLIT_K: gl.constexpr,
    STAGES: gl.constexpr, num_warps: gl.constexpr,
):
    G: gl.constexpr = BLOCK_K // 4
    WORDS: gl.constexpr = BLOCK_K // 32
    DT: gl.constexpr = x_ptr.dtype.element_ty
    TPR: gl.constexpr = G // 8  # a thread holds eight groups of a row: one mask word
    p_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // TPR, TPR], [num_warps, 1], [1, 0])
    w_layout: gl.constexpr = gl.BlockedLayout([1, 1], [32 // TPR, TPR], [num_warps, 1], [1, 0])
    XT: gl.constexpr = BLOCK_N // 8
    x_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // XT, XT], [num_warps, 1], [1, 0])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BLOCK_M, 16])
    xs_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_K, BLOCK_N], DT)
    ws_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], DT)

    pid = gl.program_id(0)
    pid_k = gl.program_id(1)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    pm = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, p_layout))
    pg = pid_k * G + gl.arange(0, G, layout=gl.SliceLayout(0, p_layout))
    pair_ptrs = val_ptr.to(gl.pointer_type(gl.int32)) + pm[:, None].to(gl.int64) * (stride_vm // 2) + pg[None, :]
    p_ok = (pm < M)[:, None]
    wm = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, w_layout))
    ww = pid_k * WORDS + gl.arange(0, WORDS, layout=gl.SliceLayout(0, w_layout))
    mask_ptrs = mask_ptr + wm[:, None].to(gl.int64) * stride_mm + ww[None, :]
    w_ok = (wm < M)[:, None]
    xk = pid_k * BLOCK_K + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, x_layout))
    xn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, x_layout))
    x_ptrs = x_ptr + xk[:, None].to(gl.int64) * stride_xk + xn[None, :]
    x_ok = (xn < N)[None, :]

    x_smem = gl.allocate_shared_memory(DT, [STAGES, BLOCK_K, BLOCK_N], xs_layout)
    w_smem = gl.allocate_shared_memory(DT, [2, BLOCK_M, BLOCK_K], ws_layout)
    steps = gl.cdiv(gl.cdiv(K, BLOCK_K) - pid_k, SPLIT_K)
    x_step = SPLIT_K * BLOCK_K * stride_xk
    for s in gl.static_range(STAGES - 1):
        async_copy.async_copy_global_to_shared(x_smem.index(s), x_ptrs + s * x_step, mask=x_ok & (s < steps))
        async_copy.commit_group()
    pairs = gl.load(pair_ptrs, mask=p_ok, other=0)
    words = gl.load(mask_ptrs, mask=w_ok, other=0)
    acc = gl.zeros((BLOCK_N, BLOCK_M), dtype=gl.float32, layout=acc_layout)
    for i in range(steps):
        w = _rebuild(pairs, words, BLOCK_M, BLOCK_K, DT)
        pair_ptrs += SPLIT_K * G
        mask_ptrs += SPLIT_K * WORDS
        more = i + 1 < steps
        pairs = gl.load(pair_ptrs, mask=p_ok & more, other=0)
        words = gl.load(mask_ptrs, mask=w_ok & more, other=0)
        buf = w_smem.index(i % 2)
        buf.store(w)
        async_copy.wait_group(STAGES - 2)
        fence_async_shared()
        gl.thread_barrier()
        acc = warpgroup_mma(x_smem.index(i % STAGES).permute((1, 0)), buf.permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        # The MMA of step i - 1 is done: its X slot takes step i + STAGES - 1.
        nxt = i + STAGES - 1
        async_copy.async_copy_global_to_shared(x_smem.index(nxt % STAGES), x_ptrs + nxt * x_step,
                                               mask=x_ok & (nxt < steps))
        async_copy.commit_group()
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    async_copy.wait_group(0)

    offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, acc_layout))
    ok = (offs_n < N)[:, None] & (offs_m < M)[None, :]
    y_ptrs = y_ptr + offs_m[None, :].to(gl.int64) * stride_ym + offs_n[:, None]
    if SPLIT_K > 1:
        partial_ptrs = partial_ptr + offs_n[:, None].to(gl.int64) * M + offs_m[None, :]
        gl.atomic_add(partial_ptrs, acc, mask=ok, sem="relaxed")
        gl.thread_barrier()
        done = gl.atomic_add(count_ptr + pid, 1, sem="acq_rel")
        if done == SPLIT_K - 1:
            gl.thread_barrier()
            acc = gl.load(partial_ptrs, mask=ok, other=0.0, cache_modifier=".cg")
            gl.store(partial_ptrs, gl.zeros_like(acc), mask=ok)
            gl.store(count_ptr + pid, 0)
            gl.store(y_ptrs, acc.to(DT), mask=ok)
    else:
        gl.store(y_ptrs, acc.to(DT), mask=ok)


def semi24_wgmma(w, x, bm, bn, bk, split_k, warps, stages):
    from stuning.kernels.split_k import split_k_workspace

    m, k, n = w.values.shape[0], x.shape[0], x.shape[1]
    y = torch.empty(m, n, dtype=x.dtype, device=x.device)
    split_k = min(split_k, triton.cdiv(k, bk))
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    partial, counts = split_k_workspace(x.device, m * n, tiles) if split_k > 1 else (y, y)
    _semi24_wgmma_kernel[(tiles, split_k)](
        w.values, w.masks, x, y, partial, counts, m, n, k, w.values.stride(0), w.masks.stride(0), x.stride(0),
        y.stride(0), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split_k, STAGES=stages, num_warps=warps)
    return y


CONFIGS = [c for c in itertools.product((64, 128), (128,), (64, 128), (1, 2, 3, 4, 6), (4, 8), (2, 3, 4))]


def main() -> int:
    rows, started = [], time.perf_counter()
    for p in semi24_problems(SHAPES, NS, "cuda"):
        row = {**semi24_baseline_row(p), "gluon": {}}
        for cfg in CONFIGS:
            if time.perf_counter() - started > SECONDS:
                break
            label = "x".join(map(str, cfg[:3])) + ":" + ":".join(map(str, cfg[3:]))
            row["gluon"][label] = checked_time_us(functools.partial(semi24_wgmma, p.w, p.x, *cfg), p.ref,
                                                  f"{p.m}x{p.k} n={p.n} {label}")
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_results(rows, "semi24_wgmma_probe.json")
    print(f"{'M x K':>11} {'N':>4} {'cuBLAS':>7} {'pick':>7} {'gluon best':>10} {'config':>18} {'vs cuBLAS':>9} failed")
    for r in rows:
        best, bt, failures = best_checked(r["gluon"])
        print(f"{r['m']:>5}x{r['k']:<5} {r['n']:>4} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {bt:>10.1f} {best:>18} "
              f"{r['cublas_us'] / bt:>8.2f}x {len(failures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
