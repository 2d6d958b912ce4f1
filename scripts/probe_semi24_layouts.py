"""Why the layers' 2:4 path (X^T in, Y^T out) runs 8-33% behind X in, Y out at N >= 2048.

BENCHMARKS.md 9j found the sparse warpgroup-MMA kernel slower on a layer's operands than on
row-major ones, with the same config (768 x 768 at N = 2048: 8.9 against 7.4 us). A layer hands
two changes at once: X^T (the kernel reads K-major tiles of X) and Y^T (``out`` a transposed view,
which the epilogue stores with N contiguous per thread: 2-byte stores into an M-contiguous Y). This
times the four combinations of X / X^T and Y / Y^T with each of the two stored configs (the bt=0
entry's and the bt=1 entry's), so the two effects come apart. Every combination is checked against
float64 first. Timings are CUDA-graph replays behind an L2 flush (``probe_harness.probe_time_us``).

    python3 scripts/probe_semi24_layouts.py          # a table last; $OUT/semi24_layouts.json
    PROBE_SHAPES=768x768 PROBE_NS=8192 python3 scripts/probe_semi24_layouts.py

Needs an sm_90 GPU (the warpgroup kernel is Gluon, which has no interpreter).
"""

from __future__ import annotations

import functools
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_harness import checked_time_us, probe_time_us, random_24, write_results  # noqa: E402

SHAPES = [tuple(int(v) for v in s.split("x"))
          for s in os.environ.get("PROBE_SHAPES", "768x768,3072x768,768x3072,4096x11008").split(",")]
NS = [int(v) for v in os.environ.get("PROBE_NS", "2048,8192").split(",")]
COMBOS = list(itertools.product(("X", "X^T"), ("Y", "Y^T")))  # (X in, Y out) layouts


def stored_config(w, n: int, transposed: bool):
    """The config the database holds for this problem in one layout (its lookup, as a call makes)."""
    from stuning.ops.inputs import tuned_config
    from stuning.tuning.features import semi24_features

    m, k = w.shape
    return tuned_config(w, "semi24", n, w.dtype,
                        functools.partial(semi24_features, m, k, n, w.dtype, b_transposed=transposed),
                        transposed=transposed)


def main() -> int:
    import stuning

    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for (m, k), n in itertools.product(SHAPES, NS):
        dense = random_24(m, k, gen).half().cuda()
        x_rows = torch.randn(k, n, generator=gen).half().cuda()
        x_t = x_rows.t().contiguous().t()  # the same values as a layer's X^T view
        ref = dense.double() @ x_rows.double()
        w = stuning.Semi24Matrix.from_dense(dense)
        row = {"m": m, "k": k, "n": n,
               "cublas_us": probe_time_us(functools.partial(torch.matmul, dense, x_rows), False), "times": {}}
        for source, transposed in (("bt0", False), ("bt1", True)):
            cfg = stored_config(w, n, transposed)
            row[f"{source}_config"] = cfg.as_dict()
            for x_name, y_name in COMBOS:
                x = x_rows if x_name == "X" else x_t
                out = (torch.empty(m, n, dtype=dense.dtype, device="cuda") if y_name == "Y"
                       else torch.empty(n, m, dtype=dense.dtype, device="cuda").t())
                run = functools.partial(stuning.semi24_mm, w, x, config=cfg, out=out)
                label = f"{source} cfg, {x_name} in, {y_name} out"
                row["times"][label] = checked_time_us(run, ref, label)
        rows.append(row)
        print(row, flush=True)
    write_results(rows, "semi24_layouts.json")

    print(f"{'M x K':>11} {'N':>5} {'cfg':>4} {'cuBLAS':>8} " + " ".join(f"{x + '/' + y:>9}" for x, y in COMBOS))
    for r in rows:
        for source in ("bt0", "bt1"):
            times = [r["times"][f"{source} cfg, {x} in, {y} out"] for x, y in COMBOS]
            cells = " ".join(f"{t:>9.1f}" if isinstance(t, float) else f"{'error':>9}" for t in times)
            print(f"{r['m']:>5} x {r['k']:<5} {r['n']:>5} {source:>4} {r['cublas_us']:>8.1f} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
