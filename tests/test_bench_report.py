"""What a benchmark run writes, on synthetic rows: geomean tables, speedup columns, CSV column order,
the summary's labels, JSON records and the plots (files only; nothing here is timed)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from stuning.bench.report import (
    COLUMNS,
    geomean,
    geomean_table,
    json_records,
    markdown_table,
    plot_sweep,
    results_frame,
    write_plots,
    write_summary,
)

PNG_MAGIC = b"\x89PNG"


def _row(op, dtype, m, k, n, sparsity, time_us, dense_us, other=None, ok=True, timing="do_bench"):
    row = {"op": op, "name": f"{op}_{m}x{k}_n{n}_s{sparsity}_{dtype}", "dtype": dtype, "m": m, "k": k, "n": n,
           "sparsity": sparsity, "skew_cv": 0.0, "time_us": time_us, "dense_us": dense_us,
           "speedup_vs_dense": dense_us / time_us, "ok": ok, "rel_err": 1e-6, "timing": timing,
           "format_bytes": 10, "dense_bytes": 100, "bytes_ratio": 0.1}
    if op == "semi24":
        row["cslt_us"] = other
        row["speedup_vs_cslt"] = other / time_us if other else None
    else:
        row["cusparse_us"] = other
        row["speedup_vs_cusparse"] = other / time_us if other else None
    return row


@pytest.fixture
def rows() -> list[dict]:
    out = []
    for m, k in ((64, 128), (128, 64)):
        for n in (16, 128):
            for s, speedup in ((0.7, 0.5), (0.9, 2.0)):
                out.append(_row("spmm", "fp16", m, k, n, s, 10.0, 10.0 * speedup, other=40.0))
    for n in (16, 128, 2048):
        out.append(_row("semi24", "fp16", 64, 128, n, 0.5, 10.0, 5.0, other=20.0))
    out.append(_row("semi24", "bf16", 64, 128, 16, 0.5, 10.0, 5.0, other=None, ok=False))
    return out


def test_geomean_skips_missing_and_non_positive():
    assert geomean([1.0, 4.0, None, float("nan"), 0.0, -3.0]) == pytest.approx(2.0)
    assert math.isnan(geomean([None, 0.0]))


def test_geomean_table_per_group(rows):
    df = pd.DataFrame(rows)
    table = geomean_table(df, ["op", "dtype"]).set_index(["op", "dtype"])
    assert table.loc[("spmm", "fp16"), "rows"] == 8
    assert table.loc[("spmm", "fp16"), "vs_dense"] == pytest.approx(1.0)  # geomean of 0.5 and 2
    assert table.loc[("spmm", "fp16"), "vs_cusparse"] == pytest.approx(4.0)
    assert math.isnan(table.loc[("spmm", "fp16"), "vs_cslt"])
    assert table.loc[("semi24", "fp16"), "vs_cslt"] == pytest.approx(2.0)
    assert table.loc[("semi24", "bf16"), "wrong"] == 1
    by_sparsity = geomean_table(df[df["op"] == "spmm"], ["op", "sparsity"]).set_index("sparsity")
    assert by_sparsity.loc[0.7, "vs_dense"] == pytest.approx(0.5)
    assert by_sparsity.loc[0.9, "vs_dense"] == pytest.approx(2.0)
    assert "vs_torch24" not in by_sparsity  # a baseline with no values gets no column


def test_results_frame_keeps_the_first_table_column_order(rows):
    env = {"device": "test", "torch": "t", "triton": "x", "cuda": "", "cusparselt": ""}
    df = results_frame([{**rows[0], "extra": 1}, *rows[1:]], env)
    known = [c for c in df.columns if c in COLUMNS]
    assert known == [c for c in COLUMNS if c in df.columns]
    assert df.columns[-1] == "extra" and (df["device"] == "test").all()
    assert list(df["op"].unique()) == ["semi24", "spmm"]  # sorted by problem


def test_summary_labels_interpreter_timings(rows, tmp_path):
    for timing, labelled in (("do_bench", False), ("perf_counter", True)):
        df = results_frame([{**r, "timing": timing} for r in rows], {"device": "d"})
        path = tmp_path / f"{timing}.md"
        write_summary(df, path, command="stuning bench", configs="heuristic", graph_below_us=50, pad_to=4, elapsed=1)
        text = path.read_text()
        assert "## Geomean speedups per op, dtype and sparsity" in text and "| spmm | fp16 | 0.7 |" in text
        assert "1 wrong results" in text
        assert ("interpreter timings" in text) == labelled


def test_plots_are_written(rows, tmp_path):
    paths = write_plots(results_frame(rows, {}), tmp_path)
    assert {p.name for p in paths} == {"speedup.png", "speedup_spmm.png", "speedup_semi24.png"}
    for p in paths:
        assert p.read_bytes()[:4] == PNG_MAGIC


def test_json_records_are_strict_json(rows):
    records = json_records(results_frame(rows, {}))
    text = json.dumps(records, allow_nan=False)
    assert json.loads(text)[0]["op"] == "semi24"
    assert any(r["speedup_vs_cslt"] is None for r in records)


def test_markdown_table_formats():
    df = pd.DataFrame([{"a": 1.23456, "b": None, "c": "x"}])
    assert markdown_table(df, {"a": ".2f"}).splitlines()[-1] == "| 1.23 |  | x |"


def test_sweep_plot(tmp_path):
    df = pd.DataFrame([
        {"op": "spmm", "name": "p", "status": "ok", "time_us": t, "predicted_us": t / 2, "heuristic": i == 0,
         "timing": "do_bench"}
        for i, t in enumerate([3.0, 1.0, 2.0])
    ])
    assert plot_sweep(df, tmp_path / "s.png").read_bytes()[:4] == PNG_MAGIC
    assert plot_sweep(df.assign(status="wrong"), tmp_path / "none.png") is None


@pytest.mark.parametrize("top,want", [(4.5, {"1", "2", "3"}), (40.0, {"1", "2", "5", "10", "20"})])
def test_speedup_axis_labels_more_than_one_tick_within_a_decade(top, want):
    # Speedups of 1-4.5x used to show a single label, "1": the rest of the decade's ticks were minor.
    from stuning.bench.report import _pyplot, _speedup_axis

    plt = _pyplot()
    fig, ax = plt.subplots()
    try:
        ax.plot([70, 98], [1.1, top])
        _speedup_axis(ax, log_n=False)
        ax.set_ylim(0.9, top * 1.05)
        fig.canvas.draw()
        labels = {t.get_text() for t in ax.get_yticklabels() if t.get_text()}
    finally:
        plt.close(fig)
    assert want <= labels, labels
