"""``stuning tune``: tune problems into the database."""

from __future__ import annotations

from stuning.cli.errors import EXIT_NO_GPU, EXIT_OK, CLIError
from stuning.cli.output import console, fmt_config, fmt_ratio, fmt_us, print_json, progress, table
from stuning.cli.problems import add_problem_args, add_search_args, cases_from_args


def register(sub) -> None:
    p = sub.add_parser("tune", help="tune problems and store the winners in the tuning database")
    add_problem_args(p)
    add_search_args(p)
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from stuning.tuning.driver import refit_model, require_measuring, tune_case
    from stuning.tuning.search import Budget
    from stuning.tuning.session import open_db, target_spec

    cases = cases_from_args(args)
    try:
        require_measuring(args.strategy)
    except RuntimeError as e:
        raise CLIError(str(e), EXIT_NO_GPU) from None
    if args.trials is not None and args.trials < 1:
        raise CLIError("--trials must be at least 1")
    device = target_spec(args.device).name if args.device else None
    db = open_db(device)
    budget = None
    if args.trials is not None or args.seconds is not None:
        budget = Budget(max_trials=args.trials, max_seconds=args.seconds)
    con = console(quiet=args.json)
    results = []
    with progress(con) as bar:
        task = bar.add_task(f"tuning ({args.strategy})", total=len(cases))
        for case in cases:
            bar.update(task, description=f"{case.name}")
            outcome, key = tune_case(case, strategy=args.strategy, budget=budget, db=db, device_name=device)
            results.append({
                "problem": case.name, "key": key, "config": outcome.best_config.as_dict(),
                "measured": outcome.measured, "time_us": outcome.best_time_us,
                "predicted_us": outcome.predicted_us, "timed": outcome.timed, "space": outcome.space,
                "seconds": round(outcome.seconds, 2), "failures": outcome.failures,
                "dense_us": outcome.dense_us, "speedup_vs_dense": outcome.speedup_vs_dense,
            })
            bar.advance(task)
    fitted = refit_model(db) if any(r["measured"] for r in results) else {}
    if args.json:
        print_json({"device": db.device_name, "database": str(db.write_path), "results": results,
                    "model_coefficients": fitted})
        return EXIT_OK
    rows = [[r["problem"], fmt_config(r["config"]), fmt_us(r["time_us"]), fmt_us(r["predicted_us"]),
             fmt_us(r["dense_us"]), fmt_ratio(r["speedup_vs_dense"]),
             f"{r['timed']}/{r['space']}", r["seconds"]] for r in results]
    con.print(table(f"tuned for {db.device_name} ({args.strategy})",
                    ["problem", "best config", "measured us", "predicted us", "dense us", "vs dense", "timed/space",
                     "s"], rows))
    if not any(r["measured"] for r in results):
        con.print("Times are the cost model's predictions: nothing was measured.")
    con.print(f"database: {db.write_path}")
    return EXIT_OK
