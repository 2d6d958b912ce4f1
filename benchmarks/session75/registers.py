"""The cost model's register estimate for the tiled SDDMM (`sddmm_tiled.registers_per_thread`)
against the compiled count (BENCHMARKS.md 9y).

    python3 benchmarks/session75/registers.py [SASS.jsonl]
        SASS.jsonl: `scripts/sass_stats.py --kernel sddmm-tiled --json` output (default
        benchmarks/session75/sass-sddmm-tiled.jsonl)
    python3 benchmarks/session75/registers.py --refit SCALE DEVICE DB.json
        `stuning db refit` of a copy of DB.json, the cost model's estimate divided by SCALE
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd
from stuning.kernels.sddmm_tiled import registers_per_thread

import stuning.tuning.cost_model.sddmm as sddmm_model
from stuning.cli.main import main as stuning_main

# sass_stats.py's parser of config labels (importing it compiles nothing).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import sass_stats  # noqa: E402


def compare(path: Path) -> None:
    rows = []
    parse = sass_stats.KERNELS["sddmm-tiled"][1]  # a config label as sass_stats.py reads it
    for line in path.read_text().splitlines():
        r = json.loads(line)
        estimate = registers_per_thread(parse(r["config"]).tiled_params())
        rows.append({"config": r["config"], "compiled": r["registers"], "estimate": estimate, "triton": r["triton"]})
    d = pd.DataFrame(rows)
    d["ratio"] = d.estimate / d.compiled
    versions = ", ".join(sorted(set(d.triton)))
    print(f"{len(d)} configs (triton {versions}): estimate / compiled median {d.ratio.median():.2f}x, "
          f"{d.ratio.min():.2f}-{d.ratio.max():.2f}x; over by 1.25x or more: {(d.ratio >= 1.25).sum()}")
    print(d.sort_values("ratio").to_string(index=False))


def refit(scale: float, device: str, db: Path) -> None:
    # Only the cost model's use is scaled: the config space keeps its own pruning.
    sddmm_model.registers_per_thread = lambda p: max(16, int(registers_per_thread(p) / scale))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / db.name
        shutil.copy(db, copy)
        stuning_main(["db", "refit", "--device", device, str(copy)])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--refit"]:
        refit(float(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
    else:
        compare(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/session75/sass-sddmm-tiled.jsonl"))
