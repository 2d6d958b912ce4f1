"""Probe designs of the 2:4 kernel on the GPU: one kernel body, the design picked by ``MODE``.

Not a shipped kernel: the designs measured before the 2:4 kernel was rewritten (BENCHMARKS.md,
section 7). Each mode is timed over a seeded sample of configs per problem (the Llama-7B shapes,
N = 16 / 128 / 2048, fp16) against dense cuBLAS and cuSPARSELt (graph-replayed), and checked against
a float64 reference first.

  MODE 0  dense W tile in the same skeleton: what Triton reaches when nothing is decompressed
  MODE 1  contiguous values; positions unpacked by halving bit fields (tl.join); dense tile via joins; one dot
  MODE 2  as 1, but four dots of K/4 over the rows t, t+4, ... of X (no assembly of the dense tile)
  MODE 3  positions loaded per group through duplicated word addresses; dense tile by a 3-D broadcast
  MODE 4  as 3, four dots
  MODE 5  as 1's positions, 3's broadcast assembly
  MODE 6  as 1, positions unpacked only to 4-bit groups
  MODE 7  as 6, metadata re-packed as one byte per two groups

    PROBE_MODES=0,1,6,7 PROBE_CONFIGS=16 python3 scripts/probe_semi24_designs.py   # $OUT gets the JSON
    PROBE_CURRENT=1 ...   # also time a sample of the shipped kernel's own config space
Through the interpreter (TRITON_INTERPRET=1) it only checks the modes on small shapes.
"""

import functools
import itertools
import json
import os
import random
import sys
import time

import torch
import triton
import triton.language as tl
import triton.testing

INTERP = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
MODES = tuple(int(v) for v in os.environ.get("PROBE_MODES", "0,1").split(","))
CURRENT = os.environ.get("PROBE_CURRENT", "0") == "1"


@triton.jit
def _split_fields(x, BITS: tl.constexpr):
    mask: tl.constexpr = (1 << BITS) - 1
    lo = x & mask
    hi = (x >> BITS) & mask
    return tl.reshape(tl.join(lo, hi), (x.shape[0], 2 * x.shape[1]))


@triton.jit
def _probe_kernel(
    val_ptr,
    meta_ptr,
    x_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_vm,
    stride_mm,
    stride_xk,
    stride_xn,
    stride_ys,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    MODE: tl.constexpr,
    UPCAST: tl.constexpr,
    EVEN_K: tl.constexpr,
    ATOMIC: tl.constexpr,
):
    G: tl.constexpr = BLOCK_K // 4
    HALF: tl.constexpr = BLOCK_K // 2
    WORDS: tl.constexpr = BLOCK_K // 32
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(pid_k, tl.cdiv(K, BLOCK_K), SPLIT_K):
        rows = kt * BLOCK_K + tl.arange(0, BLOCK_K)
        if MODE == 0:
            w = tl.load(
                val_ptr + offs_m[:, None] * stride_vm + rows[None, :],
                mask=m_ok[:, None] & ((rows < K)[None, :] | EVEN_K),
                other=0.0,
            )
        else:
            c = kt * HALF + tl.arange(0, HALF)
            v = tl.load(
                val_ptr + offs_m[:, None] * stride_vm + c[None, :],
                mask=m_ok[:, None] & ((c < K // 2)[None, :] | EVEN_K),
                other=0.0,
            )
            v0, v1 = tl.split(tl.reshape(v, (BLOCK_M, G, 2)))
            if MODE == 6:
                wi = kt * WORDS + tl.arange(0, WORDS)
                word = tl.load(
                    meta_ptr + offs_m[:, None] * stride_mm + wi[None, :],
                    mask=m_ok[:, None] & ((wi < tl.cdiv(K, 32))[None, :] | EVEN_K),
                    other=0,
                )
                nib = _split_fields(_split_fields(_split_fields(word, 16), 8), 4)
                p0 = nib & 3
                p1 = nib >> 2
            elif MODE == 7:
                bi = kt * (G // 2) + tl.arange(0, G // 2)
                byte = tl.load(
                    meta_ptr + offs_m[:, None] * stride_mm + bi[None, :],
                    mask=m_ok[:, None] & ((bi < tl.cdiv(K, 8))[None, :] | EVEN_K),
                    other=0,
                )
                nib = _split_fields(byte.to(tl.int32), 4)
                p0 = nib & 3
                p1 = nib >> 2
            elif MODE == 1 or MODE == 2 or MODE == 5:
                wi = kt * WORDS + tl.arange(0, WORDS)
                word = tl.load(
                    meta_ptr + offs_m[:, None] * stride_mm + wi[None, :],
                    mask=m_ok[:, None] & ((wi < tl.cdiv(K, 32))[None, :] | EVEN_K),
                    other=0,
                )
                p = _split_fields(_split_fields(_split_fields(_split_fields(word, 16), 8), 4), 2)
                p0, p1 = tl.split(tl.reshape(p, (BLOCK_M, G, 2)))
            else:
                gg = kt * G + tl.arange(0, G)
                word = tl.load(
                    meta_ptr + offs_m[:, None] * stride_mm + (gg // 8)[None, :],
                    mask=m_ok[:, None] & ((gg < K // 4)[None, :] | EVEN_K),
                    other=0,
                )
                sh = (gg % 8)[None, :] * 4
                p0 = (word >> sh) & 3
                p1 = (word >> (sh + 2)) & 3
            if UPCAST:
                v0 = v0.to(tl.float32)
                v1 = v1.to(tl.float32)
            if MODE == 3 or MODE == 5:
                t4 = tl.arange(0, 4)[None, None, :]
                w = tl.where(
                    p0[:, :, None] == t4,
                    v0[:, :, None],
                    tl.where(p1[:, :, None] == t4, v1[:, :, None], 0.0).to(v0.dtype),
                )
                w = tl.reshape(w, (BLOCK_M, BLOCK_K))
            zero = tl.zeros_like(v0)
            w0 = tl.where(p0 == 0, v0, zero)
            w1 = tl.where(p0 == 1, v0, tl.where(p1 == 1, v1, zero))
            w2 = tl.where(p0 == 2, v0, tl.where(p1 == 2, v1, zero))
            w3 = tl.where(p1 == 3, v1, zero)
            if MODE == 1 or MODE == 6 or MODE == 7:
                w = tl.reshape(tl.join(tl.join(w0, w2), tl.join(w1, w3)), (BLOCK_M, BLOCK_K))
        if MODE != 2 and MODE != 4:
            x = tl.load(
                x_ptr + rows[:, None].to(tl.int64) * stride_xk + offs_n[None, :] * stride_xn,
                mask=((rows < K)[:, None] | EVEN_K) & n_ok[None, :],
                other=0.0,
            )
            if UPCAST:
                x = x.to(tl.float32)
                w = w.to(tl.float32)
            acc = tl.dot(w, x, acc)
        else:
            g = kt * G + tl.arange(0, G)
            for t in tl.static_range(4):
                if t == 0:
                    wt = w0
                elif t == 1:
                    wt = w1
                elif t == 2:
                    wt = w2
                else:
                    wt = w3
                r = 4 * g + t
                x = tl.load(
                    x_ptr + r[:, None].to(tl.int64) * stride_xk + offs_n[None, :] * stride_xn,
                    mask=((r < K)[:, None] | EVEN_K) & n_ok[None, :],
                    other=0.0,
                )
                if UPCAST:
                    x = x.to(tl.float32)
                acc = tl.dot(wt, x, acc)
    if ATOMIC:
        y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
        tl.atomic_add(y_ptrs, acc, mask=m_ok[:, None] & n_ok[None, :], sem="relaxed")
    else:
        y_ptrs = y_ptr + pid_k * stride_ys + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def launch(mode, w_or_vals, meta, x, m, k, cfg):
    if mode == 7:
        meta = byte_meta(meta, k)
    bm, bn, bk, gm, sk, warps, stages, atomic = cfg
    n = x.shape[1]
    sk = min(sk, triton.cdiv(k, bk))
    atomic = atomic and sk > 1
    if atomic:
        y = torch.zeros((1, m, n), dtype=torch.float32, device=x.device)
    else:
        y = torch.empty((sk, m, n), dtype=torch.float32 if sk > 1 else x.dtype, device=x.device)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), sk)
    _probe_kernel[grid](
        w_or_vals,
        meta,
        x,
        y,
        m,
        n,
        k,
        w_or_vals.stride(0),
        meta.stride(0),
        x.stride(0),
        x.stride(1),
        y.stride(0),
        y.stride(1),
        y.stride(2),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=gm,
        SPLIT_K=sk,
        MODE=mode,
        UPCAST=INTERP,
        EVEN_K=k % bk == 0,
        ATOMIC=atomic,
        num_warps=warps,
        num_stages=stages,
    )
    if atomic:
        return y[0].to(x.dtype)
    return y.sum(0).to(x.dtype) if sk > 1 else y[0]


_BYTE_META = {}


def byte_meta(meta, k):
    """(M, K/8) uint8: group 2i in bits 0-3 (p0 | p1 << 2), group 2i+1 in bits 4-7."""
    key = meta.data_ptr()
    if key not in _BYTE_META:
        m = meta.shape[0]
        shifts = torch.arange(0, 32, 2, device=meta.device)
        pos = ((meta[:, :, None] >> shifts) & 3).reshape(m, -1)[:, : k // 2]  # per value
        nib = pos[:, 0::2] | (pos[:, 1::2] << 2)  # per group
        nib = torch.nn.functional.pad(nib, (0, nib.shape[1] % 2))
        _BYTE_META[key] = (nib[:, 0::2] | (nib[:, 1::2] << 4)).to(torch.uint8).contiguous()
    return _BYTE_META[key]


def configs(n, rng, count):
    if n <= 128:
        bns = [16] if n <= 16 else ([32] if n <= 32 else [64, 128])
        space = list(
            itertools.product(
                [16, 32, 64, 128], bns, [128, 256, 512], [8], [1, 2, 4, 8], [2, 4, 8], [2, 3, 4, 5], [0, 1]
            )
        )
        space = [c for c in space if c[4] > 1 or not c[7]]
    else:
        space = list(itertools.product([64, 128], [128, 256], [64, 128], [8], [1], [4, 8], [3, 4, 5], [0]))
    space = [
        c for c in space if c[0] * c[1] // (32 * c[5]) <= 128 and c[6] * (c[0] * c[2] + c[2] * c[1]) * 2 <= 225_000
    ]
    rng.shuffle(space)
    return space[:count]


def position_words(sm):
    """The probe's metadata layout (stuning 0.1's): each kept value's 2-bit position, 16 per int32."""
    import torch

    pos = sm.positions()
    m, c = pos.shape
    words = (c + 15) // 16
    padded = torch.zeros(m, 16 * words, dtype=torch.int64, device=pos.device)
    padded[:, :c] = pos
    packed = (padded.reshape(m, words, 16) << (2 * torch.arange(16, device=pos.device))).sum(-1)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def _compile_share(args):
    import torch

    from stuning.formats.semi24 import Semi24Matrix

    share = args
    torch.manual_seed(0)
    done = 0
    cache = {}
    for mode, cfg, n in share:
        if n not in cache:
            w = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
            sm = Semi24Matrix.from_dense(w, prune=True)
            cache[n] = (sm.to_dense(), sm, torch.randn(4096, n, device="cuda", dtype=torch.float16))
        wd, sm, x = cache[n]
        try:
            launch(mode, wd if mode == 0 else sm.values, position_words(sm), x, 4096, 4096, cfg)
            done += 1
        except Exception:
            pass
    torch.cuda.synchronize()
    return done


def precompile(jobs, workers=14):
    import multiprocessing as mp

    t0 = time.time()
    shares = [jobs[i::workers] for i in range(workers)]
    with mp.get_context("spawn").Pool(workers) as pool:
        done = sum(pool.map(_compile_share, shares))
    print(f"precompiled {done}/{len(jobs)} in {time.time() - t0:.0f}s", flush=True)


def main():
    sys.path.insert(0, os.getcwd())
    from stuning.kernels.semi24 import Semi24Problem, config_space, semi24_mm

    from stuning.formats.semi24 import Semi24Matrix
    from stuning.tuning.timing import bench_us

    dev = "cuda" if not INTERP else "cpu"
    shapes = [(4096, 4096), (11008, 4096), (4096, 11008)] if not INTERP else [(64, 128), (96, 256)]
    ns = [16, 128, 2048] if not INTERP else [16, 40]
    count = int(os.environ.get("PROBE_CONFIGS", "14"))
    out = os.environ.get("OUT", "/tmp")
    rows = []
    if not INTERP:
        jobs = set()
        for _shape, n in itertools.product(shapes, ns):
            for cfg in configs(n, random.Random(n), count):
                for mode in MODES:
                    jobs.add((mode, cfg, n))
        precompile(sorted(jobs))
    torch.manual_seed(0)
    for (m, k), n in itertools.product(shapes, ns):
        dt = torch.float16
        w = torch.randn(m, k, device=dev, dtype=dt)
        sm = Semi24Matrix.from_dense(w, prune=True)
        wd = sm.to_dense()
        meta = position_words(sm)
        x = torch.randn(k, n, device=dev, dtype=dt)
        ref = wd.double() @ x.double()
        scale = ref.abs().max().item()
        rng = random.Random(n)
        cand = configs(n, rng, count)
        if INTERP:
            cand = [(32, 16, 64, 1, 1, 4, 3, 0), (64, 32, 128, 8, 2, 4, 3, 1), (16, 16, 64, 1, 2, 4, 3, 0)]
        res = {}
        for mode in MODES:
            best = (float("inf"), None)
            for cfg in cand:
                try:
                    a = wd if mode == 0 else sm.values
                    fn = functools.partial(launch, mode, a, meta, x, m, k, cfg)
                    err = (fn().double() - ref).abs().max().item() / scale
                    if err > 1e-2:
                        print("WRONG", mode, cfg, err, flush=True)
                        continue
                    if INTERP:
                        best = (0.0, cfg)
                        continue
                    t, _ = bench_us(fn, warmup_ms=5, rep_ms=30)
                    if t < best[0]:
                        best = (t, cfg)
                except Exception as e:
                    print("FAIL", mode, cfg, type(e).__name__, str(e)[:200], flush=True)
            res[f"mode{mode}"] = best
        if not INTERP and CURRENT:
            prob = Semi24Problem(m, k, n, dt)
            space = config_space(prob)
            rng.shuffle(space)
            bestc = (float("inf"), None)
            for c in space[:count]:
                fn = functools.partial(semi24_mm, sm.values, sm.masks, x, k=k, config=c)
                t, _ = bench_us(fn, warmup_ms=5, rep_ms=30)
                bestc = min(bestc, (t, str(c)), key=lambda z: z[0])
            res["current"] = bestc
        if not INTERP:
            res["cublas"] = (bench_us(functools.partial(torch.mm, wd, x))[0], None)
            try:
                comp = torch._cslt_compress(wd)
                with torch.cuda.stream(torch.cuda.Stream()):
                    g = triton.testing.do_bench_cudagraph(
                        functools.partial(torch._cslt_sparse_mm, comp, x), rep=50, return_mode="median"
                    )
                res["cslt"] = (g * 1e3, "graph")
            except Exception as e:
                res["cslt"] = (float("nan"), str(e)[:100])
        row = {
            "m": m,
            "k": k,
            "n": n,
            **{f"{key}_us": v[0] for key, v in res.items()},
            **{f"{key}_cfg": str(v[1]) for key, v in res.items()},
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(out, "semi24_probe.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(
        f"{'m':>6} {'k':>6} {'n':>5} "
        + " ".join(f"{c:>9}" for c in ("cublas", "cslt", "current", *(f"mode{i}" for i in MODES)))
    )
    for r in rows:
        print(
            f"{r['m']:>6} {r['k']:>6} {r['n']:>5} "
            + " ".join(
                f"{r.get(c + '_us', float('nan')):9.1f}"
                for c in ("cublas", "cslt", "current", *(f"mode{i}" for i in MODES))
            )
        )


if __name__ == "__main__":
    main()
