"""The dense product a sparse layer replaces, timed three ways: ``W @ X`` with X contiguous (K x N),
``W @ X`` with X a transposed view of an N x K tensor (how pretune timed the dense baseline before
BENCHMARKS.md 8d), and ``F.linear(X^T, W)`` (what ``dense_fallback`` runs). If cuBLAS runs the
layouts at different speeds, a baseline timed in one misjudges the other.

    PROBE_SHAPES=11008x4096,4096x11008 PROBE_NS=2048,8192 python3 scripts/probe_dense_baselines.py

Writes ``$OUT/dense_baselines.json``; prints a table last (us, bench_us: L2 flushed, graphs when short).
"""

from __future__ import annotations

import json
import os

import torch
import torch.nn.functional as F

from stuning.tuning.timing import bench_us

OUT = os.environ.get("OUT", ".")
SHAPES = os.environ.get("PROBE_SHAPES", "11008x4096,4096x11008,768x768,3072x768,768x3072")
NS = os.environ.get("PROBE_NS", "16,128,2048,8192")


def main() -> None:
    rows = []
    for shape in SHAPES.split(","):
        m, k = (int(v) for v in shape.split("x"))
        w = torch.randn(m, k, device="cuda", dtype=torch.float16)
        for n in (int(v) for v in NS.split(",")):
            x_rows = torch.randn(n, k, device="cuda", dtype=torch.float16)  # as a layer gets its input
            x_cols = x_rows.t().contiguous()
            runs = {
                "w@x": lambda w=w, x=x_cols: w @ x,
                "w@x_view": lambda w=w, x=x_rows: w @ x.t(),
                "linear": lambda w=w, x=x_rows: F.linear(x, w),
            }
            times = {name: bench_us(run)[0] for name, run in runs.items()}
            rows.append({"m": m, "k": k, "n": n, **times})
            print(f"{m}x{k} N={n}: " + "  ".join(f"{a} {t:.1f}" for a, t in times.items()), flush=True)
    with open(os.path.join(OUT, "dense_baselines.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    print("\nshape          N      w@x   w@x_view   linear   view/linear")
    for r in rows:
        print(f"{r['m']}x{r['k']:<8} {r['n']:<6} {r['w@x']:8.1f} {r['w@x_view']:9.1f} {r['linear']:8.1f} "
              f"{r['w@x_view'] / r['linear']:9.2f}")


if __name__ == "__main__":
    main()
