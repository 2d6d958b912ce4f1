"""What a benchmark run writes: ``results.csv``, ``summary.md`` (geomean tables and every row) and
plots (matplotlib, Agg), from the rows of ``stuning.bench.runner``.

The CSV's columns are those of the first baseline table (``benchmarks/h100-first-table/``), in the
same order, so runs stay comparable with it.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from stuning.bench.baselines import BASELINES
from stuning.bench.timer import WALL_CLOCK

# results.csv column order (columns missing from a run are left out; unlisted ones go last).
COLUMNS = (
    ["op", "name", "family", "dtype", "m", "k", "n", "sparsity", "skew_cv", "row_cv", "nnz", "time_us"]
    + [f"{b}_us" for b in BASELINES]
    + [f"speedup_vs_{b}" for b in BASELINES]
    + ["rel_err", "tol", "ok", "error"]
    + [f"{b}_err" for b in BASELINES]
    + ["timing", "timing_note", "probe_us", "host_us"]
    + [f"{b}_host_us" for b in BASELINES]
    + [f"{b}_note" for b in BASELINES]
    + ["torch24_backend", "dense_bytes", "format_bytes", "bytes_ratio", "vendor_bytes", "vendor_bytes_ratio"]
    + ["config", "config_source", "seconds", "device", "torch", "triton", "cuda", "cusparselt"]
)
SPEEDUPS = [f"speedup_vs_{b}" for b in BASELINES]
BASELINE_LABELS = {
    "dense": "cuBLAS dense",
    "cusparse": "cuSPARSE (torch.sparse)",
    "cslt": "cuSPARSELt",
    "torch24": "torch 2:4 (converted once)",
    "torch24_conv": "torch 2:4 eager (conversion per call)",
    ("sddmm", "dense"): "cuBLAS dense product",
    ("sddmm", "cusparse"): "cuSPARSE (sampled_addmm, fp32 only)",
}
OP_ORDER = ("spmm", "sddmm", "semi24")


def geomean(values) -> float:
    """Geometric mean of the positive, non-missing values (NaN if there are none)."""
    v = pd.Series(values, dtype=float).dropna()
    v = v[v > 0]
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")


def results_frame(rows: list[dict], env: dict) -> pd.DataFrame:
    """The rows with the run's environment columns, sorted by problem, in COLUMNS order."""
    df = pd.DataFrame(rows)
    for key, val in env.items():
        df[key] = val
    if df.empty:
        return df
    sort_cols = [c for c in ("op", "dtype", "m", "k", "n", "sparsity", "skew_cv") if c in df]
    df = df.sort_values(sort_cols, kind="stable").reset_index(drop=True)
    return df[[c for c in COLUMNS if c in df] + [c for c in df if c not in COLUMNS]]


def timed_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["time_us"].notna()] if "time_us" in df else df.iloc[:0]


def geomean_table(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group: rows, wrong results, and the geomean of every speedup column that has values."""
    present = [c for c in SPEEDUPS if c in df and df[c].notna().any()]
    groups = []
    for key, g in df.groupby(by, sort=True, dropna=False):
        rec = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        rec["rows"] = len(g)
        rec["wrong"] = int((~g["ok"].astype(bool)).sum()) if "ok" in g else 0
        for c in present:
            rec[c.replace("speedup_", "")] = geomean(g[c])
        groups.append(rec)
    return pd.DataFrame(groups)


def format_cell(v, spec: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return format(v, spec or ".3g")
    return str(v)


def markdown_table(df: pd.DataFrame, formats: dict | None = None) -> str:
    formats = formats or {}
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for rec in df.itertuples(index=False):
        lines.append("| " + " | ".join(format_cell(v, formats.get(c, "")) for c, v in zip(cols, rec, strict=True))
                     + " |")
    return "\n".join(lines)


def json_records(df: pd.DataFrame) -> list[dict]:
    """Rows for JSON: missing values as null (JSON has no NaN), numpy scalars as Python ones."""
    return [{k: _plain(v) for k, v in rec.items()} for rec in df.to_dict("records")]


def _plain(v):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def pretune_text(strategy: str, trials: int, seconds: float) -> str:
    """How a run pretuned, for its summary: a budget only where the strategy times configs."""
    from stuning.tuning.search import STRATEGIES

    if not STRATEGIES[strategy].measures:
        return f"{strategy} (the cost model's pick; nothing timed)"
    return f"{strategy} (at most {trials} configs and {seconds:g} s per problem)"


def interpreter_note(df: pd.DataFrame) -> str:
    """A line for results timed through the interpreter (empty for GPU times)."""
    if "timing" in df and (df["timing"] == WALL_CLOCK).any():
        return ("interpreter timings: no GPU, so times are the wall clock of Triton's interpreter on the CPU; "
                "they check that things run and say nothing about GPU speed")
    return ""


def write_results(df: pd.DataFrame, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.csv"
    df.to_csv(path, index=False)
    return path


def write_summary(df: pd.DataFrame, path: Path, *, command: str, configs: str, graph_below_us: float,
                  pad_to: int, elapsed: float) -> None:
    env = df.iloc[0] if len(df) else {}
    lines = [
        "# stuning vs vendor baselines" + (" (default configs)" if configs == "heuristic" else ""),
        "",
        f"- command: `{command}`",
        f"- device: {env.get('device', '')}; torch {env.get('torch', '')}, triton {env.get('triton', '')}, "
        f"CUDA {env.get('cuda') or 'n/a'}, cuSPARSELt {env.get('cusparselt') or 'n/a'}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {len(df)} cases in {elapsed:.0f} s",
        f"- stuning configs: {configs} ("
        + ("each kernel's default heuristic" if configs == "heuristic"
           else "config=None: tuning database, else cost model, else heuristic; see config_source")
        + ")",
        "- speedup_vs_X = time of X / time of stuning (> 1: stuning is faster); geomeans over the rows that "
        "have both times.",
    ]
    if note := interpreter_note(df):
        lines.append(f"- **{note}**; the vendor paths that need CUDA are reported as unavailable.")
    else:
        lines.append(
            "- one timing method per row (column `timing`, why in `timing_note`): `do_bench` (median, L2 flushed "
            "before each call), or `cudagraph` (median of CUDA-graph replays, each call behind an L2 flush "
            "captured in the graph, less the flush alone) when "
            f"some implementation of the row runs under {graph_below_us:g} us or is host-bound (host time per "
            "call, `*host_us`, longer than do_bench's L2 flush, which hides only that much), where do_bench would "
            "time the launch. The implementations of a row are timed in turn, in rounds "
            "(`TimerSettings.rounds`), and each keeps the median of its rounds.")
    lines += [
        "- bytes_ratio = stuning format bytes / dense bytes (CSR: values + int32 col + crow, padded rows; "
        "2:4: values + 2-bit metadata); vendor_bytes_ratio likewise for cuSPARSE's CSR / cuSPARSELt's "
        "compressed matrix.",
        f"- inputs: stuning's CSR rows padded to {pad_to} (cuSPARSE gets the unpadded int32 CSR); "
        "SDDMM's B (K x N) is the transpose of a row-major N x K matrix (K contiguous), as X^T in a weight "
        "gradient; 2:4 N not a multiple of 8 is padded once for `torch._cslt_sparse_mm` (see cslt_note).",
        "",
    ]
    wrong = df[~df["ok"].astype(bool)] if "ok" in df else df.iloc[:0]
    errors = df[df["error"].notna()] if "error" in df else df.iloc[:0]
    if len(wrong) or len(errors):
        lines += [f"**{len(wrong)} wrong results, {len(errors)} errors** (see rel_err, error columns).", ""]
    done = timed_rows(df)
    lines += ["## Geomean speedups per op, dtype and sparsity", ""]
    lines.append(markdown_table(geomean_table(done, ["op", "dtype", "sparsity"]), {"sparsity": "g"}))
    lines += ["", "## Geomean speedups per op and dtype", ""]
    lines.append(markdown_table(geomean_table(done, ["op", "dtype"])))
    lines += ["", "## All rows", ""]
    row_cols = "op family dtype m k n sparsity skew_cv nnz time_us host_us dense_us cusparse_us cslt_us torch24_us"
    row_cols += " torch24_conv_us speedup_vs_dense speedup_vs_cusparse speedup_vs_cslt bytes_ratio rel_err ok timing"
    row_cols += " config_source"
    cols = [c for c in row_cols.split() if c in df]
    fmts = {c: ".1f" for c in cols if c.endswith("_us")}
    fmts.update({c: ".2f" for c in cols if c.startswith("speedup")})
    fmts.update({"rel_err": ".1e", "bytes_ratio": ".3f", "sparsity": "g", "skew_cv": "g"})
    lines.append(markdown_table(df[cols], fmts))
    path.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------ plots
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a benchmark machine
    import matplotlib.pyplot as plt

    return plt


def _plain_ticks(axis) -> None:
    # A log axis over less than a decade otherwise labels its minor ticks in scientific notation, or,
    # with those blanked, shows a single label (speedups of 1-5x had only "1"): label 1, 2, 3 and 5.
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _speedup_axis(ax, log_n: bool) -> None:
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_yscale("log")
    if log_n:
        ax.set_xscale("log", base=2)
    _plain_ticks(ax.yaxis)
    ax.grid(True, which="both", alpha=0.3)


def _plot_lines(ax, d: pd.DataFrame, by: str, scale: float) -> None:
    """One line per baseline: geomean speedup of stuning over it against ``by``."""
    for col in SPEEDUPS:
        if col not in d or not d[col].notna().any():
            continue
        g = d.groupby(by)[col].apply(geomean).dropna()
        name = col.removeprefix("speedup_vs_")
        label = BASELINE_LABELS.get((d["op"].iloc[0], name), BASELINE_LABELS[name])
        ax.plot(g.index * scale, g.values, marker="o", label="vs " + label)


def _by_n(d: pd.DataFrame) -> bool:
    # 2:4 has one sparsity (50%): its panels run along N instead.
    return d["sparsity"].nunique() == 1


def plot_overview(df: pd.DataFrame, path: Path) -> Path:
    """One panel per op: geomean speedup against sparsity (2:4: against N), one line per baseline."""
    plt = _pyplot()
    ops = [op for op in OP_ORDER if op in set(df["op"])]
    fig, axes = plt.subplots(1, max(1, len(ops)), figsize=(5 * max(1, len(ops)), 4), squeeze=False)
    for ax, op in zip(axes[0], ops, strict=False):
        d = df[df["op"] == op]
        by_n = _by_n(d)
        _plot_lines(ax, d, "n" if by_n else "sparsity", 1 if by_n else 100)
        _speedup_axis(ax, log_n=by_n)
        ax.set_title(f"{op} (2:4, geomean)" if by_n else f"{op} (geomean over shapes, N, dtypes)")
        ax.set_xlabel("N" if by_n else "sparsity (%)")
        ax.set_ylabel("speedup of stuning (> 1: faster)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _panels(d: pd.DataFrame, op: str) -> list[list[tuple[str, pd.DataFrame]]]:
    """Rows of (title, rows) panels: one row per shape and one panel per N (SDDMM: per inner K);
    2:4, which runs along N, gets one row of a panel per shape."""
    shape_col, width_col = ("n", "k") if op == "sddmm" else ("k", "n")
    shapes = sorted({(int(m), int(x)) for m, x in zip(d["m"], d[shape_col], strict=True)})
    name = (lambda m, x: f"{m}x{x} mask") if op == "sddmm" else (lambda m, x: f"{m}x{x}")
    of_shape = {sh: d[(d["m"] == sh[0]) & (d[shape_col] == sh[1])] for sh in shapes}
    if _by_n(d):
        return [[(name(*sh), of_shape[sh]) for sh in shapes]]
    widths = sorted({int(v) for v in d[width_col]})
    label = "K" if op == "sddmm" else "N"
    return [[(f"{name(*sh)}, {label}={w}", of_shape[sh][of_shape[sh][width_col] == w]) for w in widths]
            for sh in shapes]


def plot_per_shape(df: pd.DataFrame, op: str, path: Path) -> Path:
    """A grid of panels for one op, per shape and N: speedup against sparsity (2:4: against N), one
    line per baseline, geomean over dtypes and row skews."""
    plt = _pyplot()
    d = df[df["op"] == op]
    by_n = _by_n(d)
    grid = _panels(d, op)
    rows, cols = len(grid), max(len(r) for r in grid)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows + 0.6), squeeze=False)
    for i, panel_row in enumerate(grid):
        for j, (title, sel) in enumerate(panel_row):
            ax = axes[i][j]
            if sel.empty:  # a shape the preset does not pair with this N
                ax.set_visible(False)
                continue
            _plot_lines(ax, sel, "n" if by_n else "sparsity", 1 if by_n else 100)
            _speedup_axis(ax, log_n=by_n)
            if by_n:
                ns = sorted(sel["n"].unique())
                ax.set_xticks(ns, [str(int(n)) for n in ns])
                _plain_ticks(ax.xaxis)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("N" if by_n else "sparsity (%)", fontsize=8)
            if j == 0:
                ax.set_ylabel("speedup", fontsize=8)
    visible = [ax for row in axes for ax in row if ax.get_visible()]
    handles, labels = visible[0].get_legend_handles_labels() if visible else ([], [])
    top = 1 - 0.9 / fig.get_figheight()  # room for the title and the legend, whatever the grid's height
    if handles:
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, top), ncol=len(labels), fontsize=8)
    fig.suptitle(f"{op}: stuning's speedup (> 1: faster), geomean over dtypes and row skews", y=0.995, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, top))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_plots(df: pd.DataFrame, out: Path) -> list[Path]:
    """speedup.png (the overview) and speedup_<op>.png (per shape and N) for the timed rows."""
    done = timed_rows(df)
    if done.empty:
        return []
    paths = [plot_overview(done, out / "speedup.png")]
    paths += [plot_per_shape(done, op, out / f"speedup_{op}.png") for op in OP_ORDER if op in set(done["op"])]
    return paths


# ------------------------------------------------------------------------------------------ sweeps
def write_sweep_summary(rows: pd.DataFrame, summary: pd.DataFrame, path: Path, *, command: str,
                        model_device: str, top: int | None) -> None:
    env = rows.iloc[0] if len(rows) else {}
    lines = [
        "# stuning config sweep",
        "",
        f"- command: `{command}`",
        f"- device: {env.get('device', '')}; torch {env.get('torch', '')}, triton {env.get('triton', '')}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {len(summary)} problems, {len(rows)} configs run",
        f"- predicted_us: the cost model's time for {model_device}; model_rank: the config's place in the "
        "model's ranking of the whole space; rank: its place among the problem's measured configs",
        "- every config is checked against the reference before it is timed; status says why one was not "
        "timed (wrong, compile_error, out_of_resources, error)",
    ]
    if note := interpreter_note(rows):
        lines.append(f"- **{note}**")
    if top is not None:
        lines.append(f"- sweep.csv keeps the {top} fastest ok configs of each problem (--top {top})")
    cols = [c for c in ("op", "name", "dtype", "configs", "ok", "failed", "wrong", "best_us", "heuristic_us",
                        "best_vs_heuristic", "model_pick_us", "model_pick_vs_best", "spearman", "best_config")
            if c in summary]
    fmts = {c: ".1f" for c in cols if c.endswith("_us")}
    fmts.update({"best_vs_heuristic": ".2f", "model_pick_vs_best": ".2f", "spearman": ".2f"})
    lines += ["", "## Per problem", "", markdown_table(summary[cols], fmts), ""]
    path.write_text("\n".join(lines) + "\n")


def plot_sweep(df: pd.DataFrame, path: Path) -> Path | None:
    """Left: predicted against measured time of every ok config, per op. Right: each problem's
    measured times over its best, fastest first, with the heuristic config marked."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return None
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for op in [o for o in OP_ORDER if o in set(ok["op"])]:
        d = ok[ok["op"] == op]
        left.scatter(d["predicted_us"], d["time_us"], s=12, alpha=0.6, label=op)
    left.set_xscale("log")
    left.set_yscale("log")
    _plain_ticks(left.xaxis)
    _plain_ticks(left.yaxis)
    left.set_xlabel("predicted us (cost model)")
    left.set_ylabel("measured us" + (" (interpreter wall clock)" if interpreter_note(df) else ""))
    left.set_title("model against measurement")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    for name, g in ok.groupby("name", sort=False):
        g = g.sort_values("time_us")
        rel = g["time_us"].to_numpy() / g["time_us"].min()
        x = np.arange(1, len(g) + 1)
        (line,) = right.plot(x, rel, lw=1, label=name if ok["name"].nunique() <= 8 else None)
        heur = g["heuristic"].to_numpy()
        right.scatter(x[heur], rel[heur], marker="*", s=80, color=line.get_color(), zorder=3)
    right.set_yscale("log")
    _plain_ticks(right.yaxis)
    right.set_xlabel("config, fastest first")
    right.set_ylabel("time / best time")
    right.set_title("each problem's configs (star: heuristic)")
    right.grid(True, which="both", alpha=0.3)
    if ok["name"].nunique() <= 8:
        right.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_model_speedups(df: pd.DataFrame, path: Path, *, x: str, y: str, label: str, ylabel: str) -> Path:
    """One panel per model, one line per pruning pattern: ``y`` against ``x`` on log axes
    (the end-to-end scripts' plot). ``label`` formats each line's legend from ``{pattern}``."""
    plt = _pyplot()
    models = list(dict.fromkeys(df["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4), squeeze=False)
    ticks = sorted(set(df[x]))
    for ax, model in zip(axes[0], models, strict=True):
        for pattern, g in df[df["model"] == model].groupby("pattern", sort=False):
            ax.plot(g[x], g[y].astype(float), marker="o", label=label.format(pattern=pattern))
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.set_title(model)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
