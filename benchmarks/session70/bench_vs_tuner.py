"""Is `stuning bench` slower than the tuner on the same config, or does the tuner keep a lucky time?

BENCHMARKS.md 9t found bench rows at 1.04x (fp16) their entries' recorded best on the entries' own
configs, most on 3-25 us kernels, while cuBLAS's times matched. This times, per fp16 SpMM problem of
the first table at N = 16 and 128, 90-98% and no row skew, that has an exact entry, the entry's
config four ways, in turn, ROUNDS times each (one round: every way once), and prints each way's
median against the entry:

  tuner     the tuner's re-time of a finalist: ``KernelObjective.retimer`` on its own inputs
  rowtimer  the tuner's inputs and launch, timed as a bench row times (``RowTimer.measure_us``)
  api       the tuner's inputs through ``stuning.spmm(config=...)``, timed as a bench row
  bench     the bench's own inputs (rows padded to 4) through ``stuning.spmm``, as a bench row

python3 benchmarks/session70/bench_vs_tuner.py [OUT.csv [SECONDS]]   # no new problem after SECONDS
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
import time

import torch

import stuning
from stuning.bench.baselines import spmm_inputs
from stuning.bench.timer import RowTimer, TimerSettings
from stuning.suite import preset
from stuning.tuning.objective import KernelObjective
from stuning.tuning.problems import spmm_problem
from stuning.tuning.registry import family
from stuning.tuning.session import key_for, open_db

ROUNDS = 5
WAYS = ("tuner", "rowtimer", "api", "bench")


def entry_problems(seconds: float = math.inf):
    """(case, problem, its exact entry) for the problems above, none started after ``seconds``."""
    t0 = time.monotonic()
    db = open_db()
    cases = preset("first-table", ops=["spmm"], dtypes=["fp16"], ns=[16, 128], sparsities=[0.9, 0.95, 0.98],
                   skews=[0.0])["spmm"]
    for case in cases:
        if time.monotonic() - t0 > seconds:
            print(f"stopped after {seconds:g} s")
            return
        problem = spmm_problem(case, seed=0)
        entry = db.get(key_for(problem.features))
        if entry is not None and entry.best.time_us is not None:
            yield case, problem, entry


def main(out_csv: str | None, seconds: float) -> None:
    fam = family("spmm")
    settings = TimerSettings()
    timer = RowTimer(settings, on_gpu=True)
    share = 1.0 / settings.rounds  # a bench row times each implementation for this share a round
    rows = []
    for case, problem, entry in entry_problems(seconds):
        times = time_case(case, problem, fam.config_from_dict(entry.best.config), timer, share)
        row = {"case": case.name, "kernel": entry.best.config.get("kernel"), "entry_us": entry.best.time_us}
        for w in WAYS:
            row[f"{w}_us"] = statistics.median(times[w])
            row[f"{w}_min_us"] = min(times[w])
        rows.append(row)
        print(f"{case.name:40s} {row['kernel']:8s} entry {row['entry_us']:7.2f}  "
              + "  ".join(f"{w} {row[f'{w}_us']:7.2f}" for w in WAYS), flush=True)
    if not rows:
        sys.exit("no exact entries for these problems in the database")

    def geo(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    print(f"\n{len(rows)} problems, {ROUNDS} rounds; geomean of each way's median over the entry's best"
          " (and over the tuner's re-time):")
    for w in WAYS:
        vs_entry = geo([r[f"{w}_us"] / r["entry_us"] for r in rows])
        vs_tuner = geo([r[f"{w}_us"] / r["tuner_us"] for r in rows])
        best = geo([r[f"{w}_min_us"] / r["entry_us"] for r in rows])
        print(f"  {w:9s} median {vs_entry:.3f}x entry, {vs_tuner:.3f}x tuner; fastest of rounds {best:.3f}x entry")
    if out_csv:
        write_csv(out_csv, rows)


def write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def time_case(case, problem, config, timer: RowTimer, share: float) -> dict[str, list[float]]:
    """Each way's ROUNDS times (us) of ``config`` on ``case``, the ways taken in turn each round."""
    objective = KernelObjective(problem)
    objective.check(config)
    tuned = objective.timed(config)
    a, b = problem.inputs["a"], problem.inputs["b"]
    out = problem.output()
    gen = torch.Generator(device="cuda").manual_seed(1)
    bench_in = spmm_inputs(case, device="cuda", generator=gen, pad_to=4, on_gpu=True)
    fns = {
        "tuner": lambda: objective.retimer(tuned),
        "rowtimer": lambda: timer.measure_us(tuned, "cudagraph", share),
        "api": lambda: timer.measure_us(lambda: stuning.spmm(a, b, config=config, out=out), "cudagraph", share),
        "bench": lambda: timer.measure_us(lambda: bench_in.run_stuning(config), "cudagraph", share),
    }
    times = {w: [] for w in WAYS}
    for _ in range(ROUNDS):
        for w in WAYS:
            times[w].append(fns[w]())
    return times


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None, float(sys.argv[2]) if len(sys.argv) > 2 else math.inf)
