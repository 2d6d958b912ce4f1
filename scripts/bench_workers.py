#!/usr/bin/env python3
"""Pretune wall time of one model with 1 and with more worker processes: what ``--workers`` buys.

For each count in ``--workers`` it runs ``stuning pretune --model MODEL --workers N --storage
OUT/workers-N/tune.journal --db OUT/workers-N/db --json`` from an empty database and storage (those
two directories are deleted first), times the whole command (process starts included), and records
the problems tuned, failed and lost to dead workers, each worker's exit code, and the database's
entries and bytes. Each run gets its own, empty Triton cache (``OUT/workers-N/triton-cache``), so no
run reuses another's compiled kernels. The model is built from the same seed every time, so every
run tunes the same problems. Writes ``OUT/workers.csv`` and ``OUT/workers.md`` and prints the table.

    python3 scripts/bench_workers.py --out OUT              # on a machine with 2 GPUs: BERT-base at 90%
    python3 scripts/bench_workers.py --smoke --out /tmp/bw  # tiny encoder on the CPU, synthetic timer

``--smoke`` checks the machinery without a GPU: kernel timing is replaced by stuning's synthetic
timer (``STUNING_SYNTHETIC_TIMER=1``: a pure function of problem and config), the worker processes
run on the CPU, and the numbers say nothing about GPUs.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

COLUMNS = ("workers", "wall_s", "speedup", "problems", "tuned", "skipped", "failed", "lost", "worker_exits",
           "db_entries", "db_bytes")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="results directory")
    ap.add_argument("--model", default="stuning.nn.examples:bert_encoder", help="MODULE:FUNCTION building the model")
    ap.add_argument("--sparsity", default="0.9")
    ap.add_argument("--tokens", default="16,32,64,128,256,512,1024,2048", help="token counts to tune for")
    ap.add_argument("--dtype", default="fp16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--trials", type=int, default=8, help="configs timed per problem")
    ap.add_argument("--seconds", type=float, default=10.0, help="time limit per problem")
    ap.add_argument("--workers", default="1,2", help="worker counts to compare, one run each")
    ap.add_argument("--smoke", action="store_true", help="tiny model on the CPU with the synthetic timer")
    args = ap.parse_args(argv)
    if args.smoke:
        args.model, args.tokens, args.dtype, args.trials = "stuning.nn.examples:tiny_encoder", "16,40", "fp32", 4
    return args


def pretune_command(args, workers: int, run_dir: Path) -> list[str]:
    command = [sys.executable, "-m", "stuning", "pretune", "--model", args.model, "--sparsity", args.sparsity,
               "--tokens", args.tokens, "--dtype", args.dtype, "--trials", str(args.trials), "--seconds",
               str(args.seconds), "--workers", str(workers), "--storage", str(run_dir / "tune.journal"),
               "--db", str(run_dir / "db"), "--json"]
    if args.smoke:
        command += ["--min-size", "0", "--no-check"]
    return command


def run_one(args, workers: int) -> dict:
    run_dir = args.out / f"workers-{workers}"
    shutil.rmtree(run_dir, ignore_errors=True)  # every count starts from nothing to skip
    run_dir.mkdir(parents=True)
    env = dict(os.environ)
    # A cold Triton cache for every count: else the later runs load the kernels the first compiled,
    # and the speedup counts the compile time saved as the workers' doing.
    env["TRITON_CACHE_DIR"] = str(run_dir / "triton-cache")
    if args.smoke:
        env["STUNING_SYNTHETIC_TIMER"] = "1"
    start = time.perf_counter()
    done = subprocess.run(pretune_command(args, workers, run_dir), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (run_dir / "stderr.log").write_text(done.stderr)
    if done.returncode not in (0, 1):  # 1: it ran, and some problem failed (counted below)
        raise SystemExit(f"stuning pretune --workers {workers} exited with {done.returncode}; see {run_dir}/stderr.log")
    report = json.loads(done.stdout)["pretune"]
    db_files = list((run_dir / "db").glob("*.json"))
    return {
        "workers": workers, "wall_s": round(wall, 2), "problems": len(report["problems"]),
        "tuned": report["tuned"], "skipped": report["skipped"], "failed": report["failed"],
        "unsupported": report["unsupported"],
        "lost": len(report["lost"]), "worker_exits": " ".join(str(w["exit_code"]) for w in report["workers"]) or "-",
        "db_entries": sum(len(json.loads(f.read_text())["entries"]) for f in db_files),
        "db_bytes": sum(f.stat().st_size for f in db_files),
    }


def describe_machine(smoke: bool) -> str:
    import torch

    import stuning  # noqa: F401  (sets up the interpreter without a GPU, as the runs do)

    if smoke or not torch.cuda.is_available():
        return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores), synthetic timer"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return f"{len(names)} x {names[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def write(rows: list[dict], args, machine: str) -> str:
    with open(args.out / "workers.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = [f"Pretune of `{args.model}` at sparsity {args.sparsity}, {args.dtype}, tokens {args.tokens}, "
             f"{args.trials} trials / {args.seconds} s per problem; {machine}.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in rows]
    lines += ["", "Command: `python3 scripts/bench_workers.py " + " ".join(sys.argv[1:]) + "`"]
    text = "\n".join(lines) + "\n"
    (args.out / "workers.md").write_text(text)
    return text


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    counts = [int(w) for w in args.workers.split(",")]
    rows = []
    for workers in counts:
        row = run_one(args, workers)
        rows.append(row)
        print(f"{workers} workers: {row['wall_s']} s, {row['tuned']} tuned, {row['failed']} failed", file=sys.stderr)
    base = rows[0]["wall_s"]
    for row in rows:
        row["speedup"] = round(base / row["wall_s"], 2)
    print(write(rows, args, describe_machine(args.smoke)))
    problems = {r["problems"] for r in rows}
    if len(problems) != 1 or any(r["db_entries"] != r["problems"] - r["failed"] - r["unsupported"] for r in rows):
        print("error: the runs did not tune the same, complete set of problems", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
