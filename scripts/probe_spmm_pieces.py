"""Probe N tiles cut into pieces (``SpMMConfig.pieces``) in the gather SpMM kernels.

A gathered row of B costs each thread an index, a value, an address and a mask besides its loads
and multiply-adds. With the N tile in P pieces on the axis Triton's layouts fill with threads last,
each thread holds P vectors of every gathered row and pays that overhead once for all of them: in
sm_90a SASS (fp32, 4x8 tiles) the loop's instructions per multiply-add fell from 4.7 to 3.6 (P = 2)
and 3.1 (P = 4) in the CSR kernel, from 3.1 to 2.5 and 2.3 in sliced ELL
(``scripts/sass_stats.py --kernel spmm --dtype fp32 --configs 4x8x256:4:4:1:P2``).

For each problem (``PROBE_SHAPE``, 4096x4096 by default; ``PROBE_CASES`` as dtype:N:sparsity) it
samples ``PROBE_CONFIGS`` one-piece configs of both kernels' spaces, plus the library's pick, and
times each with its pieced siblings: the same tile in P pieces ("split") and a tile P times as wide
in P pieces ("widen"), P = 2 and 4 where the space has them. Every config is checked against a
float64 reference first (CUDA graphs, L2 flushed).

    python3 scripts/probe_spmm_pieces.py       # $OUT/spmm_pieces_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_pieces.py   # tiny, CPU
"""

from __future__ import annotations

import functools
import json
import os
import random
from dataclasses import replace

import torch
from probe_harness import checked_time_us, probe_time_us, spmm_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
CASES = os.environ.get("PROBE_CASES", "fp32:16:0.8,fp32:128:0.8,fp32:2048:0.8,fp16:16:0.95,fp16:128:0.95,"
                                      "fp16:2048:0.98")
M, K = (64, 64) if SMOKE else tuple(int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
SAMPLE = 1 if SMOKE else int(os.environ.get("PROBE_CONFIGS", "8"))
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def siblings(cfg, space: set) -> dict:
    """The pieced configs of the space that share ``cfg``'s pieces' layout or its whole tile."""
    out = {}
    for p in (2, 4):
        for name, bn in (("split", cfg.block_n), ("widen", cfg.block_n * p)):
            sib = replace(cfg, block_n=bn, pieces=p)
            if sib in space:
                out[f"{name}{p}"] = sib
    return out


def main() -> int:
    from stuning.kernels import spmm as csr_kernel
    from stuning.kernels import spmm_sell

    import stuning

    device = "cpu" if SMOKE else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    results = []
    for case in CASES.split(","):
        dname, n, sparsity = case.split(":")
        dtype, n, sparsity = DTYPES[dname], (16 if SMOKE else int(n)), float(sparsity)
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        p = next(spmm_problems(M, K, [n], [sparsity], device, dtype=dtype))
        problem = csr_kernel.SpMMProblem(M, K, n, p.a.nnz, dtype, pad_to=4)
        space = csr_kernel.config_space(problem) + spmm_sell.config_space(problem)
        whole = set(space)
        bases = [c for c in space if c.pieces == 1]
        row = {"dtype": dname, "n": n, "sparsity": sparsity, "pick": p.pick.as_dict(),
               "dense_us": probe_time_us(functools.partial(torch.matmul, p.w, p.x), SMOKE), "groups": []}
        picks = [p.pick] if p.pick.pieces == 1 else []
        for base in picks + random.Random(n).sample(bases, min(SAMPLE, len(bases))):
            group = {"config": base.as_dict()}
            for name, cfg in {"one": base, **siblings(base, whole)}.items():
                run = functools.partial(stuning.spmm, p.a, p.x, config=cfg)
                group[name] = checked_time_us(run, p.ref, f"{case} {name} {cfg}", tol=tol, smoke=SMOKE)
            row["groups"].append(group)
            print(json.dumps(group), flush=True)
        timed = {}
        for g in row["groups"]:
            for name, us in g.items():
                if name != "config" and isinstance(us, float) and us > 0:
                    timed.setdefault(name, []).append((us, g["one"] if isinstance(g["one"], float) else None))
        row["best"] = {name: min(us for us, _ in v) for name, v in timed.items()}
        row["median_gain"] = {}
        for name, v in timed.items():
            gains = sorted(one / us for us, one in v if one)
            row["median_gain"][name] = gains[len(gains) // 2] if gains else None
        results.append(row)
        write_results(results, "spmm_pieces_probe.json")  # after every case: a timeout keeps the rest
    names = ("one", "split2", "split4", "widen2", "widen4")
    print(f"{'case':>16} {'dense':>8} " + " ".join(f"{n:>8}" for n in names) + "  (best us; median gain over one)")
    nan = float("nan")
    for r in results:
        print(f"{r['dtype']}:{r['n']}:{r['sparsity']:>5} {r['dense_us']:>8.1f} "
              + " ".join(f"{r['best'].get(n, nan):>8.1f}" for n in names)
              + "  " + " ".join(f"{(r['median_gain'].get(n) or nan):.2f}" for n in names[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
