"""Probe a gather SDDMM that walks large output tiles, so that its rows of A and columns of B come
from L1 (H200/H100).

The gather kernel takes NNZ_BLOCK consecutive nonzeros of the CSR order: one row of A serves them,
but every column of B is a random row of the whole (N x K) B^T, read from L2, 2 K bytes a nonzero
in fp16 (at L = 4096, K = 64, 98%: 43 MB). Here a program owns one (TM x TN) output tile (the tiled
kernel's ``OutputTiles``: each nonzero's position in the tile, its index in the values) and walks its
nonzeros CHUNK at a time, gathering A's rows and B's columns of that tile only: (TM + TN) K elements
a tile, which stay in L1 while every nonzero of the tile reads them. Per problem (uniform random
mask, ``PROBE_LS`` x ``PROBE_KS`` x ``PROBE_SPARSITIES``, ``PROBE_DTYPE``) it times the dense
product, ``torch.sparse.sampled_addmm`` (fp32), stuning's own pick, and a grid of tile-gather configs;
each config is checked against float64 first. Timings are CUDA-graph replays behind an L2 flush.

    python3 scripts/probe_sddmm_tile_gather.py      # $OUT/sddmm_tile_gather.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_sddmm_tile_gather.py   # tiny, CPU
"""

from __future__ import annotations

import itertools
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_harness import attention_problems, check_close, probe_time_us  # noqa: E402

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
LS = [64] if SMOKE else [int(v) for v in os.environ.get("PROBE_LS", "4096,2048,1024").split(",")]
KS = [32] if SMOKE else [int(v) for v in os.environ.get("PROBE_KS", "64,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[os.environ.get("PROBE_DTYPE", "fp16")]
TILES = [(32, 32)] if SMOKE else [tuple(int(x) for x in v.split("x")) for v in os.environ.get(
    "PROBE_TILES", "64x256,128x128,128x256,256x256").split(",")]
CHUNKS = [16] if SMOKE else [int(v) for v in os.environ.get("PROBE_CHUNKS", "64,128").split(",")]
WARPS = [4] if SMOKE else [int(v) for v in os.environ.get("PROBE_WARPS", "4").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "400"))


@triton.jit
def _tile_gather_kernel(
    tile_m_ptr, tile_n_ptr, tile_ptr, local_ptr, dest_ptr,
    a_ptr, b_ptr, out_ptr,
    K, stride_am, stride_ak, stride_bk, stride_bn, alpha,
    TM: tl.constexpr, TN: tl.constexpr, CHUNK: tl.constexpr, BLOCK_K: tl.constexpr, VEC: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    t = tl.program_id(0)
    tm = tl.load(tile_m_ptr + t)
    tn = tl.load(tile_n_ptr + t)
    start = tl.load(tile_ptr + t)
    end = tl.load(tile_ptr + t + 1)
    a_tile = a_ptr + tm.to(tl.int64) * TM * stride_am
    b_tile = b_ptr + tn.to(tl.int64) * TN * stride_bn
    for e0 in range(start, end, CHUNK):
        offs = e0 + tl.arange(0, CHUNK)
        pos = tl.load(local_ptr + offs).to(tl.int32)
        dest = tl.load(dest_ptr + offs)
        # positions count 8 x 8 blocks, row-major blocks, each row-major (tiles.tile_position)
        blk = pos // 64
        r = (blk // (TN // 8)) * 8 + (pos % 64) // 8
        c = (blk % (TN // 8)) * 8 + pos % 8
        a_base = a_tile + r[:, None] * stride_am
        b_base = b_tile + c[:, None] * stride_bn
        acc = tl.zeros((CHUNK, BLOCK_K), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            offs_k = tl.max_contiguous(tl.multiple_of(offs_k, VEC), VEC)
            if EVEN_K:
                a = tl.load(a_base + offs_k[None, :] * stride_ak)
                b = tl.load(b_base + offs_k[None, :] * stride_bk)
            else:
                km = offs_k[None, :] < K
                a = tl.load(a_base + offs_k[None, :] * stride_ak, mask=km, other=0.0)
                b = tl.load(b_base + offs_k[None, :] * stride_bk, mask=km, other=0.0)
            acc += a.to(tl.float32) * b.to(tl.float32)
        result = alpha * tl.sum(acc, axis=1)
        tl.store(out_ptr + dest, result.to(out_ptr.dtype.element_ty), mask=dest >= 0)


def tile_gather(mask, a, b, tm, tn, chunk, block_k, warps):
    from stuning.formats.tiles import output_tiles

    tiles = output_tiles(mask, tm, tn, chunk)
    out = torch.empty(mask.nnz, dtype=a.dtype, device=a.device)
    k = a.shape[1]
    vec = 8 if a.element_size() == 2 else 4
    _tile_gather_kernel[(tiles.count,)](
        tiles.tile_m, tiles.tile_n, tiles.tile_ptr, tiles.local, tiles.dest, a, b, out,
        k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), 1.0,
        TM=tm, TN=tn, CHUNK=chunk, BLOCK_K=block_k, VEC=min(vec, block_k), EVEN_K=k % block_k == 0,
        num_warps=warps,
    )
    return out


def grid(k: int):
    block_ks = sorted({min(triton.next_power_of_2(k), bk) for bk in (32, 64, 128)})
    for (tm, tn), chunk, bk, warps in itertools.product(TILES, CHUNKS, block_ks, WARPS):
        if chunk * bk // (32 * warps) > 64:  # elements of each operand a thread holds a step
            continue
        yield tm, tn, chunk, bk, warps


def main() -> int:
    import stuning

    rows_out = []
    for p in attention_problems(LS, KS, SPARSITIES, "cpu" if SMOKE else "cuda", seconds=SECONDS, dtype=DTYPE):
        length, k, sparsity, mask, a, b, ref = p.length, p.k, p.sparsity, p.mask, p.a, p.b, p.ref
        row = {"l": length, "k": k, "sparsity": sparsity, "nnz": mask.nnz, "dtype": str(DTYPE)}
        row["dense_us"] = probe_time_us(lambda a=a, b=b: a @ b, SMOKE)
        if torch.float32 == DTYPE and not SMOKE:
            tmask = mask.to_torch()
            row["sampled_addmm_us"] = probe_time_us(
                lambda t=tmask, a=a, b=b: torch.sparse.sampled_addmm(t, a, b, beta=0.0), SMOKE)
        row["auto_us"] = probe_time_us(lambda mask=mask, a=a, b=b: stuning.sddmm(mask, a, b), SMOKE)
        times = []
        for tm, tn, chunk, bk, warps in grid(k):
            cfg = {"tm": tm, "tn": tn, "chunk": chunk, "block_k": bk, "warps": warps}

            def run(tm=tm, tn=tn, chunk=chunk, bk=bk, warps=warps, mask=mask, a=a, b=b):
                return tile_gather(mask, a, b, tm, tn, chunk, bk, warps)

            try:
                check_close(run(), ref, str(cfg), 1e-5 if torch.float32 == DTYPE else 1e-2)
                cfg["us"] = probe_time_us(run, SMOKE)
            except Exception as e:  # reported, not fatal
                cfg["error"] = str(e).splitlines()[0][:200]
            times.append(cfg)
        ok = [t for t in times if "us" in t]
        best = min(ok, key=lambda t: t["us"], default=None)
        row["best_us"] = best["us"] if best else None
        row["best"] = best
        row["errors"] = sum("error" in t for t in times)
        row["configs"] = times
        rows_out.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if k_ != "configs"}), flush=True)
        out = os.environ.get("OUT")
        if out:  # after every problem: a call cut short keeps what it measured
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, f"sddmm_tile_gather_{DTYPE}.json".replace("torch.", "")), "w") as f:
                json.dump(rows_out, f, indent=1)
    nan = float("nan")
    print(f"{'L':>5} {'K':>4} {'zeros':>5} {'dense':>7} {'addmm':>7} {'auto':>7} {'tilegat':>7}  "
          "dense/auto dense/tg  best")
    for r in rows_out:
        bt = r["best_us"] or nan
        print(f"{r['l']:>5} {r['k']:>4} {r['sparsity']:>5} {r['dense_us']:>7.1f} "
              f"{r.get('sampled_addmm_us', nan):>7.1f} "
              f"{r['auto_us']:>7.1f} {bt:>7.1f}  {r['dense_us'] / r['auto_us']:>9.2f} {r['dense_us'] / bt:>8.2f}  "
              f"{ {k_: v for k_, v in (r['best'] or {}).items() if k_ != 'us'} }")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
