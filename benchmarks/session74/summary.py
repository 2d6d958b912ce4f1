"""Session 74's 2:4 tables against 9r's (the H200's entries on the H100): `python3 benchmarks/session74/summary.py`."""

from pathlib import Path

import pandas as pd

from stuning.bench.report import geomean as gm

HERE = Path(__file__).parent
RUNS = {
    "9r (H200 entries)": HERE.parent / "h100-sibling-lookup/call1-A/semi24-A.csv",
    "call 1 (fp16 tuned)": HERE / "h100/call1/semi24.csv",
    "call 3 (bf16 tuned too)": HERE / "h100/call3/semi24-2.csv",
}
LLAMA = {(4096, 4096), (11008, 4096), (4096, 11008)}


def cells(d):
    d = d.assign(llama=[(m, k) in LLAMA for m, k in zip(d.m, d.k, strict=True)], decode=d.n <= 128)
    for (llama, decode), g in d.groupby(["llama", "decode"], sort=False):
        yield ("Llama-7B" if llama else "BERT", "N<=128" if decode else "N=2048", g)


runs = {name: pd.read_csv(path) for name, path in RUNS.items()}
for name, d in runs.items():
    print(f"== {name}: {len(d)} rows, {int((~d.ok).sum())} wrong, sources {d.config_source.value_counts().to_dict()}")
    for shapes, ns, g in cells(d):
        print(f"  {shapes:8} {ns:7} dense {gm(g.speedup_vs_dense):.2f}x ({g.speedup_vs_dense.min():.2f}-"
              f"{g.speedup_vs_dense.max():.2f})  cslt {gm(g.speedup_vs_cslt):.2f}x ({g.speedup_vs_cslt.min():.2f}-"
              f"{g.speedup_vs_cslt.max():.2f})  torch eager {g.speedup_vs_torch24_conv.min():.1f}-"
              f"{g.speedup_vs_torch24_conv.max():.1f}x")
base = runs["9r (H200 entries)"].set_index("name").time_us
for name in list(RUNS)[1:]:
    t = runs[name].set_index("name").time_us
    r = (t / base).dropna()
    by_n = {n: gm(r[[f"_n{n}_" in i for i in r.index]]) for n in (16, 128, 2048)}
    print(f"{name} time / 9r's: {gm(r):.3f}x (min {r.min():.2f}, max {r.max():.2f}); by N {by_n}")
    for dt in ("fp16", "bf16"):
        rr = r[[i.endswith(dt) for i in r.index]]
        print(f"   {dt}: {gm(rr):.3f}x")
