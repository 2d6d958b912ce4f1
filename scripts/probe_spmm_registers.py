"""Registers and spills of the gather SpMM kernels' configs where the cost model's pick missed most.

The cost model's fp32 picks over whole SpMM spaces ran up to 7x the tuned configs (BENCHMARKS.md
9f): sliced ELL with 16-32 rows and 8-wide steps, which the analytic terms predict as fast as the
tuned 2-row, 32-wide ones. The fp16 picks of those shapes miss far less. One suspect was registers:
the model counts a gathered tile and an accumulator of its shape per thread whatever the dtype, and
ptxas spills to local memory past 255 (BENCHMARKS.md 9g: none of them spilled, and the same configs
ran as slowly in fp16; the fp16 model did not pick them). This takes the worst misses of a
``probe_model_cap.py`` run (its ``variants.csv``), rebuilds each problem in its dtype and in the
other width (fp32 <-> fp16), times every config the run timed there, and reads each compiled
kernel's registers and spills.

    python3 scripts/probe_spmm_registers.py VARIANTS_CSV [--worst 8] [--out DIR]

Writes ``registers.csv`` (one row per problem, dtype and config) under ``--out`` (or $OUT) and
prints it last. Needs a CUDA GPU (it compiles and times).
"""

from __future__ import annotations

import argparse
import ast
import math
import os
from pathlib import Path

import pandas as pd
import torch
from bench_lookup import rebuild, time_once

OTHER_WIDTH = {"float32": "float16", "float16": "float32", "bfloat16": "float32"}


def compiled_kernels() -> dict:
    """Every compiled gather-SpMM kernel so far, by its cache identity: (name, n_regs, n_spills)."""
    from stuning.kernels import spmm, spmm_sell

    out = {}
    for fn in (spmm._spmm_kernel, spmm_sell._spmm_sell_kernel):
        for caches in fn.device_caches.values():
            # (kernel_cache, kernel_key_cache, target, backend, binder) in Triton 3.6; read defensively.
            for cache in (c for c in caches if isinstance(c, dict)):
                for kernel in cache.values():
                    if hasattr(kernel, "n_regs"):
                        out[id(kernel)] = (fn.__name__, kernel.n_regs, kernel.n_spills)
    return out


def worst_keys(df: pd.DataFrame, worst: int, label: str = "cap0.3") -> list[str]:
    times = df.pivot_table(index="key", columns="label", values="us", aggfunc="first")
    return list((times[label] / times["own"]).sort_values(ascending=False).index[:worst])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", type=Path, help="a probe_model_cap.py variants.csv")
    ap.add_argument("--worst", type=int, default=8, help="this many problems, the worst picks first")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("probe_spmm_registers.py: no CUDA device (it compiles and times configs)")
        return 0
    from stuning.db import TuningDB
    from stuning.tuning.features import ProblemFeatures
    from stuning.tuning.objective import KernelObjective
    from stuning.tuning.problems import Problem
    from stuning.tuning.registry import family

    df = pd.read_csv(args.variants)
    entries = TuningDB.open("nvidia-h200").entries(include_stale=True)
    fam = family("spmm")
    rows = []
    # A config's kernel compiles once per dtype: a later problem (or a label repeating a config) finds
    # it in Triton's cache, so its registers are those read when it was compiled.
    stats: dict[tuple[str, str], tuple] = {}
    for i, key in enumerate(worst_keys(df, args.worst)):
        entry = entries[key]
        configs = {r.label: fam.config_from_dict(ast.literal_eval(r.config)) for r in df[df.key == key].itertuples()}
        for dtype in (entry.dtype, OTHER_WIDTH[entry.dtype]):
            features = ProblemFeatures("spmm", dtype, dict(entry.features))
            run, ref, _ = rebuild("spmm", entry.features, dtype, seed=i, device="cuda")
            objective = KernelObjective(Problem(None, features, run, ref, {}))
            timed = {}
            for label, config in configs.items():
                config = fam.repair(config, features)
                before = compiled_kernels()
                us = time_once(objective, timed, config, f"{key} {dtype} {label}")
                new = [v for k, v in compiled_kernels().items() if k not in before]
                if new:
                    stats[dtype, repr(config)] = new[0]
                name, regs, spills = stats.get((dtype, repr(config)), ("(not compiled)", math.nan, math.nan))
                rows.append({"key": key, "dtype": dtype, "label": label, "kernel": config.kernel,
                             "rows": config.rows, "step": config.nnz_step, "block_n": config.block_n,
                             "warps": config.num_warps, "vec": config.vec, "prefetch": config.prefetch,
                             "us": us, "jit": name, "regs": regs, "spills": spills,
                             "config": config.as_dict()})
            print(f"[{i + 1}] {key} {dtype}: " + ", ".join(
                f"{r['label']} {r['us']:.1f} us {r['regs']} regs {r['spills']} spills"
                for r in rows if r["key"] == key and r["dtype"] == dtype), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    table.to_csv(out / "registers.csv", index=False)
    table["m_k_n"] = table.key.str.extract(r"k=(\d+)\|m=(\d+)\|n=(\d+)").agg("x".join, axis=1)
    print(table[["m_k_n", "dtype", "label", "kernel", "rows", "step", "block_n", "warps", "prefetch",
                 "us", "regs", "spills"]].to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
