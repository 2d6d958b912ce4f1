"""Where a tuning trial's wall time goes, and how much shorter timing changes what a search sees.

A 20 s `stuning tune` of one SpMM problem timed 9-18 configs on the H200 (BENCHMARKS.md 8b, 8d), out
of a space of ~940. For each of the cost model's favourite configs of a few problems this measures the
first check (compile, run, compare with the reference) and then ``bench_us`` with the tuner's
settings (do_bench 25 + 100 ms, graph replays 100 ms) twice and with shorter settings three times:
the wall time of each and the times it returns. Shorter settings pay if their times rank configs
as the full ones do, within the full ones' own spread.

    PROBE_PROBLEMS=11008x4096:128:0.9,3072x768:128:0.95 PROBE_TOP=12 python3 scripts/probe_tuner_trial_cost.py

Writes ``$OUT/tuner_trial_cost.json``; prints a table per problem and a summary last.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import torch

from stuning.suite import SpMMCase
from stuning.tuning.device import local_spec
from stuning.tuning.objective import KernelObjective
from stuning.tuning.problems import build_problem
from stuning.tuning.registry import budget_of, family
from stuning.tuning.search.base import TrialFailure
from stuning.tuning.session import model_for, open_db
from stuning.tuning.timing import bench_us

OUT = os.environ.get("OUT", ".")
PROBLEMS = os.environ.get("PROBE_PROBLEMS", "11008x4096:128:0.9,3072x768:128:0.95,4096x4096:16:0.95")
TOP = int(os.environ.get("PROBE_TOP", "12"))
# name -> (bench_us keyword arguments, repeats)
SETTINGS = {
    "full": ({}, 2),
    "mid": ({"warmup_ms": 10, "rep_ms": 25, "graph_rep_ms": 25}, 3),
    "light": ({"warmup_ms": 5, "rep_ms": 10, "graph_rep_ms": 10}, 3),
}


def parse(item: str) -> SpMMCase:
    shape, n, sparsity = item.split(":")
    m, k = (int(x) for x in shape.split("x"))
    return SpMMCase(m, k, int(n), float(sparsity), 0.0, "fp16")


def probe(case: SpMMCase, model) -> list[dict]:
    problem = build_problem(case)
    spec = local_spec()
    space = family("spmm").space(problem.features, budget_of(spec))
    ranked = model.rank(problem.features, space)[:TOP]
    objective = KernelObjective(problem)
    rows = []
    for config, predicted in ranked:
        row = {"config": config.as_dict(), "predicted_us": predicted}
        t0 = time.perf_counter()
        try:
            objective.check(config)
        except TrialFailure as e:
            row["failed"] = str(e)
            rows.append(row)
            continue
        row["check_s"] = time.perf_counter() - t0
        fn = objective.timed(config)
        for name, (options, repeats) in SETTINGS.items():
            walls, times = [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                times.append(bench_us(fn, **options)[0])
                walls.append(time.perf_counter() - t0)
            row[name] = {"us": times, "wall_s": walls}
        rows.append(row)
    return rows


def summarize(rows: list[dict]) -> dict:
    ok = [r for r in rows if "failed" not in r]
    full = {i: statistics.mean(r["full"]["us"]) for i, r in enumerate(ok)}
    summary = {"configs": len(rows), "failed": len(rows) - len(ok),
               "check_s": statistics.mean(r["check_s"] for r in ok)}
    full_spread = max(abs(r["full"]["us"][0] - r["full"]["us"][1]) / full[i] for i, r in enumerate(ok))
    best = min(full, key=full.get)
    for name in SETTINGS:
        worst = max(abs(t - full[i]) / full[i] for i, r in enumerate(ok) for t in r[name]["us"])
        # Which config each single run of this setting would have picked, and how far it is from the best.
        picks = [min(range(len(ok)), key=lambda i, j=j: ok[i][name]["us"][j]) for j in range(SETTINGS[name][1])]
        summary[name] = {
            "wall_s": statistics.mean(w for r in ok for w in r[name]["wall_s"]),
            "worst_vs_full": worst,
            "picked_loss": max(full[p] / full[best] - 1 for p in picks),
        }
    summary["full_spread"] = full_spread
    return summary


def main() -> None:
    model = model_for(open_db(), local_spec())
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "settings": SETTINGS,
              "problems": {}}
    for item in PROBLEMS.split(","):
        case = parse(item)
        rows = probe(case, model)
        report["problems"][item] = {"rows": rows, "summary": summarize(rows)}
        print(f"\n{item}: check (compile) / wall per timing, s; us per run")
        for r in rows:
            if "failed" in r:
                print(f"  {r['config']}: {r['failed'][:80]}")
                continue
            cells = "  ".join(f"{n} {statistics.mean(r[n]['wall_s']):.2f}s "
                              + "/".join(f"{t:.2f}" for t in r[n]["us"]) for n in SETTINGS)
            print(f"  {r['config'].get('kernel')} check {r['check_s']:.2f}s  {cells}")
        with open(os.path.join(OUT, "tuner_trial_cost.json"), "w") as f:
            json.dump(report, f, indent=1)
    print("\nproblem                 check_s  " + "  ".join(f"{n}: wall_s worst picked_loss" for n in SETTINGS)
          + "  full_spread")
    for item, p in report["problems"].items():
        s = p["summary"]
        cells = "  ".join(f"{n}: {s[n]['wall_s']:.2f} {s[n]['worst_vs_full']:.1%} {s[n]['picked_loss']:.1%}"
                          for n in SETTINGS)
        print(f"{item:24s} {s['check_s']:.2f}  {cells}  {s['full_spread']:.1%}")


if __name__ == "__main__":
    main()
