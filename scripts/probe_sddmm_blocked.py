"""Probe a blocked gather SDDMM at 95-98% zeros: CUDA-core dots, one program per large output block.

At 98% a 64 x 64 output tile of attention's L x L mask holds ~80 nonzeros, and the tiled kernel
(``sddmm_tiled.py``) still computes all 4096 of its products and writes the tile to shared memory
to pick them: 9.9 us at L = 4096, K = 64, against the dense product's 11-14 us (BENCHMARKS.md 8m).
The gather kernel (``sddmm.py``) does only the nonzeros' dots, but takes them in CSR order, so its
programs read B's columns (rows of K^T, 128 bytes each at K = 64) from all over B: ~43 MB of L2
reads at L = 4096, 98%.

Here a program takes one large block of the output (``BLOCK_M`` x ``BLOCK_N``, e.g. 256 x 512) and
dots only its nonzeros, CHUNK at a time, in CSR order within the block: the block's band of A and
range of B (BLOCK_M + BLOCK_N rows of K elements, 96 KB at 256 x 512, K = 64) stay in the SM's L1
after their first read, and consecutive nonzeros share their row of A, so one load of a warp serves
several of them. The blocks come from ``stuning.formats.output_tiles`` (positions in 8 x 8 blocks,
decoded here).

Per problem (uniform random L x L mask, fp16, ``PROBE_LS`` x ``PROBE_KS`` x ``PROBE_SPARSITIES``): the
dense cuBLAS product, stuning's pick (the shipped database), and a grid of blocked configs. Every
config is checked against a float64 reference first; CUDA-graph replays behind an L2 flush.

    python3 scripts/probe_sddmm_blocked.py            # $OUT/sddmm_blocked_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_sddmm_blocked.py   # tiny, CPU
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_harness import attention_problems, checked_time_us, sddmm_baseline_row, write_results  # noqa: E402
from probe_spmm_latency import SMOKE  # noqa: E402

LS = [64] if SMOKE else [int(v) for v in os.environ.get("PROBE_LS", "1024,2048,4096").split(",")]
KS = [16] if SMOKE else [int(v) for v in os.environ.get("PROBE_KS", "64,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.95,0.98").split(",")]
BLOCKS = [tuple(int(x) for x in v.split("x")) for v in os.environ.get(
    "PROBE_BLOCKS", "32x256,64x256,64x512,128x256,128x512,256x256,256x512,128x1024").split(",")]
CHUNKS = [int(v) for v in os.environ.get("PROBE_CHUNKS", "64,128,256").split(",")]
WARPS = [int(v) for v in os.environ.get("PROBE_WARPS", "4,8").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "400"))


@triton.jit(do_not_specialize=["K"])
def _blocked_kernel(tile_m_ptr, tile_n_ptr, tile_ptr, local_ptr, dest_ptr, a_ptr, b_ptr, out_ptr, K,
                    stride_am, stride_ak, stride_bk, stride_bn, alpha,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, CHUNK: tl.constexpr,
                    VEC: tl.constexpr, UPCAST: tl.constexpr):
    t = tl.program_id(0)
    row0 = tl.load(tile_m_ptr + t).to(tl.int64) * BLOCK_M
    col0 = tl.load(tile_n_ptr + t).to(tl.int64) * BLOCK_N
    start = tl.load(tile_ptr + t)
    end = tl.load(tile_ptr + t + 1)
    for c0 in range(start, end, CHUNK):
        offs = c0 + tl.arange(0, CHUNK)
        dest = tl.load(dest_ptr + offs)
        pos = tl.load(local_ptr + offs).to(tl.int32)
        ok = dest >= 0
        blk = pos // 64
        r = (blk // (BLOCK_N // 8)) * 8 + (pos % 64) // 8
        c = (blk % (BLOCK_N // 8)) * 8 + pos % 8
        a_rows = a_ptr + (row0 + r)[:, None] * stride_am
        b_cols = b_ptr + (col0 + c)[:, None] * stride_bn
        acc = tl.zeros((CHUNK, BLOCK_K), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            offs_k = tl.max_contiguous(tl.multiple_of(k0 + tl.arange(0, BLOCK_K), VEC), VEC)
            a = tl.load(a_rows + offs_k[None, :] * stride_ak, mask=ok[:, None], other=0.0)
            b = tl.load(b_cols + offs_k[None, :] * stride_bk, mask=ok[:, None], other=0.0)
            acc += a.to(tl.float32) * b.to(tl.float32)
        tl.store(out_ptr + dest, (alpha * tl.sum(acc, axis=1)).to(out_ptr.dtype.element_ty), mask=ok)


@dataclasses.dataclass(frozen=True)
class BlockedConfig:
    block_m: int
    block_n: int
    chunk: int
    num_warps: int


def blocked_sddmm(mask, a, b, cfg: BlockedConfig):
    from stuning.formats import output_tiles

    tiles = output_tiles(mask, cfg.block_m, cfg.block_n, cfg.chunk)
    k = a.shape[1]
    out = torch.empty(mask.nnz, dtype=a.dtype, device=a.device)
    _blocked_kernel[(tiles.count,)](
        tiles.tile_m, tiles.tile_n, tiles.tile_ptr, tiles.local, tiles.dest, a, b, out, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), 1.0,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=min(k, 128), CHUNK=cfg.chunk, VEC=8,
        UPCAST=True, num_warps=cfg.num_warps)
    return out


def grid():
    blocks = [(32, 32)] if SMOKE else BLOCKS
    for (bm, bn), chunk, warps in itertools.product(blocks, CHUNKS, WARPS):
        yield BlockedConfig(bm, bn, chunk, warps)


def main() -> int:
    rows_out = []
    for p in attention_problems(LS, KS, SPARSITIES, "cpu" if SMOKE else "cuda", seconds=SECONDS):
        row = sddmm_baseline_row(p, SMOKE)
        times = []
        for cfg in grid():
            us = checked_time_us(lambda cfg=cfg, p=p: blocked_sddmm(p.mask, p.a, p.b, cfg), p.ref, str(cfg),
                                 smoke=SMOKE)
            outcome = {"us": us} if isinstance(us, float) else {"error": us}
            times.append({"config": dataclasses.asdict(cfg), **outcome})
        ok = [t for t in times if "us" in t]
        best = min(ok, key=lambda t: t["us"], default=None)
        row["best_us"] = best["us"] if best else None
        row["best_config"] = best["config"] if best else None
        row["errors"] = sum("error" in t for t in times)
        row["configs"] = times
        rows_out.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if k_ != "configs"}), flush=True)

    write_results(rows_out, "sddmm_blocked_probe.json")
    nan = float("nan")
    print(f"{'L':>5} {'K':>4} {'zeros':>6} {'dense':>7} {'auto':>7} {'blocked':>8}  dense/auto dense/blocked  best")
    for r in rows_out:
        best = r["best_us"] or nan
        c = r["best_config"] or {}
        print(f"{r['l']:>5} {r['k']:>4} {r['sparsity']:>6} {r['dense_us']:>7.1f} {r['auto_us']:>7.1f} {best:>8.1f}"
              f"  {r['dense_us'] / r['auto_us']:>10.2f} {r['dense_us'] / best:>13.2f}  "
              + "x".join(str(c.get(f, "")) for f in ("block_m", "block_n", "chunk", "num_warps")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
