"""scripts/bench_cnn.py in its smoke mode: tiny CNNs through the interpreter, in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def test_smoke_run_writes_its_files_and_checks_outputs(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_cnn.py"), "--smoke", "--sparsities", "0.9", "--batches", "1",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = pd.read_csv(tmp_path / "results.csv")
    assert list(df["model"]) == ["resnet50", "mobilenet-v1"] and df["ok"].all()
    assert df["stuning_us"].notna().all() and df["dense_us"].notna().all() and (df["stuning_err"] > 0).all()
    assert df["fallback_us"].notna().all() and (df["fallback_err"] > 0).all()  # the dense_fallback copy ran too
    assert list(df["layers_dense"]) == [0, 4]  # the tiny MobileNet's depthwise convolutions
    layers = pd.read_csv(tmp_path / "layers.csv")
    # Every Conv2d and Linear position, each timed alone: 9 + 1 in the ResNet, 5 + 4 + 1 in the MobileNet.
    assert layers.groupby("model", sort=False).size().to_dict() == {"resnet50": 10, "mobilenet-v1": 10}
    assert layers["stuning_us"].notna().all()
    summary = (tmp_path / "summary.md").read_text()
    assert "The 10 slowest stuning layers at batch 1" in summary and (tmp_path / "speedup.png").is_file()
