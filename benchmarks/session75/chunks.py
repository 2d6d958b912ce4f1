"""How many chunks the tiled SDDMM's pick walks a tile, per attention entry of a tuning database
(BENCHMARKS.md 9y): `python3 benchmarks/session75/chunks.py [tuning_db/nvidia-h100-80gb-hbm3.json]`.

Each entry's tiles are counted on a mask drawn as the suite's are (`stuning.matrices.random_sparse`,
seed 0): the mean tile's nonzeros against CHUNK, and the chunks its widest tile takes. Beside each
entry: its recorded top-k times of the same tile, warps and run length at other CHUNKs, which is
what one chunk a tile more or less (a shared-memory store and a load of entries) costs there."""

import functools
import math
import sys

import torch

from stuning.db.storage import load_document, load_entries
from stuning.matrices import random_sparse
from stuning.suite import ATTENTION_KS, ATTENTION_LS


@functools.cache
def mask(L: int, sparsity: float) -> torch.Tensor:
    return random_sparse(L, L, sparsity, generator=torch.Generator().manual_seed(0)) != 0


def tile_counts(L: int, sparsity: float, bm: int, bn: int) -> torch.Tensor:
    return mask(L, sparsity).reshape(L // bm, bm, L // bn, bn).sum(dim=(1, 3))


path = sys.argv[1] if len(sys.argv) > 1 else "tuning_db/nvidia-h100-80gb-hbm3.json"
entries = load_entries(load_document(path))
print("dtype L K sparsity | tile chunk warps run | chunks a tile (mean, widest) | x dense |"
      " same tile at other CHUNKs (CHUNK, us)")
for _, e in sorted(entries.items()):
    f, c = e.features, e.config
    L = f["m"]
    attention = f["n"] == L and L in ATTENTION_LS and f["k"] in ATTENTION_KS
    if e.op != "sddmm" or not attention or c["kernel"] != "tiled":
        continue  # the attention suite's masks on the tiled kernel only
    sparsity = round(1 - f["density"], 2)
    counts = tile_counts(L, sparsity, c["block_m"], c["block_n"]).double()
    same = ("block_m", "block_n", "num_warps", "tiles_per_program")
    others = sorted((t.config["chunk"], round(t.time_us, 2)) for t in e.top_k
                    if all(t.config[k] == c[k] for k in same) and t.config["chunk"] != c["chunk"])
    print(f"{e.dtype} {L} {f['k']} {sparsity:.0%} | {c['block_m']}x{c['block_n']} {c['chunk']} "
          f"{c['num_warps']} {c['tiles_per_program']} | {counts.mean() / c['chunk']:.2f}, "
          f"{math.ceil(counts.max() / c['chunk'])} | {e.speedup_vs_dense:.2f}x "
          f"({e.best.time_us:.2f} us) | {others or '-'}")
