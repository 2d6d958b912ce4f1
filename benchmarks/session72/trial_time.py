"""What does a graph-timed screen cost, and does bounding a graph's calls by host time change its value?

Session 71's ``graph_ms`` counts a graph's calls from a replay's GPU time, so a launcher with much
host time (the scatter kernel's, ~100 us a call) captures many calls: the estimate was ~33 ms of
capture against ~10 ms a screened trial. The branch ``bounded-graph-calls`` counts them at the slower
of GPU and host time. This times, per fp16 SpMM problem of the first table at N = 16 and 128 that has
an exact entry (bench_vs_tuner.py's problems), the entry's config and one seeded config of each other
kernel, through ``flushed_graph_us`` at the screen's replay time, both ways in turn, ROUNDS times:

  gpu      main's count: ``host_us`` seen as 0 by ``graph_ms``
  bounded  the branch's count

and prints per config the calls per graph, wall ms per timing and each way's median time (us), then
the geomean of bounded over gpu times, and the wall time of both ways over all configs.

python3 benchmarks/session72/trial_time.py [OUT.csv [SECONDS]]   # no new problem after SECONDS
"""

from __future__ import annotations

import csv
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session70"))
from bench_vs_tuner import entry_problems  # noqa: E402

from stuning.tuning import timing  # noqa: E402
from stuning.tuning.objective import KernelObjective  # noqa: E402
from stuning.tuning.registry import family  # noqa: E402
from stuning.tuning.timing import SCREEN_TIMING, flushed_graph_us  # noqa: E402

ROUNDS = 3
WAYS = ("gpu", "bounded")


def configs_to_time(fam, problem, entry, rng):
    """The entry's best config, then one seeded config of each other kernel in the space."""
    best = fam.config_from_dict(entry.best.config)
    by_kernel: dict[str, list] = {}
    for c in fam.space(problem.features):
        by_kernel.setdefault(c.kernel, []).append(c)
    return [best] + [rng.choice(cs) for k, cs in sorted(by_kernel.items()) if k != best.kernel]


def timed_once(way: str, fn) -> tuple[float, float, list[int]]:
    """(us, wall ms, calls of the timed graph) of one ``flushed_graph_us`` at the screen's rep.

    ``graph_ms`` captures one call, then the timed graph where it holds more; both come before any
    capture of the flush alone, which ``flushed_graph_us`` times after (and only now and then)."""
    captured, capture = [], timing._captured
    real_host_us = timing.host_us
    timing._captured = lambda f, calls: captured.append(calls) or capture(f, calls)
    if way == "gpu":
        timing.host_us = lambda f: 0.0
    try:
        t0 = time.perf_counter()
        us = flushed_graph_us(fn, rep_ms=SCREEN_TIMING["graph_rep_ms"])
        return us, (time.perf_counter() - t0) * 1e3, max(captured[:2])
    finally:
        timing._captured, timing.host_us = capture, real_host_us


def main(out_csv: str | None, seconds: float) -> None:
    fam = family("spmm")
    rng = random.Random(0)
    rows = []
    for case, problem, entry in entry_problems(seconds):
        objective = KernelObjective(problem)
        for i, config in enumerate(configs_to_time(fam, problem, entry, rng)):
            try:
                objective.check(config)
            except Exception as e:  # a seeded config may not fit; the entry's always does
                print(f"{case.name:40s} {config.kernel:8s} skipped: {e}")
                continue
            fn = objective.timed(config)
            host = timing.host_us(fn)
            got = {w: [] for w in WAYS}
            for _ in range(ROUNDS):
                for w in WAYS:
                    got[w].append(timed_once(w, fn))
            row = {"case": case.name, "kernel": config.kernel, "entry_best": i == 0,
                   "host_us": round(host, 1)}
            for w in WAYS:
                row[f"{w}_us"] = statistics.median(g[0] for g in got[w])
                row[f"{w}_wall_ms"] = statistics.median(g[1] for g in got[w])
                row[f"{w}_calls"] = got[w][0][2]
            rows.append(row)
            print(f"{case.name:40s} {row['kernel']:8s} host {host:6.1f} us  "
                  + "  ".join(f"{w} {row[f'{w}_us']:7.2f} us {row[f'{w}_calls']:5d} calls "
                              f"{row[f'{w}_wall_ms']:6.1f} ms" for w in WAYS), flush=True)
    if not rows:
        sys.exit("no exact entries for these problems in the database")
    ratio = math.exp(statistics.fmean(math.log(r["bounded_us"] / r["gpu_us"]) for r in rows))
    walls = {w: sum(r[f"{w}_wall_ms"] for r in rows) for w in WAYS}
    host_bound = [r for r in rows if r["bounded_calls"] < r["gpu_calls"]]
    print(f"\n{len(rows)} configs, {ROUNDS} rounds; bounded/gpu time geomean {ratio:.3f}x; "
          f"wall per timing: gpu {walls['gpu'] / len(rows):.1f} ms, bounded {walls['bounded'] / len(rows):.1f} ms")
    if host_bound:
        hb = math.exp(statistics.fmean(math.log(r["bounded_us"] / r["gpu_us"]) for r in host_bound))
        print(f"{len(host_bound)} with fewer calls bounded: time {hb:.3f}x; wall "
              f"{sum(r['gpu_wall_ms'] for r in host_bound) / len(host_bound):.1f} -> "
              f"{sum(r['bounded_wall_ms'] for r in host_bound) / len(host_bound):.1f} ms")
    if out_csv:
        with open(out_csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None, float(sys.argv[2]) if len(sys.argv) > 2 else math.inf)
