"""Probe a persistent tiled SDDMM fed by TMA on attention-like masks (H200/H100).

The library's tiled kernel (``kernels/sddmm_tiled.py``) loads each tile's B operand through
registers and runs one run of tiles per program; at L = 4096, K = 64 it spends about 2.5 us a tile
(BENCHMARKS.md 7j: latency-bound, 23% achieved occupancy), far above the tile's MMA (~0.3 us). This
probe tries two things the library kernel does not do:

- **TMA:** A's and B's tiles are copied into shared memory by the Tensor Memory Accelerator
  (``TensorDescriptor``), so they cost no registers and Triton's pipeliner can keep ``STAGES`` tiles
  in flight;
- **persistent programs:** ``PROGRAMS`` programs (a multiple of the SM count) walk the whole tile
  list, tile ``pid``, ``pid + PROGRAMS``, ..., so the next tiles' copies overlap this tile's product
  and pick.

Every tile holds at most CHUNK entries (CHUNK is the next power of two over the fullest tile), so
the pick is one step with no loop: its entries are at ``t * CHUNK``. It also times the library
kernel with 256-wide tiles, which its config space does not offer. Per problem (uniform random
mask, fp16, A and B K-contiguous as Q @ K^T): the dense cuBLAS product, the library's pick
(``config=None``), the library kernel's best over a small grid, and the TMA kernel's best. Every
config is checked against float64 first; timings are CUDA-graph replays behind an L2 flush.

    python3 scripts/probe_sddmm_tma.py        # $OUT/sddmm_tma_probe.json, a table last (GPU only)
    PROBE_PARTS=1 python3 scripts/probe_sddmm_tma.py   # where a tile's time goes ($OUT/sddmm_tma_parts.json)
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
from probe_harness import attention_problems, probe_time_us, sddmm_baseline_row, write_results  # noqa: E402

LS = [int(v) for v in os.environ.get("PROBE_LS", "4096").split(",")]
KS = [int(v) for v in os.environ.get("PROBE_KS", "64,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.95,0.98").split(",")]
TILES = [tuple(int(x) for x in v.split("x"))
         for v in os.environ.get("PROBE_TILES", "64x128,128x64,128x128,64x256,128x256").split(",")]
FACTORS = [int(v) for v in os.environ.get("PROBE_FACTORS", "1,2,3,4,0").split(",")]  # 0: a program a tile
SECONDS = float(os.environ.get("PROBE_SECONDS", "420"))
KINDS = os.environ.get("PROBE_KINDS", "lib,tma").split(",")
RUNS = [int(v) for v in os.environ.get("PROBE_RUNS", "1,4").split(",")]  # the library kernel's runs of tiles


@triton.jit
def _sddmm_tma_kernel(
    tile_m_ptr, tile_n_ptr,
    local_ptr, dest_ptr,
    a_desc, bt_desc, out_ptr,
    count,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, CHUNK: tl.constexpr,
    STAGES: tl.constexpr,
    PART: tl.constexpr = 0,  # 0: the kernel; 1-3: parts of it alone, for PROBE_PARTS (results unchecked)
):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    for t in tl.range(pid, count, programs, num_stages=STAGES):
        tm = tl.load(tile_m_ptr + t)
        tn = tl.load(tile_n_ptr + t)
        offs = t * CHUNK + tl.arange(0, CHUNK)  # entries fit int32 (output_tiles checks)
        dest = tl.load(dest_ptr + offs)
        pos = tl.load(local_ptr + offs).to(tl.int32)
        if PART == 3:
            # No product: the pick alone, from a tile the program makes up (still staged in shared memory).
            flat = (tl.arange(0, BLOCK_M * BLOCK_N) + t).to(out_ptr.dtype.element_ty)
        else:
            a = a_desc.load([tm * BLOCK_M, 0])
            bt = bt_desc.load([tn * BLOCK_N, 0])
            acc = tl.dot(a, tl.trans(bt))
            blocks = tl.permute(tl.reshape(acc.to(out_ptr.dtype.element_ty), (BLOCK_M // 8, 8, BLOCK_N // 8, 8)),
                                (0, 2, 1, 3))
            flat = tl.reshape(blocks, (BLOCK_M * BLOCK_N,))
        if PART == 1:
            # The product alone: one value a tile leaves the program, so the product is not dead code.
            tl.store(out_ptr + t, tl.sum(flat.to(tl.float32), 0).to(out_ptr.dtype.element_ty))
        elif PART == 2:
            # The product and the gather, no scattered stores: one sum a tile.
            picked = tl.gather(flat, pos, 0).to(tl.float32)
            tl.store(out_ptr + t, tl.sum(tl.where(dest >= 0, picked, 0.0), 0).to(out_ptr.dtype.element_ty))
        else:
            tl.store(out_ptr + dest, tl.gather(flat, pos, 0), mask=dest >= 0)


def one_chunk(mask, bm: int, bn: int) -> int:
    """The smallest power of two that holds the fullest ``bm`` x ``bn`` tile's nonzeros."""
    rows = mask.row_ids().long()
    cols = mask.col.long()
    tiles_n = triton.cdiv(mask.shape[1], bn)
    counts = torch.bincount((rows // bm) * tiles_n + cols // bn)
    return max(32, triton.next_power_of_2(int(counts.max())))


def tma_sddmm(tiles, a, b, warps: int, stages: int, programs: int, part: int = 0):
    from triton.tools.tensor_descriptor import TensorDescriptor

    k = a.shape[1]
    bt = b.t()
    assert a.stride(1) == 1 and bt.stride(1) == 1, "the probe reads K-contiguous A and B"
    a_desc = TensorDescriptor.from_tensor(a, [tiles.block_m, k])
    bt_desc = TensorDescriptor.from_tensor(bt, [tiles.block_n, k])
    out = torch.empty(max(int((tiles.dest >= 0).sum()), tiles.count), dtype=a.dtype, device=a.device)
    grid = (tiles.count if programs == 0 else min(programs, tiles.count),)

    def run():
        _sddmm_tma_kernel[grid](
            tiles.tile_m, tiles.tile_n, tiles.local, tiles.dest, a_desc, bt_desc, out, tiles.count,
            BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=k, CHUNK=tiles.chunk, STAGES=stages,
            PART=part, num_warps=warps, num_stages=stages)
        return out

    return run


def lib_sddmm(tiles, mask, a, b, warps: int, run_len: int):
    from stuning.kernels.sddmm_tiled import sddmm_tiled

    def run():
        return sddmm_tiled(tiles, mask.values, a, b, alpha=1.0, beta=0.0, block_k=a.shape[1], num_warps=warps,
                           num_stages=2, tiles_per_program=run_len)

    return run


def checked_time(fn, ref) -> dict:
    try:
        got = fn().double()
        err = float((got - ref).norm() / max(ref.norm(), 1e-30))
        if not err < 1e-2:
            return {"error": f"relative error {err:.2e}"}
        return {"us": probe_time_us(fn, False)}
    except Exception as e:  # reported, not fatal
        return {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"}


def parts_main() -> int:
    """``PROBE_PARTS=1``: where a tile's time goes. For each problem and tile in PROBE_TILES (8 warps,
    2 stages, a program a tile, and 2 per SM), the TMA kernel whole, then its product alone, the
    product and the gather, and the pick alone; the library kernel's best as the yardstick."""
    from stuning.formats.tiles import output_tiles

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for p in attention_problems(LS, KS, SPARSITIES, "cuda", seconds=SECONDS):
        row = sddmm_baseline_row(p, False)
        for (bm, bn), programs in itertools.product(TILES, (0, 2 * sms)):
            chunk = one_chunk(p.mask, bm, bn)
            tiles = output_tiles(p.mask, bm, bn, chunk)
            whole = checked_time(tma_sddmm(tiles, p.a, p.b, 8, 2, programs), p.ref)
            times = [whole.get("us", float("nan"))]
            times += [probe_time_us(tma_sddmm(tiles, p.a, p.b, 8, 2, programs, part), False) for part in (1, 2, 3)]
            row[f"{bm}x{bn}/{programs}"] = {"whole": times[0], "product": times[1], "product+gather": times[2],
                                            "pick": times[3], "error": whole.get("error")}
            print(f"L={p.length} K={p.k} {p.sparsity} tile {bm}x{bn} programs {programs or 'a tile each'}: dense "
                  f"{row['dense_us']:.2f} auto {row['auto_us']:.2f} | whole {times[0]:.2f} product {times[1]:.2f} "
                  f"product+gather {times[2]:.2f} pick alone {times[3]:.2f}", flush=True)
        rows.append(row)
    write_results(rows, "sddmm_tma_parts.json")
    return 0


def main() -> int:
    if os.environ.get("PROBE_PARTS", "0") != "0":
        return parts_main()
    from stuning.formats.tiles import output_tiles

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows_out = []
    for p in attention_problems(LS, KS, SPARSITIES, "cuda", seconds=SECONDS):
        row = sddmm_baseline_row(p, False)
        trials = []
        for bm, bn in TILES:
            if bm * bn > 128 * 256 or (bn == 256 and p.k > 64 and bm > 64):
                continue
            chunk = one_chunk(p.mask, bm, bn)
            tiles = output_tiles(p.mask, bm, bn, chunk)
            for warps in (4, 8):
                if bm * bn // (32 * warps) > 128:
                    continue  # the accumulator would spill
                for run_len in RUNS if "lib" in KINDS else ():
                    if run_len > 1 and tiles.count < run_len * sms:
                        continue
                    cfg = {"kernel": "lib", "tile": f"{bm}x{bn}", "chunk": chunk, "warps": warps, "run": run_len}
                    trials.append(cfg | checked_time(lib_sddmm(tiles, p.mask, p.a, p.b, warps, run_len), p.ref))
                for stages, factor in itertools.product((1, 2, 3) if "tma" in KINDS else (), FACTORS):
                    smem = (stages + 1) * (bm + bn) * p.k * 2 + bm * bn * 2
                    if smem > 227 * 1024:
                        continue
                    cfg = {"kernel": "tma", "tile": f"{bm}x{bn}", "chunk": chunk, "warps": warps, "stages": stages,
                           "programs": factor * sms}
                    trials.append(cfg | checked_time(tma_sddmm(tiles, p.a, p.b, warps, stages, factor * sms), p.ref))
        for kind in ("lib", "tma"):
            ok = [t for t in trials if t["kernel"] == kind and "us" in t]
            best = min(ok, key=lambda t: t["us"], default=None)
            row[f"best_{kind}_us"] = best["us"] if best else None
            row[f"best_{kind}"] = best
        row["errors"] = sum("error" in t for t in trials)
        row["trials"] = trials
        rows_out.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if k_ != "trials"}), flush=True)

    write_results(rows_out, "sddmm_tma_probe.json")
    nan = float("nan")
    print(f"{'L':>5} {'K':>4} {'zeros':>5} {'dense':>7} {'auto':>7} {'lib':>7} {'tma':>7}"
          "  dense/auto dense/lib dense/tma")
    for r in rows_out:
        lib, tma = r["best_lib_us"] or nan, r["best_tma_us"] or nan
        d = r["dense_us"]
        print(f"{r['l']:>5} {r['k']:>4} {r['sparsity']:>5} {d:>7.2f} {r['auto_us']:>7.2f} {lib:>7.2f} {tma:>7.2f}"
              f"  {d / r['auto_us']:>9.2f} {d / lib:>9.2f} {d / tma:>9.2f}")
    for r in rows_out:
        print(r["l"], r["k"], r["sparsity"], "errors", r["errors"], "lib", r["best_lib"], "tma", r["best_tma"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
