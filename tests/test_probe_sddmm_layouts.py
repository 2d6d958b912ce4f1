"""scripts/probe_sddmm_layouts.py in its smoke mode (a toy mask through the interpreter, each output
checked against float64 inside the script), in a fresh process: all of it, and the subsets
PROBE_LAYOUTS / PROBE_KERNELS choose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _probe(tmp_path, **env):
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "probe_sddmm_layouts.py")], capture_output=True, text=True,
        timeout=300, env={**os.environ, "TRITON_INTERPRET": "1", "PROBE_SMOKE": "1", "OUT": str(tmp_path), **env},
    )


def test_smoke_run_times_every_kernel_on_every_layout(tmp_path):
    proc = _probe(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((tmp_path / "sddmm_layouts.json").read_text())["rows"]
    layouts, kernels = ("A k, B k", "A m, B k", "A k, B n", "A m, B n"), ("gather", "tiled", "dense", "auto")
    assert {(r["layout"], r["kernel"]) for r in rows} == {(lay, k) for lay in layouts for k in kernels}
    # A weight gradient's layout: A a transposed view, B row-major.
    wgrad = next(r for r in rows if r["layout"] == "A m, B n")
    assert wgrad["a_strides"] == [1, 32] and wgrad["b_strides"] == [48, 1]


def test_subsets_and_a_bad_name(tmp_path):
    proc = _probe(tmp_path, PROBE_LAYOUTS="A m, B n", PROBE_KERNELS="tiled|auto")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((tmp_path / "sddmm_layouts.json").read_text())["rows"]
    assert [(r["layout"], r["kernel"]) for r in rows] == [("A m, B n", "tiled"), ("A m, B n", "auto")]
    proc = _probe(tmp_path, PROBE_KERNELS="tiled|tiles")
    assert proc.returncode != 0 and "PROBE_KERNELS: ['tiles'] is not among" in proc.stderr
