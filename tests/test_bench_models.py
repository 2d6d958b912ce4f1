"""scripts/bench_models.py in its smoke mode: tiny models through the interpreter, in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def test_smoke_run_writes_its_files_and_checks_outputs(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_models.py"), "--smoke", "--models", "llama-mlp",
         "--sparsities", "0.9,2:4", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = pd.read_csv(tmp_path / "results.csv")
    assert len(df) == 4 and df["ok"].all() and (df["pretune_failed"] == 0).all()
    assert df["stuning_us"].notna().all() and df["cusparse_us"].notna().all() and df["fallback_us"].notna().all()
    assert df["fallback_err"].notna().all()  # the dense-fallback copy computed the same outputs (ok above)
    assert (tmp_path / "summary.md").is_file() and (tmp_path / "speedup.png").is_file()
    assert "pretune total" in proc.stdout.strip().splitlines()[-1]
