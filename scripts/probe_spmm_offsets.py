"""Probe 32-bit offsets into B in the gather SpMM kernels, against the 64-bit ones they replace.

Each gathered piece of a row of B needs an address. With the column index widened to 64 bits, sm_90a
SASS spent a sign extension, three multiplies, an add and a two-instruction LEA on it; with 32-bit
offsets (``OFFSETS_32``, wherever B spans under 2**31 elements) one multiply and one widening add.
The loop's instructions per multiply-add fell 10-22% (``scripts/sass_stats.py --offsets-64``).

For each problem (``PROBE_SHAPE``, 4096x4096 by default; ``PROBE_CASES`` as dtype:N:sparsity) it samples configs of both
kernels' spaces, plus the library's pick, and times each both ways (CUDA graphs, L2 flushed),
checked against a float64 reference first.

    python3 scripts/probe_spmm_offsets.py       # $OUT/spmm_offsets_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_offsets.py   # tiny, CPU
"""

from __future__ import annotations

import functools
import json
import os
import random

import torch
from probe_harness import checked_time_us, probe_time_us, spmm_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
CASES = os.environ.get("PROBE_CASES", "fp32:128:0.8,fp32:2048:0.8,fp16:16:0.95,fp16:128:0.95,fp16:2048:0.98")
M, K = (64, 64) if SMOKE else tuple(int(v) for v in os.environ.get("PROBE_SHAPE", "4096x4096").split("x"))
SAMPLE = 2 if SMOKE else int(os.environ.get("PROBE_CONFIGS", "16"))
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


_SHIPPED = {}


def offsets(bits: int) -> None:
    """Make the launchers compile B's addressing in ``bits`` (the kernels' OFFSETS_32)."""
    from stuning.kernels import spmm, spmm_sell

    shipped = _SHIPPED.setdefault("fits", spmm.offsets_fit_32_bits)
    fits = shipped if bits == 32 else (lambda b: False)
    for module in (spmm, spmm_sell):
        module.offsets_fit_32_bits = fits


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
        row = {"dtype": dname, "n": n, "sparsity": sparsity, "pick": p.pick.as_dict(),
               "dense_us": probe_time_us(functools.partial(torch.matmul, p.w, p.x), SMOKE), "pairs": []}
        for cfg in [p.pick, *random.Random(n).sample(space, min(SAMPLE, len(space)))]:
            pair = {"config": cfg.as_dict()}
            for bits in (64, 32):
                offsets(bits)
                run = functools.partial(stuning.spmm, p.a, p.x, config=cfg)
                pair[f"us{bits}"] = checked_time_us(run, p.ref, f"{case} {bits}-bit {cfg}", tol=tol, smoke=SMOKE)
            row["pairs"].append(pair)
            print(json.dumps(pair), flush=True)
        both = [q for q in row["pairs"] if all(isinstance(q[f"us{b}"], float) and q[f"us{b}"] > 0 for b in (32, 64))]
        gains = sorted(q["us64"] / q["us32"] for q in both)
        row["median_gain"] = gains[len(gains) // 2] if gains else None
        row["pick_us64"], row["pick_us32"] = row["pairs"][0]["us64"], row["pairs"][0]["us32"]
        row["best_us64"] = min((q["us64"] for q in both), default=None)
        row["best_us32"] = min((q["us32"] for q in both), default=None)
        results.append(row)
        write_results(results, "spmm_offsets_probe.json")  # after every case: a timeout keeps the rest
    print(f"{'case':>16} {'dense':>8} {'pick 64':>8} {'pick 32':>8} {'best 64':>8} {'best 32':>8} {'median 64/32':>13}")
    nan = float("nan")
    for r in results:
        vals = [r[k] if isinstance(r[k], float) else nan for k in ("pick_us64", "pick_us32", "best_us64", "best_us32")]
        print(f"{r['dtype']}:{r['n']}:{r['sparsity']:>5} {r['dense_us']:>8.1f} " + " ".join(f"{v:>8.1f}" for v in vals)
              + f" {r['median_gain'] or nan:>13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
