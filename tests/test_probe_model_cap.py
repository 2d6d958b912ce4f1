"""scripts/probe_model_cap.py in its smoke mode: one entry rebuilt at toy sizes, every pick checked
against the reference through the interpreter, in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_smoke_run_checks_each_variants_pick(tmp_path, dtype):
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "probe_model_cap.py"), "--smoke", "1", "--dtype", dtype,
         "--variants", "uncapped,cap0.3", "--out", str(tmp_path),
         "--compare", str(REPO / "tuning_db" / "nvidia-h200.json")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = pd.read_csv(tmp_path / "variants.csv")
    assert sorted(df["label"]) == ["cap0.3", "compare", "own", "uncapped"]
    assert df["key"].str.startswith(f"spmm|{dtype}|").all()
    assert df["us"].notna().all()  # NaN marks a pick that failed its check against the reference


def test_picks_written_on_one_checkout_are_timed_on_another(tmp_path):
    """--write-picks ranks every entry's space with no GPU; --picks then times those configs beside
    the library's own picks (label 'picks'), so an old checkout's cost terms can be judged."""
    picks = tmp_path / "picks.csv"
    script = str(REPO / "scripts" / "probe_model_cap.py")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    written = subprocess.run([sys.executable, script, "--write-picks", str(picks), "--smoke", "1",
                              "--db", str(REPO / "tuning_db" / "nvidia-h200.json")],
                             capture_output=True, text=True, timeout=300, env=env)
    assert written.returncode == 0, written.stderr[-2000:]
    table = pd.read_csv(picks)
    assert len(table) > 100 and table["key"].str.startswith("spmm|float16|").all()
    assert table["config"].str.contains("'kernel'").all()
    proc = subprocess.run([sys.executable, script, "--smoke", "1", "--variants", "cap0.3", "--out", str(tmp_path),
                           "--picks", str(picks)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = pd.read_csv(tmp_path / "variants.csv")
    assert sorted(df["label"]) == ["cap0.3", "own", "picks"]
    assert df["us"].notna().all()
