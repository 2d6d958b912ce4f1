"""Probe 16-byte loads of B's rows in the SpMM kernels: vector width 8 against 4 (fp16).

The gather kernels load each nonzero's row of B in pieces of ``vec`` elements per thread, and every
piece repeats the per-nonzero work (the index and value loads, the 64-bit address, the mask). In
sm_90a SASS (``scripts/sass_stats.py --kernel spmm --configs 4x16x128:4:4:1,4x16x128:8:4:1``) a
width of 8 (one 16-byte load) instead of 4 cuts the main loop's instructions per multiply-add by
28-31%, and at N = 128 the CSR kernel is bound by instruction issue (BENCHMARKS.md 7i).

For each problem (4096 x 4096 fp16, uniform rows, ``PROBE_NS`` x ``PROBE_SPARSITIES``) it samples
configs of both kernels' space and times each at width 4 and at width 8 (CUDA graphs, L2 flushed),
checked against a float64 reference first, with cuBLAS and stuning's own pick.

    python3 scripts/probe_spmm_vec.py          # $OUT/spmm_vec_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_vec.py   # tiny, CPU
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import random

import torch
from probe_harness import check_close, probe_time_us, spmm_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
NS = [16] if SMOKE else [int(v) for v in os.environ.get("PROBE_NS", "16,128,2048").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.95,0.98").split(",")]
M, K = (64, 64) if SMOKE else (4096, 4096)
SAMPLE = 2 if SMOKE else int(os.environ.get("PROBE_CONFIGS", "24"))


def timer(fn) -> float:
    return probe_time_us(fn, SMOKE)


def main() -> int:
    from stuning.kernels import spmm as csr_kernel
    from stuning.kernels import spmm_sell

    import stuning

    device = "cpu" if SMOKE else "cuda"
    rows = []
    for p in spmm_problems(M, K, NS, SPARSITIES, device):
        n, sparsity, w, x, ref, a, pick = p.n, p.sparsity, p.w, p.x, p.ref, p.a, p.pick
        problem = csr_kernel.SpMMProblem(M, K, n, a.nnz, torch.float16, pad_to=4)
        space = csr_kernel.config_space(problem) + spmm_sell.config_space(problem)
        sample = random.Random(n).sample(space, min(SAMPLE, len(space)))
        row = {"n": n, "sparsity": sparsity, "pick": pick.as_dict(),
               "cublas_us": timer(functools.partial(torch.matmul, w, x)),
               "pick_us": timer(functools.partial(stuning.spmm, a, x, config=pick)), "pairs": []}
        for cfg in [pick, *sample]:
            pair = {"config": cfg.as_dict()}
            for vec in (4, 8):
                if n % vec or vec > cfg.block_n:
                    continue
                variant = dataclasses.replace(cfg, vec=vec)
                run = functools.partial(stuning.spmm, a, x, config=variant)
                check_close(run(), ref, f"n={n} {variant}")
                pair[f"vec{vec}_us"] = timer(run)
            row["pairs"].append(pair)
        both = [p for p in row["pairs"] if "vec4_us" in p and "vec8_us" in p]
        ratios = sorted(p["vec4_us"] / p["vec8_us"] for p in both)
        row["median_gain"] = ratios[len(ratios) // 2] if ratios else None
        row["best_vec4_us"] = min((p["vec4_us"] for p in both), default=None)
        row["best_vec8_us"] = min((p["vec8_us"] for p in both), default=None)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "pairs"}), flush=True)
    write_results(rows, "spmm_vec_probe.json")
    print(f"{'n':>5} {'zeros':>6} {'cuBLAS':>7} {'pick':>7} {'best v4':>8} {'best v8':>8} {'median v4/v8':>13}")
    for r in rows:
        nan = float("nan")
        print(f"{r['n']:>5} {r['sparsity']:>6} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} "
              f"{r['best_vec4_us'] or nan:>8.1f} {r['best_vec8_us'] or nan:>8.1f} {r['median_gain'] or nan:>13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
