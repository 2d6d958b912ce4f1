"""scripts/probe_spmm_registers.py without a GPU: which problems it takes from a probe's variants.csv,
and its refusal to run on a machine with no CUDA device (it compiles and times)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))  # it imports bench_lookup beside it
    spec = importlib.util.spec_from_file_location("probe_spmm_registers", REPO / "scripts" / "probe_spmm_registers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_worst_picks_come_first(script):
    rows = [(key, label, us) for key, own, pick in (("a", 10.0, 12.0), ("b", 5.0, 30.0), ("c", 8.0, 16.0))
            for label, us in (("own", own), ("cap0.3", pick), ("compare", own))]
    df = pd.DataFrame(rows, columns=["key", "label", "us"]).sample(frac=1.0, random_state=0)
    assert script.worst_keys(df, 2) == ["b", "c"]  # 6x, then 2x; 'a' (1.2x) is third
    assert script.worst_keys(df, 5) == ["b", "c", "a"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine with no GPU")
def test_no_gpu_is_said_and_nothing_written(script, tmp_path, capsys):
    (tmp_path / "variants.csv").write_text("key,label,us\n")
    assert script.main([str(tmp_path / "variants.csv"), "--out", str(tmp_path / "out")]) == 0
    assert "no CUDA device" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()
