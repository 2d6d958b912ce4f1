"""``stuning bench`` and ``stuning sweep`` end to end on tiny problems (interpreter without a GPU):
JSON that parses, the files they write, --top, and one-line errors with meaningful exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from stuning.bench.report import COLUMNS
from stuning.cli.main import main

REPO = Path(__file__).resolve().parents[1]
SWEEP_GRID = ["--shape", "32x64", "--n", "16", "--sparsity", "0.8", "--dtype", "fp16"]



def _json(capsys, argv, code: int = 0) -> dict:
    assert main(argv) == code
    return json.loads(capsys.readouterr().out)


def _fails(capsys, argv, code: int, needle: str) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_bench_json_and_files(db_dir, tmp_path, capsys):
    out = tmp_path / "bench"
    report = _json(capsys, ["bench", "--smoke", "--ops", "spmm,semi24", "--dtypes", "fp16", "--out", str(out),
                            "--json"])
    rows = report["rows"]
    assert {r["op"] for r in rows} == {"spmm", "semi24"} and report["wrong_or_failed"] == 0
    assert all(r["ok"] and r["time_us"] > 0 and r["config_source"] == "heuristic" for r in rows)
    if "interpreter" in report["timing"]:  # no GPU: wall clock, and the CUDA-only baselines say so
        assert all(r["timing"] == "perf_counter" for r in rows)
        assert all("unavailable" in r["cusparse_note"] for r in rows if r["op"] == "spmm")
        assert all("unavailable" in r["cslt_note"] for r in rows if r["op"] == "semi24")
    assert {g["op"] for g in report["geomeans"]} == {"spmm", "semi24"}
    for name in ("results.csv", "summary.md", "speedup.png", "speedup_spmm.png", "speedup_semi24.png"):
        assert (out / name).is_file(), name
    csv = pd.read_csv(out / "results.csv")
    assert len(csv) == len(rows)
    assert [c for c in csv.columns if c in COLUMNS] == [c for c in COLUMNS if c in csv.columns]


def test_bench_records_where_auto_configs_come_from(db_dir, tmp_path, capsys):
    report = _json(capsys, ["bench", "--ops", "sddmm", "--dtypes", "fp32", "--limit", "1", "--configs", "auto",
                            "--out", str(tmp_path / "b"), "--json"])
    (row,) = report["rows"]
    assert row["ok"] and row["config_source"].startswith("auto: ")


def test_bench_script_wrapper_still_runs(tmp_path):
    """BENCHMARKS.md's command line: scripts/bench_baselines.py with the old flags, in a fresh process."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_baselines.py"), "--smoke", "--ops", "semi24", "--dtypes",
         "bf16", "--order", "suite", "--out", str(tmp_path), "--strict", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["op"] for r in json.loads(proc.stdout)["rows"]] == ["semi24"]
    assert (tmp_path / "results.csv").is_file()


def test_sweep_json_csv_and_top(db_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    report = _json(capsys, ["sweep", "--op", "spmm,sddmm", *SWEEP_GRID, "--configs", "3", "--out", str(out), "--json"])
    rows = report["rows"]
    assert {p["name"] for p in report["problems"]} == {r["name"] for r in rows} and len(report["problems"]) == 2
    for r in rows:
        assert r["status"] == "ok" and r["time_us"] > 0 and r["predicted_us"] > 0
    assert all(3 <= p["configs"] <= 4 for p in report["problems"])  # 3 sampled + the heuristic if not among them
    csv = pd.read_csv(out / "sweep.csv")
    assert len(csv) == len(rows) and csv.groupby(["name", "config"]).size().max() == 1
    assert {"status", "time_us", "predicted_us", "model_rank", "rank"} <= set(csv.columns)
    assert (out / "summary.md").is_file() and (out / "sweep.png").is_file()

    top = _json(capsys, ["sweep", "--op", "spmm,sddmm", *SWEEP_GRID, "--configs", "3", "--top", "2",
                         "--out", str(out), "--json"])
    assert pd.DataFrame(top["rows"]).groupby("name").size().to_dict() == {p: 2 for p in {r["name"] for r in rows}}
    kept = pd.read_csv(out / "sweep.csv")
    assert (kept["status"] == "ok").all() and kept.groupby("name")["rank"].apply(sorted).map(list).tolist() == [
        [1, 2], [1, 2]]


def test_sweep_rank_model_takes_the_model_top(db_dir, tmp_path, capsys):
    report = _json(capsys, ["sweep", "--op", "spmm", *SWEEP_GRID, "--configs", "2", "--rank", "model",
                            "--out", str(tmp_path / "s"), "--json"])
    rows = report["rows"]
    top = [r for r in rows if r["model_rank"] in (1, 2)]
    assert sorted(r["model_rank"] for r in top) == [1, 2]
    assert len(rows) - len(top) <= 1  # and the heuristic, unless it is one of the two


def test_sweep_exit_code_when_results_are_wrong(db_dir, tmp_path, capsys, monkeypatch):
    from stuning.bench import sweep as sweep_module

    real_build = sweep_module.build_problem

    def wrong_everywhere(case, **kw):
        problem = real_build(case, **kw)
        run = problem.run
        problem.run = lambda config, out=None: run(config, out).mul_(3)
        return problem

    monkeypatch.setattr(sweep_module, "build_problem", wrong_everywhere)
    report = _json(capsys, ["sweep", "--op", "semi24", *SWEEP_GRID, "--configs", "1", "--out", str(tmp_path / "w"),
                            "--json"], code=1)
    assert {r["status"] for r in report["rows"]} == {"wrong"}
    assert report["problems"][0]["ok"] == 0


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["bench", "--ops", "spgemm"], "unknown op"),
        (["bench", "--shapes", "12x"], "bad shape"),
        (["bench", "--sparsities", "100"], "not a fraction"),
        (["bench", "--dtypes", "fp8"], "unknown dtype"),
        (["bench", "--ns", "0"], "not a positive integer"),
        (["bench", "--db", "/nonexistent/stuning-db"], "no such tuning database"),
        (["sweep", "--op", "spgemm"], "unknown op"),
        (["sweep", "--shape", "64"], "bad shape"),
        (["sweep", "--sparsity", "1.0"], "not a fraction"),
        (["sweep", "--sparsity", "-0.5"], "not a fraction"),
        (["sweep", "--configs", "0"], "at least 1"),
        (["sweep", "--top", "0"], "at least 1"),
        (["sweep", *SWEEP_GRID, "--db", "/nonexistent/x.json"], "no such tuning database"),
    ],
)
def test_bad_input_one_line_error(db_dir, tmp_path, capsys, argv, needle):
    _fails(capsys, [*argv, "--out", str(tmp_path / "o")], 2, needle)
    assert not (tmp_path / "o").exists()  # nothing ran


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's size limit")
def test_sweep_without_a_gpu_refuses_big_problems(db_dir, tmp_path, capsys):
    _fails(capsys, ["sweep", "--shape", "4096x4096", "--out", str(tmp_path / "o")], 3, "too big")


def test_corrupt_database_stops_before_running(db_dir, tmp_path, capsys):
    db_dir.mkdir(parents=True, exist_ok=True)
    corrupt = db_dir / "triton-interpreter-cpu.json"
    corrupt.write_text('{"schema_version": 99}')
    out = str(tmp_path / "o")
    _fails(capsys, ["bench", "--smoke", "--configs", "auto", "--out", out], 2, corrupt.name)
    _fails(capsys, ["sweep", *SWEEP_GRID, "--out", out], 2, corrupt.name)
    other = tmp_path / "other.json"
    other.write_text("{not json")
    _fails(capsys, ["sweep", *SWEEP_GRID, "--db", str(other), "--out", out], 2, "other.json")


@pytest.mark.gpu
def test_bench_on_the_gpu_times_the_vendor_paths(tmp_path, capsys):
    report = _json(capsys, ["bench", "--suite", "quick", "--ops", "spmm,semi24", "--dtypes", "fp16", "--shapes",
                            "512x2048", "--ns", "128", "--sparsities", "0.9", "--out", str(tmp_path), "--json"])
    assert report["rows"] and all(r["timing"] in ("do_bench", "cudagraph") for r in report["rows"])
    spmm = [r for r in report["rows"] if r["op"] == "spmm"]
    semi24 = [r for r in report["rows"] if r["op"] == "semi24"]
    assert all(r["cusparse_us"] and r["dense_us"] for r in spmm)
    assert all(r["dense_us"] and (r["cslt_us"] or r.get("cslt_note")) for r in semi24)


@pytest.mark.gpu
def test_sweep_on_the_gpu(tmp_path, capsys):
    report = _json(capsys, ["sweep", "--op", "spmm", "--shape", "1024x1024", "--n", "64", "--configs", "4",
                            "--rep-ms", "10", "--warmup-ms", "5", "--out", str(tmp_path), "--json"])
    ok = [r for r in report["rows"] if r["status"] == "ok"]
    assert ok and all(r["timing"] in ("do_bench", "cudagraph") for r in ok)
