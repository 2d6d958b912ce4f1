"""How many chunks the tiled SDDMM's pick walks a tile, per attention entry of a tuning database
(BENCHMARKS.md 9y): `python3 benchmarks/session75/chunks.py [tuning_db/nvidia-h100-80gb-hbm3.json]`.

A tile of BM x BN at density d holds Binomial(BM * BN, d) nonzeros, padded to whole chunks. The
widest tile of a mask is taken as mean + 4.5 standard deviations (about the largest of 4,096 tiles).
Beside each entry: its recorded top-k times of the same tile, warps and run length at other CHUNKs,
which is what one chunk a tile (one shared-memory store, no second load of entries) costs there."""

import json
import math
import sys
from pathlib import Path

from stuning.suite import ATTENTION_KS, ATTENTION_LS

path = sys.argv[1] if len(sys.argv) > 1 else "tuning_db/nvidia-h100-80gb-hbm3.json"
entries = json.loads(Path(path).read_text())["entries"]
print("dtype L K sparsity | tile chunk warps run | chunks a tile (mean, widest) | x dense |"
      " same tile at other CHUNKs (CHUNK, us)")
for _, e in sorted(entries.items()):
    f, best = e["features"], e["best"]
    c = best["config"]
    attention = f["m"] == f["n"] and f["m"] in ATTENTION_LS and f["k"] in ATTENTION_KS
    if e["op"] != "sddmm" or not attention or c["kernel"] != "tiled":
        continue  # the attention suite's masks on the tiled kernel only
    cells = c["block_m"] * c["block_n"]
    mean = cells * f["density"]
    widest = mean + 4.5 * math.sqrt(mean * (1 - f["density"]))
    same = ("block_m", "block_n", "num_warps", "tiles_per_program")
    others = sorted((t["config"]["chunk"], round(t["time_us"], 2)) for t in e.get("top_k", [])
                    if all(t["config"][k] == c[k] for k in same) and t["config"]["chunk"] != c["chunk"])
    print(f"{e['dtype']} {f['m']} {f['k']} {1 - f['density']:.0%} | {c['block_m']}x{c['block_n']} {c['chunk']} "
          f"{c['num_warps']} {c['tiles_per_program']} | {mean / c['chunk']:.2f}, {math.ceil(widest / c['chunk'])} | "
          f"{e['dense_us'] / best['time_us']:.2f}x ({best['time_us']:.2f} us) | {others or '-'}")
