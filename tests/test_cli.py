"""The stuning command end to end on small problems (model-only strategy, interpreter)."""

from __future__ import annotations

import json

import pytest
import torch

from stuning.cli.main import main

# What these tests expect of the CPU machine CI runs on: no GPU, and the interpreter's database.
CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="expects a machine without a CUDA GPU")


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _fails(capsys, argv, code: int, needle: str) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


@CPU_ONLY  # on a GPU the demo measures
def test_demo_json(db_dir, capsys):
    report = _json(capsys, ["demo", "--json"])
    assert report["ok"] and not report["measured"]
    assert {r["op"] for r in report["results"]} == {"spmm", "sddmm", "semi24"}
    assert all(r["rel_err"] <= r["tolerance"] for r in report["results"])


def test_tune_then_db_commands(db_dir, tmp_path, capsys):
    out = _json(capsys, ["tune", "--strategy", "model", "--device", "h100", "--op", "spmm,semi24",
                         "--shape", "32x64", "--n", "16", "--sparsity", "0.8", "--dtype", "fp16", "--json"])
    assert len(out["results"]) == 2 and not any(r["measured"] for r in out["results"])
    files = _json(capsys, ["db", "ls", "--json"])["files"]
    assert any(f["device"] == "NVIDIA H100 SXM" and f["entries"] == 2 for f in files)
    shown = _json(capsys, ["db", "show", "--device", "h100", "--json"])
    assert {e["op"] for e in shown["entries"].values()} == {"spmm", "semi24"}
    exported = tmp_path / "export.json"
    assert _json(capsys, ["db", "export", str(exported), "--device", "h100", "--json"])["entries"] == 2
    merged = tmp_path / "merged.json"
    assert _json(capsys, ["db", "merge", str(exported), "--out", str(merged), "--json"]) == {
        "out": str(merged), "entries": 2, "out_held": None}
    # Into an existing file, its own entries are merged too, and the report says so.
    again = _json(capsys, ["db", "merge", str(exported), "--out", str(merged), "--json"])
    assert (again["entries"], again["out_held"]) == (2, 2)
    kept = tmp_path / "kept.json"
    kept.write_bytes(merged.read_bytes())
    assert _json(capsys, ["db", "prune", str(kept), "--device", "h100", "--json"])["dropped"] == 0
    assert _json(capsys, ["db", "prune", str(kept), "--device", "h100", "--triton", "0.0", "--json"])["dropped"] == 2
    assert _json(capsys, ["db", "prune", str(merged), "--json"])["dropped"] == 2  # tuned for another device
    assert isinstance(_json(capsys, ["db", "misses", "--json"])["misses"], dict)


def test_measured_tune_reports_and_stores_the_dense_baseline(db_dir, capsys, fake_measuring):
    fake_measuring.extend([10.0, 2.0])  # configs all time at 5 us
    out = _json(capsys, ["tune", "--op", "spmm", "--shape", "32x64", "--n", "16,24", "--sparsity", "0.8",
                         "--dtype", "fp16", "--trials", "2", "--json"])
    assert [(r["dense_us"], r["speedup_vs_dense"]) for r in out["results"]] == [(10.0, 2.0), (2.0, 0.4)]
    assert main(["db", "show"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "vs dense" in shown and "2.00x" in shown and "0.40x" in shown


def test_tune_max_seconds_keeps_what_was_tuned_and_lists_the_rest(db_dir, capsys, fake_measuring):
    # The first problem always starts; with the limit spent, the others are listed, not tuned, and
    # the model is still refitted on what was.
    fake_measuring.extend([10.0])
    out = _json(capsys, ["tune", "--op", "spmm", "--shape", "32x64", "--n", "16,24,32", "--sparsity", "0.8",
                         "--trials", "2", "--max-seconds", "1e-9", "--json"])
    assert [r["problem"] for r in out["results"]] == ["spmm_32x64_n16_s80_cv0_fp16"]
    assert out["not_tuned"] == ["spmm_32x64_n24_s80_cv0_fp16", "spmm_32x64_n32_s80_cv0_fp16"]
    assert out["stopped"].startswith("stopped after") and out["model_coefficients"]
    shown = _json(capsys, ["db", "show", "--json"])["entries"]
    assert [e["features"]["n"] for e in shown.values()] == [16]


def test_tune_interrupted_keeps_finished_problems(db_dir, capsys, fake_measuring, monkeypatch):
    import stuning.tuning.driver as driver

    real = driver.tune_case
    calls = []

    def tune_then_interrupt(case, **kw):
        calls.append(case.n)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(case, **kw)

    monkeypatch.setattr(driver, "tune_case", tune_then_interrupt)
    fake_measuring.extend([10.0])
    assert main(["tune", "--op", "spmm", "--shape", "32x64", "--n", "16,24,32", "--sparsity", "0.8",
                 "--trials", "2", "--json"]) == 130
    out = json.loads(capsys.readouterr().out)
    assert [r["problem"] for r in out["results"]] == ["spmm_32x64_n16_s80_cv0_fp16"]
    assert out["not_tuned"] == ["spmm_32x64_n24_s80_cv0_fp16", "spmm_32x64_n32_s80_cv0_fp16"]
    assert out["stopped"].startswith("interrupted") and out["model_coefficients"]


def test_sddmm_grid_takes_attention_masks(db_dir, capsys):
    # The suite's attention SDDMM problems (their keys, as the bench looks them up), tuned by name.
    from stuning.suite import SDDMMCase

    out = _json(capsys, ["tune", "--strategy", "model", "--device", "h100", "--op", "sddmm", "--shape", "64x64",
                         "--n", "16", "--sparsity", "0.9", "--mask", "wgrad,attention", "--json"])
    names = [r["problem"] for r in out["results"]]
    assert names == [SDDMMCase(64, 64, 16, 0.9, "fp16", f).name for f in ("wgrad", "attention")]


def test_sddmm_grid_takes_operand_layouts(db_dir, capsys):
    # A weight gradient's layout (K strided) is its own problem, keyed apart.
    from stuning.suite import SDDMMCase

    out = _json(capsys, ["tune", "--strategy", "model", "--device", "h100", "--op", "sddmm", "--shape", "64x48",
                         "--n", "32", "--sparsity", "0.9", "--layout", "k-contiguous,k-strided", "--json"])
    assert [r["problem"] for r in out["results"]] == [SDDMMCase(64, 48, 32, 0.9, "fp16", k_strided=s).name
                                                      for s in (False, True)]
    assert ["at=1" in r["key"] for r in out["results"]] == [False, True]


@pytest.mark.parametrize(
    "argv,code,needle",
    [
        (["tune", "--strategy", "model", "--shape", "12x"], 2, "bad shape"),
        (["tune", "--strategy", "model", "--op", "spgemm"], 2, "unknown op"),
        (["tune", "--strategy", "model", "--dtype", "fp8"], 2, "unknown dtype"),
        (["tune", "--strategy", "model", "--sparsity", "100"], 2, "not a fraction"),
        (["tune", "--strategy", "model", "--op", "sddmm", "--mask", "causal"], 2, "unknown SDDMM mask"),
        (["tune", "--strategy", "model", "--op", "sddmm", "--layout", "row-major"], 2, "unknown SDDMM layout"),
        (["tune", "--strategy", "model", "--op", "sddmm", "--shape", "64x32", "--mask", "attention"], 2,
         "attention mask is L x L"),
        pytest.param(["tune", "--shape", "64x64"], 3, "needs a CUDA GPU", marks=CPU_ONLY),
        (["tune", "--untried", "--strategy", "model"], 2, "--untried re-tunes this GPU's entries"),
        (["tune", "--strategy", "model", "--max-seconds", "0"], 2, "--max-seconds must be positive"),
        (["db", "merge", "/nonexistent/a.json", "--out", "/tmp/x.json"], 2, "no such database file"),
        pytest.param(["calibrate"], 3, "no CUDA device", marks=CPU_ONLY),
    ],
)
def test_bad_input_one_line_error(db_dir, capsys, argv, code, needle):
    _fails(capsys, argv, code, needle)


@CPU_ONLY  # a GPU machine reads its own device's file, not the interpreter's
def test_corrupt_database_named(db_dir, capsys):
    db_dir.mkdir(parents=True, exist_ok=True)
    (db_dir / "triton-interpreter-cpu.json").write_text('{"schema_version": 99}')
    _fails(capsys, ["db", "show"], 2, "triton-interpreter-cpu.json")
