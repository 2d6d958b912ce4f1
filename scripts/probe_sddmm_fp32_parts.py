"""Probe fp32 SDDMM on the fp16 tensor cores: the tiled kernel's fp32 tiles as one fp16 product of
the operands' parts (``kernels/fp16_split.py``, ``parts=True``), against the same tiles as three
TF32 products (``tf32x3``, ``parts=False``), ``torch.sparse.sampled_addmm`` (cuSPARSE), SGEMM with
TF32 off (cuBLAS's whole product) and the library's pick.

fp32 SDDMM ran 1.53x ``sampled_addmm`` on the first table (BENCHMARKS.md 8w), against issue 7's 5x;
its tiled kernel took 62-80 TFLOP/s in tf32x3, three TF32 products per tile at half fp16's rate. The
parts do three fp16 products, so at best about twice tf32x3's speed, less the split's pass over A
and B (9l did the same for SpMM).

Per problem (the first table's layout: A row-major, B K-contiguous; a random mask): every variant
checked against float64 at 1e-5 (the tests' fp32 tolerance), its error recorded, timed by
``do_bench`` with L2 flushed (median; CUDA-graph replays under 100 us).

    python3 scripts/probe_sddmm_fp32_parts.py     # $OUT/sddmm_fp32_parts.json, a table last
    PROBE_SHAPES=4096x4096 PROBE_KS=2048 PROBE_SPARSITIES=0.7 python3 scripts/probe_sddmm_fp32_parts.py
"""

from __future__ import annotations

import functools
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_harness import check_close, env_list, env_shapes, write_results  # noqa: E402

# (block_m, block_n, block_k, num_warps, num_stages): the tile shapes the fp32 and fp16 entries took.
TILES = [(128, 128, 64, 8, 3), (128, 128, 32, 8, 4), (128, 64, 64, 4, 3), (64, 128, 64, 4, 3)]
CHUNK = 64


def tiled_run(mask, a, b, tile, parts: bool):
    from stuning.kernels import sddmm_tiled

    from stuning.formats import output_tiles

    bm, bn, bk, warps, stages = tile
    tiles = output_tiles(mask, bm, bn, CHUNK)
    return functools.partial(sddmm_tiled.sddmm_tiled, tiles, mask.values, a, b, alpha=1.0, beta=0.0,
                             block_k=bk, num_warps=warps, num_stages=stages, parts=parts)


def timed(row: dict, label: str, run, ref: torch.Tensor, pick=lambda y: y) -> None:
    from stuning.tuning.timing import bench_us

    try:
        y = pick(run())
        row[f"{label}_err"] = float((y.double() - ref).norm() / ref.norm())
        check_close(y, ref, label, 1e-5)
        row[f"{label}_us"], row[f"{label}_timing"] = bench_us(run)
    except Exception as e:  # noqa: BLE001 - a failing variant is a finding
        row.setdefault("errors", {})[label] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}"


def sampled(at, y: torch.Tensor) -> torch.Tensor:
    return y[at]


def best_of(row: dict, prefix: str) -> tuple[str | None, float]:
    found = {k[: -len("_us")]: v for k, v in row.items() if k.startswith(prefix) and k.endswith("_us")}
    if not found:
        return None, float("nan")
    label = min(found, key=found.get)
    return label[len(prefix):], found[label]


def main():
    import stuning

    shapes = env_shapes("PROBE_SHAPES", "4096x4096,768x3072")
    ks = env_list("PROBE_KS", "256,2048", int)
    sparsities = env_list("PROBE_SPARSITIES", "0.7,0.9,0.95,0.98")
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for (m, n), k, sparsity in itertools.product(shapes, ks, sparsities):
        keep = torch.rand(m, n, generator=gen) >= sparsity
        mask = stuning.CSRMatrix.from_dense((keep * torch.randn(m, n, generator=gen)).cuda())
        a = torch.randn(m, k, generator=gen).cuda()
        b = torch.randn(n, k, generator=gen).cuda().t()
        at = mask.row_ids().long(), mask.col.long()
        ref = (a.double() @ b.double())[at]
        row = {"m": m, "n": n, "k": k, "sparsity": sparsity, "nnz": mask.nnz}
        timed(row, "sgemm", functools.partial(torch.mm, a, b), ref, functools.partial(sampled, at))
        mask_t = torch.sparse_csr_tensor(mask.crow, mask.col, mask.values, mask.shape)
        timed(row, "sampled_addmm", functools.partial(torch.sparse.sampled_addmm, mask_t, a, b, beta=0.0), ref,
              torch.Tensor.values)
        timed(row, "pick", functools.partial(stuning.sddmm, mask, a, b), ref, lambda y: y.values)
        for tile, parts in itertools.product(TILES, (True, False)):
            label = f"{'parts' if parts else 'tf32x3'} {'x'.join(map(str, tile[:3]))}:{tile[3]}:{tile[4]}"
            timed(row, label, tiled_run(mask, a, b, tile, parts), ref)
        row["parts_best"], row["parts_us"] = best_of(row, "parts ")
        row["tf32x3_best"], row["tf32x3_us"] = best_of(row, "tf32x3 ")
        print({k_: v for k_, v in row.items() if not k_.startswith(("parts ", "tf32x3 "))}, flush=True)
        rows.append(row)
        write_results(rows, "sddmm_fp32_parts.json")
    print("\n| M x N | K | zeros | SGEMM | sampled_addmm | pick | tf32x3 (best) | parts (best) | "
          "addmm / parts | SGEMM / parts | tf32x3 / parts | err parts / SGEMM |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    nan = float("nan")
    for r in rows:
        p = r["parts_us"]
        best = r["parts_best"]
        err = f"{r[f'parts {best}_err']:.1e} / {r.get('sgemm_err', nan):.1e}" if best else "-"
        print(f"| {r['m']}x{r['n']} | {r['k']} | {r['sparsity']:.0%} | {r.get('sgemm_us', nan):.1f} | "
              f"{r.get('sampled_addmm_us', nan):.1f} | {r.get('pick_us', nan):.1f} | "
              f"{r['tf32x3_us']:.1f} ({r['tf32x3_best']}) | {p:.1f} ({best}) | "
              f"{r.get('sampled_addmm_us', nan) / p:.2f}x | {r.get('sgemm_us', nan) / p:.2f}x | "
              f"{r['tf32x3_us'] / p:.2f}x | {err} |")
        if r.get("errors"):
            print(f"|   failed: {r['errors']} |")


if __name__ == "__main__":
    main()
