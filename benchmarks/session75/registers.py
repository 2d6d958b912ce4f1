"""The cost model's register estimate for the tiled SDDMM (`sddmm_tiled.registers_per_thread`)
against the compiled count (BENCHMARKS.md 9y): `python3 benchmarks/session75/registers.py
[benchmarks/session75/sass-sddmm-tiled.jsonl]`, the file being `scripts/sass_stats.py --kernel
sddmm-tiled --json` output (configs BMxBNxBK:CHUNK:RUN:WARPS:STAGES)."""

import json
import sys
from pathlib import Path

import pandas as pd
from stuning.kernels.sddmm_tiled import TiledParams, registers_per_thread

path = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/session75/sass-sddmm-tiled.jsonl")
rows = []
for line in path.read_text().splitlines():
    r = json.loads(line)
    tiles, chunk, run, warps, stages = r["config"].split(":")
    bm, bn, bk = (int(v) for v in tiles.split("x"))
    estimate = registers_per_thread(TiledParams(bm, bn, bk, int(chunk), int(warps), int(stages), int(run)))
    rows.append({"config": r["config"], "compiled": r["registers"], "estimate": estimate, "triton": r["triton"]})
d = pd.DataFrame(rows)
d["ratio"] = d.estimate / d.compiled
versions = ", ".join(sorted(set(d.triton)))
print(f"{len(d)} configs (triton {versions}): estimate / compiled median {d.ratio.median():.2f}x, "
      f"{d.ratio.min():.2f}-{d.ratio.max():.2f}x; over by 1.25x or more: {(d.ratio >= 1.25).sum()}")
print(d.sort_values("ratio").to_string(index=False))
