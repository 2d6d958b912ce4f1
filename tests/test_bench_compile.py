"""scripts/bench_compile.py in its smoke mode (tiny models, the Llama MLP as layers and as functional
ops, through the interpreter, compiled with aot_eager, every path's output checked against the dense
fp32 model inside the script), in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_smoke_run_times_and_checks_every_path(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_compile.py"), "--smoke", "--models", "llama-mlp,llama-mlp-ops",
         "--patterns", "0.9", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((tmp_path / "compile.json").read_text())["rows"]
    assert [(r["model"], r["pattern"], r["tokens"]) for r in rows] == [("llama-mlp", "0.9", 4),
                                                                       ("llama-mlp-ops", "0.9", 4)]
    for row in rows:
        paths = ["dense", "dense-compiled", "stuning", "stuning-compiled"]  # no CUDA graph on a CPU
        # The functional block also runs with its ops as graph breaks.
        paths += ["stuning-breaks"] if row["model"] == "llama-mlp-ops" else []
        for path in paths:
            assert row[f"{path}_ok"], (row["model"], path, row[f"{path}_err"])
            assert row[f"{path}_step_us"] > 0 and row[f"{path}_pipelined_us"] > 0
    assert (tmp_path / "compile.csv").read_text().startswith("model,pattern,tokens")
    assert (tmp_path / "compile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # --replot rebuilds the plot and the table from the JSON, timing nothing.
    (tmp_path / "compile.png").unlink()
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_compile.py"), "--replot",
                           str(tmp_path / "compile.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "compile.png").exists() and "llama-mlp  0.9" in proc.stdout
