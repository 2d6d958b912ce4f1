"""``stuning bench``: stuning's kernels against cuBLAS, cuSPARSE and cuSPARSELt on the standard suite.

Also what ``scripts/bench_baselines.py`` runs (same flags). The ``--db`` option and the recorded
command line are shared with ``stuning sweep``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from pathlib import Path

from stuning.bench.runner import CONFIG_SOURCES, ORDERS
from stuning.bench.timer import TimerSettings
from stuning.cli.errors import EXIT_FAILED, EXIT_OK, CLIError
from stuning.cli.output import console, print_json, progress, table
from stuning.cli.problems import DTYPES, OPS, parse_fraction, parse_shape, split_list
from stuning.suite import PRESETS, WEIGHT_SHAPES

# first-table's time limit (no new case after it), as in the run behind BENCHMARKS.md's first table.
PRESET_MAX_SECONDS = {"first-table": 330.0}
SHAPE_GROUPS = (*WEIGHT_SHAPES, "attention")


def register(sub) -> None:
    p = sub.add_parser(
        "bench", help="time the kernels against cuBLAS, cuSPARSE and cuSPARSELt on the standard suite",
        description="Time stuning's kernels against the vendor paths on a preset of the standard suite "
        "(stuning/suite.py) and report speedups (time of the baseline / time of stuning). Writes results.csv, "
        "summary.md, speedup.png and speedup_<op>.png under --out. Without a GPU it runs small cases through "
        "Triton's interpreter (wall-clock times, vendor paths that need CUDA reported as unavailable).",
    )
    g = p.add_argument_group("cases (filters are comma-separated lists applied to the preset)")
    g.add_argument("--suite", "--preset", dest="suite", default="quick", choices=sorted(PRESETS),
                   help="preset of the standard suite (default: %(default)s)")
    g.add_argument("--ops", "--op", dest="ops", default="spmm,sddmm,semi24",
                   help=f"ops: {', '.join(OPS)} (default: all)")
    g.add_argument("--dtypes", "--dtype", dest="dtypes", help=f"dtypes: {', '.join(DTYPES)}")
    g.add_argument("--shapes", help=f"shape groups ({', '.join(SHAPE_GROUPS)}) or MxK")
    g.add_argument("--ns", help="N of SpMM and 2:4 (columns of the dense operand)")
    g.add_argument("--ks", help="the inner dimension K of SDDMM")
    g.add_argument("--sparsities", help="fractions or percents of zeros (0.9 or 90)")
    g.add_argument("--skews", help="row-length cv of SpMM: 0,0.4")
    g.add_argument("--sample", type=int, help="a seeded random subset of this many cases per op")
    g.add_argument("--limit", type=int, help="run at most this many cases in all")
    g.add_argument("--order", choices=ORDERS, default="shuffle",
                   help="ops round-robin, each shuffled (seeded, the default) or in suite order; or op by op (suite)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--smoke", action="store_true",
                   help="small cases for Triton's interpreter (what runs anyway without a GPU)")
    r = p.add_argument_group("running and timing")
    r.add_argument("--configs", choices=CONFIG_SOURCES, default="heuristic",
                   help="stuning's config: the kernel's default heuristic, or config=None (database > model > "
                   "heuristic; the source is recorded per row); default: %(default)s")
    r.add_argument("--pad-to", type=int, default=4, help="row padding of stuning's CSR matrices (default: %(default)s)")
    r.add_argument("--max-seconds", type=float,
                   help="start no new case after this long (first-table: 330; 0: no limit)")
    t = TimerSettings()
    r.add_argument("--graph-below-us", type=float, default=t.graph_below_us,
                   help="CUDA-graph replay for rows where some implementation runs faster than this (us) or is "
                   "host-bound (default: %(default)s)")
    r.add_argument("--warmup-ms", type=float, default=t.warmup_ms, help="do_bench warm-up (default: %(default)s)")
    r.add_argument("--rep-ms", type=float, default=t.rep_ms, help="do_bench measurement time (default: %(default)s)")
    r.add_argument("--graph-rep-ms", type=float, default=t.graph_rep_ms,
                   help="graph replay time per implementation of a row, over its rounds (default: %(default)s)")
    add_db_option(r)
    r.add_argument("--out", default="stuning-bench", help="output directory (default: %(default)s)")
    r.add_argument("--json", action="store_true", help="print the results as JSON (no table, no progress bar)")
    r.add_argument("--strict", action="store_true", help=argparse.SUPPRESS)  # the default now; old scripts pass it
    p.set_defaults(func=run, command_parser=p)


# ------------------------------------------------------------------------------------ shared options
def add_db_option(group) -> None:
    group.add_argument("--db", default=None, metavar="PATH",
                       help="tuning databases to read first (as $STUNING_DB_DIR): a directory, or one database file")


@contextlib.contextmanager
def database_dir(path: str | None):
    """Read the tuning databases of ``path`` (a directory, or the directory of a database file, which is
    checked first) before the user cache and the shipped ones. Yields the file's device name, or None."""
    if path is None:
        yield None
        return
    from stuning.db import ENV_DB_DIR, load_document
    from stuning.ops.selection import SELECTOR

    p = Path(path).expanduser()
    device = None
    if p.is_file():
        device = load_document(p)["device"]["name"]  # CorruptDatabaseError names the file
        directory = p.parent
    elif p.is_dir():
        directory = p
    else:
        raise CLIError(f"no such tuning database: {path} (give a directory of database files, or one file)")
    before = os.environ.get(ENV_DB_DIR)
    os.environ[ENV_DB_DIR] = str(directory)
    SELECTOR.reset()
    try:
        yield device
    finally:
        if before is None:
            os.environ.pop(ENV_DB_DIR, None)
        else:
            os.environ[ENV_DB_DIR] = before
        SELECTOR.reset()


def command_line(args) -> str:
    """The command as it could be typed again: the sub-command and every option not at its default."""
    parser = args.command_parser
    parts = ["stuning", args.command]
    for dest, value in vars(args).items():
        if dest in ("func", "command", "command_parser", "json") or value == parser.get_default(dest):
            continue
        flag = "--" + dest.replace("_", "-")
        parts += [flag] if value is True else [flag, str(value)]
    return " ".join(parts)


# ------------------------------------------------------------------------------------------ bench
def _filters(args) -> dict:
    """The suite functions' keyword filters from the comma lists, each value checked."""
    def shape(text):
        return text.lower() if text.lower() in SHAPE_GROUPS else "x".join(map(str, parse_shape(text)))

    def positive(text):
        v = int(text)
        if v <= 0:
            raise CLIError(f"{text!r} is not a positive integer")
        return v

    def skew(text):
        v = float(text)
        if v < 0:
            raise CLIError(f"skew {text!r} is negative: it is a coefficient of variation")
        return v

    options = {"dtypes": str, "shapes": shape, "ns": positive, "ks": positive, "sparsities": parse_fraction,
               "skews": skew}
    filters = {k: split_list(getattr(args, k), k, conv) for k, conv in options.items() if getattr(args, k) is not None}
    for d in filters.get("dtypes", []):
        if d not in DTYPES:
            raise CLIError(f"unknown dtype {d!r}; choose from {', '.join(DTYPES)}")
    return filters


def _ops(text: str) -> list[str]:
    ops = split_list(text, "ops", str)
    for op in ops:
        if op not in OPS:
            raise CLIError(f"unknown op {op!r}; choose from {', '.join(OPS)}")
    return ops


def run(args) -> int:
    import torch

    from stuning.bench.report import geomean_table, json_records, results_frame, timed_rows, write_results
    from stuning.bench.runner import BenchSettings, environment, run_cases, select_cases
    from stuning.bench.timer import RowTimer, timing_label
    from stuning.kernels.target import interpreting

    ops, filters = _ops(args.ops), _filters(args)
    on_gpu = torch.cuda.is_available() and not interpreting()
    con = console(quiet=args.json)
    smoke = args.smoke or not on_gpu
    if smoke and not args.smoke:
        con.print(f"[yellow]no CUDA GPU: running small cases through Triton's interpreter instead of suite "
                  f"{args.suite!r}; times are wall clock, not GPU times[/]")
    cases = select_cases(ops, preset=args.suite, smoke=smoke, filters=filters, sample=args.sample, limit=args.limit,
                         order=args.order, seed=args.seed)
    if not cases:
        raise CLIError(f"no case of suite {args.suite!r} matches those filters")
    max_seconds = PRESET_MAX_SECONDS.get(args.suite) if args.max_seconds is None else args.max_seconds
    settings = BenchSettings(configs=args.configs, pad_to=args.pad_to, seed=args.seed, on_gpu=on_gpu)
    timer_settings = TimerSettings(args.graph_below_us, args.warmup_ms, args.rep_ms, args.graph_rep_ms)
    out = Path(args.out)
    env = environment(on_gpu)
    with database_dir(args.db) as db_device:
        if args.configs == "auto":
            _open_selector_db(db_device)
        if on_gpu:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        timer = RowTimer(timer_settings, on_gpu)
        con.print(f"[bold]stuning bench[/]: {len(cases)} cases ({'interpreter smoke cases' if smoke else args.suite}) "
                  f"on {env['device']}; torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda'] or 'n/a'}"
                  + (f"; starts no case after {max_seconds:.0f} s" if max_seconds else ""))
        with warnings.catch_warnings(), progress(con) as bar:
            # Torch's beta notices for sparse CSR and SparseSemiStructuredTensor say nothing about the results.
            warnings.filterwarnings("ignore", message=r"Sparse (CSR tensor support|invariant checks)")
            warnings.filterwarnings("ignore", message=r"The PyTorch API of SparseSemiStructuredTensor")
            task = bar.add_task("starting", total=len(cases))

            def on_row(row):
                if row.get("error"):
                    bar.console.print(f"[red]ERROR[/] {row['name']}: {row['error'][:200]}")
                elif not row["ok"]:
                    bar.console.print(f"[red]WRONG[/] {row['name']}: rel_err {row['rel_err']:.2e}")
                bar.advance(task)

            outcome = run_cases(cases, settings, timer, max_seconds=max_seconds or None,
                                on_start=lambda case: bar.update(task, description=case.name), on_row=on_row,
                                checkpoint=lambda rows, _: write_results(results_frame(rows, env), out))
    df = results_frame(outcome.rows, env)
    files = _write_outputs(df, out, args, outcome.seconds)
    wrong = int((~df["ok"].astype(bool)).sum()) if "ok" in df else 0
    geomeans = geomean_table(timed_rows(df), ["op", "dtype"]) if len(timed_rows(df)) else None
    if args.json:
        print_json({"device": env["device"], "timing": timing_label(on_gpu, per_row=True), "configs": args.configs,
                    "cases": len(df), "wrong_or_failed": wrong, "stopped": outcome.stopped,
                    "seconds": round(outcome.seconds, 2), "files": [str(f) for f in files],
                    "geomeans": json_records(geomeans) if geomeans is not None else [], "rows": json_records(df)})
    else:
        _print_tables(con, geomeans, args.configs, on_gpu)
        if outcome.stopped:
            con.print(f"[yellow]{outcome.stopped}[/]")
        con.print(f"{len(df)} cases in {outcome.seconds:.0f} s, {wrong} wrong or failed; wrote "
                  + ", ".join(str(f) for f in files))
    return EXIT_FAILED if wrong else EXIT_OK


def _open_selector_db(db_device: str | None) -> None:
    """Open the database config=None reads now, so a corrupt file stops the run before it starts."""
    from stuning.ops.selection import SELECTOR
    from stuning.tuning.session import local_device_name

    if db_device is not None and db_device != local_device_name():
        raise CLIError(f"--db holds the database of {db_device!r}, but config=None reads this machine's "
                       f"({local_device_name()!r}): give a directory or that device's file")
    SELECTOR.db()


def _write_outputs(df, out: Path, args, seconds: float) -> list[Path]:
    from stuning.bench.report import write_plots, write_results, write_summary

    files = [write_results(df, out)]
    if df.empty:
        return files
    write_summary(df, out / "summary.md", command=command_line(args), configs=args.configs,
                  graph_below_us=args.graph_below_us, pad_to=args.pad_to, elapsed=seconds)
    files.append(out / "summary.md")
    try:
        files += write_plots(df, out)
    except Exception as e:  # a plot is not worth losing the table over
        print(f"stuning bench: plots not written: {type(e).__name__}: {e}", file=sys.stderr)
    return files


def _print_tables(con, geomeans, configs: str, on_gpu: bool) -> None:
    from stuning.bench.report import format_cell

    if geomeans is None or geomeans.empty:
        con.print("no timed rows")
        return
    title = f"stuning ({configs} config) vs baselines: geomean speedups (> 1: stuning faster)"
    if not on_gpu:
        title += "\n[yellow]interpreter wall-clock times: not GPU speed[/]"
    columns = [c.replace("vs_", "x ") for c in geomeans.columns]
    rows = [[format_cell(v, ".2f") if isinstance(v, float) else str(v) for v in rec]
            for rec in geomeans.itertuples(index=False)]
    con.print(table(title, columns, rows))
