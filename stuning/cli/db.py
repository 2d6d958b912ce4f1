"""``stuning db``: list, show, merge, export, prune the tuning databases; list lookup misses and the
entries whose search never tried a kernel the library has now."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from stuning.cli.errors import EXIT_OK, CLIError
from stuning.cli.output import console, fmt_config, fmt_ratio, fmt_us, print_json, table


def register(sub) -> None:
    p = sub.add_parser("db", help="inspect and maintain the tuning databases")
    dsub = p.add_subparsers(dest="db_command", required=True)

    def add(name, help_text, func):
        q = dsub.add_parser(name, help=help_text)
        q.add_argument("--device", default=None, help="device whose database to use (default: this machine's)")
        q.add_argument("--json", action="store_true")
        q.set_defaults(func=func)
        return q

    add("ls", "the database files on the search path, with their entry counts", _ls)
    q = add("show", "the entries of a device's database", _show)
    q.add_argument("--op", default=None)
    q = add("merge", "merge database files of one device into OUT (with OUT's own entries, if it exists)", _merge)
    q.add_argument("files", nargs="+", type=Path, help="database files of one device")
    q.add_argument("--out", type=Path, required=True,
                   help="the merged file; an existing one is merged too, as every database write merges with "
                        "what is on disk (name a new file to merge only FILES)")
    q = add("export", "write the device's entries (all files on the path) into one file", _export)
    q.add_argument("out", type=Path)
    q.add_argument("--measured-only", action="store_true", help="leave out model-only predictions")
    add("misses", "problems looked up at run time with no entry, most frequent first", _misses)
    q = add("untried", "entries tuned before a kernel joined their op's space or was rebuilt: re-tune them "
                       "(tune --untried, pretune)", _untried)
    q.add_argument("--op", default=None)
    q = add("refit", "refit FILE's cost model on its measured entries, checked first on entries it does not see",
            _refit)
    q.add_argument("file", type=Path)
    q = add("prune", "drop the entries tuned on another device, Triton version or kernel revision from FILE", _prune)
    q.add_argument("file", type=Path)
    q.add_argument("--triton", default=None,
                   help="Triton version whose entries to keep (default: the installed one); with --device, prunes a "
                        "GPU's database from another machine")


def _open(args):
    from stuning.tuning.session import open_db

    return open_db(args.device)


def _ls(args) -> int:
    from stuning.db import db_file_name, default_search_path, load_document
    from stuning.tuning.session import local_device_name

    rows = []
    for directory in default_search_path():
        for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
            if path.name.startswith("misses-"):
                continue
            doc = load_document(path)
            rows.append({"file": str(path), "device": doc["device"]["name"], "entries": len(doc["entries"]),
                         "triton": doc["versions"].get("triton")})
    if args.json:
        print_json({"files": rows, "local_file": db_file_name(args.device or local_device_name())})
        return EXIT_OK
    con = console()
    con.print(table("tuning databases (search order)", ["file", "device", "entries", "triton"],
                    [[r["file"], r["device"], r["entries"], r["triton"]] for r in rows]))
    if not rows:
        con.print("no database files yet: `stuning tune` writes one")
    return EXIT_OK


def _show(args) -> int:
    db = _open(args)
    entries = {k: e for k, e in db.entries().items() if args.op is None or e.op == args.op}
    stale = db.stale_entries()
    if args.json:
        print_json({"device": db.device_name, "files": [str(f) for f in db.files],
                    "entries": {k: {**e.to_json(), "stale": k in stale} for k, e in entries.items()}})
        return EXIT_OK
    # "failed": configs recorded as not running in the entry's environment, which tuning skips there.
    rows = [[k, fmt_config(e.best.config), fmt_us(e.best.time_us), fmt_us(e.predicted_us),
             fmt_ratio(e.speedup_vs_dense),
             "measured" if e.measured else "predicted", len(e.failed) or "", "stale" if k in stale else ""]
            for k, e in sorted(entries.items())]
    console().print(table(f"{db.device_name}: {len(entries)} entries",
                          ["key", "best config", "us", "predicted us", "vs dense", "kind", "failed", ""], rows))
    return EXIT_OK


def _merge(args) -> int:
    from stuning.db import load_document, merge_files

    for f in args.files:
        if not f.is_file():
            raise CLIError(f"no such database file: {f}")
    held = len(load_document(args.out)["entries"]) if args.out.is_file() else None
    doc = merge_files(args.files, args.out)
    if args.json:
        print_json({"out": str(args.out), "entries": len(doc["entries"]), "out_held": held})
    else:
        own = f" and the {held} entries it held" if held is not None else ""
        console().print(f"merged {len(args.files)} file(s){own} into {args.out}: {len(doc['entries'])} entries")
    return EXIT_OK


def _export(args) -> int:
    db = _open(args)
    count = db.export(args.out, measured_only=args.measured_only)
    if args.json:
        print_json({"out": str(args.out), "entries": count})
    else:
        console().print(f"exported {count} entries of {db.device_name} to {args.out}")
    return EXIT_OK


def _misses(args) -> int:
    db = _open(args)
    misses = db.load_misses()
    if args.json:
        print_json({"device": db.device_name, "misses": misses})
        return EXIT_OK
    rows = [[k, m.get("count", 0), m.get("op", "")] for k, m in misses.items()]
    con = console()
    con.print(table(f"lookup misses on {db.device_name}", ["key", "count", "op"], rows))
    if rows:
        con.print("tune them with `stuning tune` (or `stuning pretune` for a model's weights)")
    return EXIT_OK


def _untried(args) -> int:
    import triton

    from stuning.tuning.coverage import kernels_not_installed, untried_entries
    from stuning.tuning.registry import budget_of
    from stuning.tuning.session import target_spec

    db = _open(args)
    ops = None if args.op is None else [args.op]
    listed = untried_entries(db, budget_of(target_spec(db.device_name)), ops)
    found = {key: (entry, untried) for key, entry, untried in listed}
    # Until re-tuned, a sibling device's entry that tried the kernel may answer in the own one's place.
    stand_ins = {key: db.sibling_stand_in(key) for key in found}
    not_judged = kernels_not_installed(ops)
    if args.json:
        print_json({"device": db.device_name, "entries": {k: {"kernel": e.best.config.get("kernel"),
                                                               "time_us": e.best.time_us, "untried": u,
                                                               "answered_by": _stand_in_json(stand_ins[k])}
                                                           for k, (e, u) in found.items()},
                    "not_judged": not_judged})
        return EXIT_OK
    rows = [[k, e.best.config.get("kernel", ""), fmt_us(e.best.time_us), ", ".join(u), e.updated[:10],
             _stand_in_text(stand_ins[k])] for k, (e, u) in found.items()]
    con = console()
    con.print(table(f"{db.device_name}: {len(rows)} entries never tried a kernel of their space, or only "
                    "an older form of it",
                    ["key", "best kernel", "us", "never tried", "tuned", "lookups answered by"], rows))
    if rows:
        con.print("`stuning tune --untried` re-tunes the SpMM and SDDMM ones; `stuning pretune` a model's")
    if any(stand_ins.values()):
        con.print(f"{sum(1 for v in stand_ins.values() if v)} of them answer with a sibling device's entry, whose "
                  "search found a faster kernel they never tried, until re-tuned here")
    if not_judged:
        names = "; ".join(f"{op} {', '.join(kernels)}" for op, kernels in not_judged.items())
        # Without this, a listing taken on a machine without those kernels reads as "nothing to tune".
        con.print(f"[yellow]Not judged: this Triton ({triton.__version__}) cannot run the kernels {names}, so entries "
                  "that never tried them are not listed. Run `stuning db untried` where they run.[/yellow]")
    return EXIT_OK


def _refit(args) -> int:
    from stuning.tuning.model_check import HOLDOUT_EVERY, refit_file

    if not args.file.is_file():
        raise CLIError(f"no such database file: {args.file}")
    report = refit_file(args.file)  # a corrupt or misnamed file: a ValueError naming it (main reports it)
    if args.json:
        print_json({"file": str(args.file), "held_out_every": HOLDOUT_EVERY,
                    "ops": {op: {when: dataclasses.asdict(r) for when, r in d.items()} for op, d in report.items()}})
        return EXIT_OK

    def pct(v):
        return "" if v is None else f"{v:.0%}"

    def err(v):
        return "" if v is None else f"{math.exp(v):.2f}x"

    rows = [[op, d["before"].entries, d["before"].trials, err(d["before"].median_abs_log_error),
             err(d["after"].median_abs_log_error), pct(d["before"].picks_best), pct(d["after"].picks_best)]
            for op, d in report.items()]
    con = console()
    con.print(table(f"cost model on 1 in {HOLDOUT_EVERY} entries, held out: stored fit -> a fit on the others",
                    ["op", "entries", "trials", "median error, stored", "refit", "picks best, stored", "refit"], rows))
    con.print(f"refitted on every measured entry and saved in {args.file}" if rows
              else f"no measured entries in {args.file}: nothing refitted")
    return EXIT_OK


def _prune(args) -> int:
    from stuning.db import prune_stale
    from stuning.tuning.session import local_environment, resolve_device_name

    if not args.file.is_file():
        raise CLIError(f"no such database file: {args.file}")
    keep = local_environment()
    if args.device is not None:
        keep = dataclasses.replace(keep, device=resolve_device_name(args.device))
    if args.triton is not None:
        keep = dataclasses.replace(keep, triton=args.triton)
    dropped = prune_stale(args.file, keep_env=keep)
    if args.json:
        print_json({"file": str(args.file), "dropped": dropped})
    else:
        console().print(f"dropped {dropped} stale entries from {args.file}")
    return EXIT_OK


def _stand_in_json(entry) -> dict | None:
    if entry is None:
        return None
    return {"device": entry.env.get("device"), "kernel": entry.best.config.get("kernel"), "time_us": entry.best.time_us}


def _stand_in_text(entry) -> str:
    if entry is None:
        return "own"
    return f"{entry.env.get('device')}: {entry.best.config.get('kernel')} {fmt_us(entry.best.time_us)}"
