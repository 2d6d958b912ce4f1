"""Compare runs A (sibling entries) and B (without) of call1.sh: python3 summary.py CSV_DIR."""

import sys

import numpy as np
import pandas as pd


def geomean(s):
    return float(np.exp(np.log(s).mean()))


out = sys.argv[1] if len(sys.argv) > 1 else "."
for name in ("semi24", "spmm-fp32", "spmm-bf16-decode", "spmm-fp16-70"):
    a, b = (pd.read_csv(f"{out}/{name}-{x}.csv") for x in "AB")
    j = a.merge(b, on="name", suffixes=("_a", "_b"))
    r = j.time_us_a / j.time_us_b
    sources = {x: dict(d.config_source.value_counts()) for x, d in (("A", a), ("B", b))}
    print(f"{name}: {len(j)} rows; sources {sources}")
    print(f"  A (sibling) / B time: geomean {geomean(r):.3f}, worst {r.max():.2f}, best {r.min():.2f}")
    print(f"  x dense A {geomean(a.speedup_vs_dense):.3f} B {geomean(b.speedup_vs_dense):.3f};"
          f" wrong A {int((a.ok != True).sum())} B {int((b.ok != True).sum())}")  # noqa: E712
