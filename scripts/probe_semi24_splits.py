"""Probe split-K counts for the 2:4 kernel at decode widths: does an even share per SM pay?

The decode configs split K so that every SM gets programs. With 11008 rows in 64-row tiles, 4
splits make 688 programs: 6 on some SMs and 5 on others, and a kernel bound by each SM's shared
memory (BENCHMARKS.md 7i) ends with its busiest SM. 3 or 6 splits make 516 or 1032, within 1% of
an even share. This times, for each Llama-7B decode problem, the config the library picks (the
shipped database) with every split count of the space, against dense cuBLAS, in CUDA graphs with
L2 flushed; each config is checked against a float64 reference first.

    python3 scripts/probe_semi24_splits.py          # $OUT/semi24_splits_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_semi24_splits.py   # tiny, CPU
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os

import torch
from probe_harness import check_close, probe_time_us, semi24_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
SHAPES = [(64, 256)] if SMOKE else [(4096, 4096), (11008, 4096), (4096, 11008)]
NS = [16] if SMOKE else [int(v) for v in os.environ.get("PROBE_NS", "16,128").split(",")]
SPLITS = (1, 2, 3, 4, 6, 8)


def timer(fn) -> float:
    return probe_time_us(fn, SMOKE)


def main() -> int:
    import stuning

    rows = []
    for p in semi24_problems(SHAPES, NS, "cpu" if SMOKE else "cuda"):
        row = {"m": p.m, "k": p.k, "n": p.n, "pick": p.pick.as_dict(),
               "cublas_us": timer(functools.partial(torch.matmul, p.dense, p.x))}
        for split in SPLITS:
            cfg = dataclasses.replace(p.pick, split_k=split)
            run = functools.partial(stuning.semi24_mm, p.w, p.x, config=cfg)
            check_close(run(), p.ref, f"{p.m}x{p.k} n={p.n} split {split}")
            row[f"split{split}_us"] = timer(run)
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_results(rows, "semi24_splits_probe.json")
    heads = " ".join(f"{'s' + str(s):>6}" for s in SPLITS)
    print(f"{'M x K':>11} {'N':>4} {'tile':>9} {'pick':>5} {'cuBLAS':>7} {heads}")
    for r in rows:
        p = r["pick"]
        tile = f"{p['block_m']}x{p['block_n']}x{p['block_k']}"
        print(f"{r['m']:>5}x{r['k']:<5} {r['n']:>4} {tile:>9} {p['split_k']:>5} {r['cublas_us']:>7.1f} "
              + " ".join(f"{r[f'split{s}_us']:>6.1f}" for s in SPLITS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
