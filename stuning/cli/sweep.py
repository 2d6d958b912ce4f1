"""``stuning sweep``: time a grid of configs over a grid of problems; a tidy CSV, a summary, plots."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from stuning.bench.sweep import RANKS
from stuning.cli.bench import add_db_option, command_line, database_dir
from stuning.cli.errors import EXIT_FAILED, EXIT_NO_GPU, EXIT_OK, CLIError
from stuning.cli.output import console, fmt_config, fmt_us, print_json, progress, table
from stuning.cli.problems import add_problem_args, cases_from_args

# Multiply-adds of the dense product of a problem's shape that the interpreter still runs in about a
# second per launch (128 x 128 x 128); the default 4096 x 4096 x 128 would take hours per config.
INTERPRETER_MAX_WORK = 2**21


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="time many configs of each problem: a tidy CSV of measured and predicted times",
        description="For every problem of the grid, run configs of the op's config space (all, --configs N "
        "sampled with --seed, or the cost model's top N with --rank model; the heuristic config always), "
        "check each against the reference, time the ones that pass, and write sweep.csv (one row per problem "
        "and config: status, measured time, the model's predicted time and rank), summary.md and sweep.png "
        "under --out. Without a GPU it runs through Triton's interpreter (wall-clock times: use tiny shapes).",
    )
    add_problem_args(p)
    g = p.add_argument_group("configs and output")
    g.add_argument("--configs", type=int, default=None, metavar="N", help="configs per problem (default: all)")
    g.add_argument("--rank", choices=RANKS, default="random",
                   help="which N configs: a seeded random sample, or the cost model's best (default: %(default)s)")
    g.add_argument("--top", type=int, default=None, metavar="K", help="keep only the K fastest ok configs per problem")
    g.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the sample")
    g.add_argument("--device", default=None, help="device the model predicts for (default: this GPU, else H100)")
    g.add_argument("--warmup-ms", type=float, default=25.0,
                   help="GPU timing: warm-up per config (default: %(default)s)")
    g.add_argument("--rep-ms", type=float, default=100.0,
                   help="GPU timing: measurement time per config (default: %(default)s)")
    add_db_option(g)
    g.add_argument("--out", default="stuning-sweep", help="output directory (default: %(default)s)")
    g.add_argument("--json", action="store_true", help="print the results as JSON (no table, no progress bar)")
    p.set_defaults(func=run, command_parser=p)


def run(args) -> int:
    from stuning.bench.report import interpreter_note, json_records, plot_sweep, write_sweep_summary
    from stuning.bench.runner import environment
    from stuning.bench.sweep import SweepSettings, keep_top, problem_summary, sweep_case, tidy
    from stuning.bench.timer import config_timer, timing_label
    from stuning.tuning.driver import can_measure
    from stuning.tuning.session import model_for, open_db, target_spec

    for name in ("configs", "top"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise CLIError(f"--{name} must be at least 1")
    cases = cases_from_args(args)
    on_gpu = can_measure()
    if not on_gpu:
        _require_interpreter_sized(cases)
    con = console(quiet=args.json)
    with database_dir(args.db) as db_device:
        device = args.device or db_device
        spec = target_spec(device)
        model = model_for(open_db(device), spec)  # a corrupt database stops here, before anything runs
    settings = SweepSettings(configs=args.configs, rank=args.rank, seed=args.seed, precompile=on_gpu)
    timer = config_timer(on_gpu, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms)
    env = environment(on_gpu)
    rows: list[dict] = []
    with warnings.catch_warnings(), progress(con) as bar:
        warnings.filterwarnings("ignore", message=r"Sparse (CSR tensor support|invariant checks)")
        task = bar.add_task("sweeping", total=len(cases))
        for case in cases:
            bar.update(task, description=case.name)
            rows += sweep_case(case, model, settings, timer, on_config=lambda done, total, name=case.name: bar.update(
                task, description=f"{name} ({done}/{total} configs)"))
            bar.advance(task)
    all_rows = tidy(rows, env)
    summary = problem_summary(all_rows)
    kept = keep_top(all_rows, args.top) if args.top is not None else all_rows
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kept.to_csv(out / "sweep.csv", index=False)
    write_sweep_summary(all_rows, summary, out / "summary.md", command=command_line(args), model_device=spec.name,
                        top=args.top)
    files = [out / "sweep.csv", out / "summary.md"]
    if (plot := plot_sweep(all_rows, out / "sweep.png")) is not None:
        files.append(plot)
    note = interpreter_note(all_rows)
    failed = [s["name"] for s in summary.to_dict("records") if s["ok"] == 0 or s["wrong"]]
    if args.json:
        print_json({"device": env["device"], "timing": timing_label(on_gpu, per_row=False),
                    "model_device": spec.name, "problems": json_records(summary), "rows": json_records(kept),
                    "failed_problems": failed, "files": [str(f) for f in files]})
    else:
        _print_summary(con, summary, spec.name, note)
        con.print("wrote " + ", ".join(str(f) for f in files))
    if failed:
        con.print(f"[red]{len(failed)} problem(s) with a wrong result or no config that ran:[/] {', '.join(failed)}")
    return EXIT_FAILED if failed else EXIT_OK


def _require_interpreter_sized(cases) -> None:
    big = [c for c in cases if c.m * c.k * c.n > INTERPRETER_MAX_WORK]
    if big:
        raise CLIError(f"no CUDA GPU: {big[0].name} is too big for Triton's interpreter (hours per config); give "
                       "small problems, e.g. --shape 32x64 --n 16", EXIT_NO_GPU)


def _print_summary(con, summary, model_device: str, note: str) -> None:
    rows = []
    for s in summary.to_dict("records"):
        ratio = s.get("best_vs_heuristic")
        rows.append([s["name"], f"{s['ok']}/{s['configs']}", fmt_us(_value(s.get("best_us"))),
                     fmt_us(_value(s.get("heuristic_us"))), "-" if _value(ratio) is None else f"{ratio:.2f}x",
                     fmt_us(_value(s.get("model_pick_us"))),
                     fmt_config(json.loads(s["best_config"])) if s.get("best_config") else "-"])
    title = f"config sweep (model predicts for {model_device})" + (f"\n[yellow]{note}[/]" if note else "")
    con.print(table(title, ["problem", "ok/run", "best us", "heuristic us", "best vs heuristic", "model pick us",
                            "best config"], rows))


def _value(v):
    return None if v is None or v != v else v  # NaN (a problem without that number) prints as missing
