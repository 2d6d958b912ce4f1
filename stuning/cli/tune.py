"""``stuning tune``: tune problems into the database."""

from __future__ import annotations

import functools
import time

from stuning.cli.errors import EXIT_INTERRUPTED, EXIT_NO_GPU, EXIT_OK, CLIError
from stuning.cli.output import console, fmt_config, fmt_ratio, fmt_us, print_json, progress, table
from stuning.cli.problems import add_problem_args, add_search_args, cases_from_args, split_list


def register(sub) -> None:
    p = sub.add_parser("tune", help="tune problems and store the winners in the tuning database")
    add_problem_args(p)
    add_search_args(p)
    p.add_argument("--untried", action="store_true",
                   help="instead of the problem options: re-tune the SpMM and SDDMM entries `stuning db untried` "
                        "lists (of --op if given), on random inputs with their features")
    p.add_argument("--max-seconds", type=float, default=None, metavar="S",
                   help="start no new problem after this long (the first always starts); those left are listed, "
                        "and the cost model is refitted on what was tuned, as after Ctrl-C")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from stuning.tuning.driver import refit_model, require_measuring, tune_case
    from stuning.tuning.search import Budget
    from stuning.tuning.session import open_db, target_spec

    cases = None if args.untried else cases_from_args(args)
    try:
        require_measuring(args.strategy)
    except RuntimeError as e:
        raise CLIError(str(e), EXIT_NO_GPU) from None
    if args.trials is not None and args.trials < 1:
        raise CLIError("--trials must be at least 1")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise CLIError(f"--max-seconds must be positive, got {args.max_seconds}")
    if args.untried and (args.device or args.strategy == "model"):
        raise CLIError("--untried re-tunes this GPU's entries by timing them: drop --device and --strategy model")
    device = target_spec(args.device).name if args.device else None
    db = open_db(device)
    budget = None
    if args.trials is not None or args.seconds is not None:
        budget = Budget(max_trials=args.trials, max_seconds=args.seconds)
    jobs = _untried_jobs(args, db, budget) if args.untried else [
        (c.name, functools.partial(tune_case, c, strategy=args.strategy, budget=budget, db=db, device_name=device))
        for c in cases]
    con = console(quiet=args.json)
    with progress(con) as bar:
        results, skipped, stopped = _run_jobs(jobs, bar, bar.add_task(f"tuning ({args.strategy})", total=len(jobs)),
                                              args.max_seconds)
    not_tuned = [name for name, _ in jobs[len(results) + len(skipped):]]
    # Each problem's entry was saved as it finished; the refit runs after a stop too (a tune killed
    # before it leaves the stored model fitted to fewer entries than the database holds).
    fitted = refit_model(db) if any(r["measured"] for r in results) else {}
    code = EXIT_INTERRUPTED if stopped.startswith("interrupted") else EXIT_OK
    if args.json:
        print_json({"device": db.device_name, "database": str(db.write_path), "results": results,
                    "skipped": skipped, "stopped": stopped, "not_tuned": not_tuned,
                    "model_coefficients": fitted})
        return code
    rows = [[r["problem"], fmt_config(r["config"]), fmt_us(r["time_us"]), fmt_us(r["predicted_us"]),
             fmt_us(r["dense_us"]), fmt_ratio(r["speedup_vs_dense"]),
             f"{r['timed']}/{r['space']}", r["seconds"]] for r in results]
    if rows:
        con.print(table(f"tuned for {db.device_name} ({args.strategy})",
                        ["problem", "best config", "measured us", "predicted us", "dense us", "vs dense",
                         "timed/space", "s"], rows))
    if skipped:
        con.print(table("not re-tuned", ["key", "why"], [[s["key"], s["why"]] for s in skipped]))
    if stopped:
        con.print(f"{stopped}: {len(results) + len(skipped)} of {len(jobs)} problems done; not tuned: "
                  + ", ".join(not_tuned))
    if args.untried and not jobs:
        con.print("no entry needs re-tuning: `stuning db untried` lists none")
    if results and not any(r["measured"] for r in results):
        con.print("Times are the cost model's predictions: nothing was measured.")
    con.print(f"database: {db.write_path}")
    return code


def _run_jobs(jobs: list, bar, task, max_seconds: float | None) -> tuple[list, list, str]:
    """Run (name, job) pairs in order: a job returns (outcome, key), or a string that says why it
    tuned nothing. No job starts after ``max_seconds`` but the first; Ctrl-C stops the job in
    progress, whose problem is then not stored. Returns the results, the skipped and why it stopped."""
    results, skipped, stopped = [], [], ""
    t0 = time.perf_counter()
    try:
        for name, job in jobs:
            elapsed = time.perf_counter() - t0
            if (results or skipped) and max_seconds is not None and elapsed > max_seconds:
                stopped = f"stopped after {elapsed:.0f} s (--max-seconds)"
                break
            bar.update(task, description=name)
            tuned = job()
            if isinstance(tuned, str):
                skipped.append({"key": name, "why": tuned})
            else:
                results.append(_result_row(name, *tuned))
            bar.advance(task)
    except KeyboardInterrupt:
        stopped = f"interrupted after {time.perf_counter() - t0:.0f} s"
    return results, skipped, stopped


def _untried_jobs(args, db, budget) -> list:
    """(key, job) for each entry ``stuning db untried`` lists, of the --op given: the job builds the
    entry's inputs when it runs (one problem in memory at a time) and tunes them, or says why not."""
    from stuning.tuning.coverage import untried_entries
    from stuning.tuning.driver import case_like, entry_problem, tune_problem
    from stuning.tuning.registry import budget_of
    from stuning.tuning.session import target_spec

    def job(key, entry):
        problem, why = entry_problem(key, entry)
        if problem is None:
            return why
        return tune_problem(problem, strategy=args.strategy, budget=budget, db=db,
                            precompile_as=case_like(problem.features))

    ops = None if args.op is None else split_list(args.op, "op", str)
    found = untried_entries(db, budget_of(target_spec(db.device_name)), ops)
    return [(key, functools.partial(job, key, entry)) for key, entry, _ in found]


def _result_row(name: str, outcome, key: str) -> dict:
    return {
        "problem": name, "key": key, "config": outcome.best_config.as_dict(),
        "measured": outcome.measured, "time_us": outcome.best_time_us,
        "predicted_us": outcome.predicted_us, "timed": outcome.timed, "space": outcome.space,
        "seconds": round(outcome.seconds, 2), "failures": outcome.failures,
        "dense_us": outcome.dense_us, "speedup_vs_dense": outcome.speedup_vs_dense,
    }
