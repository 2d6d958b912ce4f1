"""Why does a bench row's timing read ~4% over the tuner's re-time of the same callable (call 3)?

The two differ in how long each CUDA-graph timing runs (the bench: ``graph_rep_ms`` 8 ms shared by
3 rounds, 2.7 ms; the tuner's re-time: 25 ms), in the stream (the tuner's runs on a side stream) and
in what ran just before (the tuner's ``bench_us`` runs ``do_bench`` first). Per problem, in turn, 5
rounds each: Triton's graph timer behind the flush (``g_*``) at 2.7 and 25 ms on the default stream,
at 25 ms on a side stream, the tuner's ``bench_us``, the L2 flush alone (the time both subtract) at
2.7 and 25 ms, and the queued replay (``q_*``, below) at 2.7 and 25 ms.

The suspect: ``do_bench_cudagraph`` unrolls rep / estimate calls into its graph, with the estimate
taken from five eager calls, host time included, and it times each replay from an event recorded
before the replay is launched, so the replay's launch (microseconds) is timed and shared among the
calls. A Python launcher with ~100 us of host time (the scatter kernel's) gets few calls per graph,
the flush alone many, and the difference of the two keeps part of a launch: at 2.7 ms, ~0.6 us with
~18 and ~76 calls a graph and a 15-us launch; at 25 ms a tenth of it. cuBLAS's launch is cheap, so
the dense baseline keeps almost none. The queued replay counts the calls from a graph's replay
and queues every timed replay behind a sleep kernel, so neither the host nor the launch is timed.

It ran in session 71 (BENCHMARKS.md 9v) with the queued replay written out here; it then became the
library's ``timing.graph_ms``, under ``flushed_graph_us``. So the ``q_*`` ways now call
``flushed_graph_us``, the ``g_*`` ways ``triton_graph_us`` (the library's timer before 9v, its flush
timed each time rather than cached), and ``tuner`` re-times on the queued replay (in 9v, on Triton's).

python3 benchmarks/session70/graph_rep.py [OUT.csv [SECONDS]]
"""

from __future__ import annotations

import math
import statistics
import sys

import torch
import triton.testing
from bench_vs_tuner import entry_problems, write_csv  # the same problems (this folder is on the path when run)

from stuning.tuning.objective import KernelObjective
from stuning.tuning.registry import family
from stuning.tuning.timing import RETIME_TIMING, _flush_buffer, bench_us, flushed_graph_us

ROUNDS = 5  # as bench_vs_tuner.py
SHORT_MS = 8.0 / 3  # a bench row's graph time per round: graph_rep_ms 8 over 3 rounds


def triton_graph_us(fn, rep_ms: float) -> float:
    """``flushed_graph_us`` as it was before 9v, on Triton's ``do_bench_cudagraph``, flush timed each call."""
    flush = _flush_buffer()

    def cold():
        flush.zero_()
        fn()

    def timed(f):
        return triton.testing.do_bench_cudagraph(f, rep=rep_ms, return_mode="median")

    return max(timed(cold) - timed(flush.zero_), 0.0) * 1e3


def ways(tuned, side):
    flush = _flush_buffer()

    def on_side(rep):
        with torch.cuda.stream(side):
            return triton_graph_us(tuned, rep)

    return {
        "g_short": lambda: triton_graph_us(tuned, SHORT_MS),
        "g_long": lambda: triton_graph_us(tuned, 25),
        "g_long_side": lambda: on_side(25),
        "tuner": lambda: bench_us(tuned, **RETIME_TIMING)[0],
        "flush_short": lambda: triton.testing.do_bench_cudagraph(flush.zero_, rep=SHORT_MS, return_mode="median") * 1e3,
        "flush_long": lambda: triton.testing.do_bench_cudagraph(flush.zero_, rep=25, return_mode="median") * 1e3,
        "q_short": lambda: flushed_graph_us(tuned, rep_ms=SHORT_MS),
        "q_long": lambda: flushed_graph_us(tuned, rep_ms=25),
    }


def main(out_csv: str | None, seconds: float) -> None:
    fam, side = family("spmm"), torch.cuda.Stream()
    rows = []
    for case, problem, entry in entry_problems(seconds):
        config = fam.config_from_dict(entry.best.config)
        objective = KernelObjective(problem)
        objective.check(config)
        fns = ways(objective.timed(config), side)
        times = {w: [] for w in fns}
        for _ in range(ROUNDS):
            for w, fn in fns.items():
                times[w].append(fn())
        row = {"case": case.name, "kernel": entry.best.config.get("kernel")}
        row.update({f"{w}_us": statistics.median(t) for w, t in times.items()})
        rows.append(row)
        print(f"{case.name:36s} " + " ".join(f"{w} {row[f'{w}_us']:7.2f}" for w in fns), flush=True)
    if not rows:
        sys.exit("no exact entries")

    def geo(key):
        return math.exp(sum(math.log(r[key] / r["tuner_us"]) for r in rows) / len(rows))

    print(f"\n{len(rows)} problems; geomean over the tuner's time: "
          + ", ".join(f"{w} {geo(w + '_us'):.3f}x" for w in ("g_short", "g_long", "g_long_side", "q_short", "q_long")))
    short, long = (statistics.median(r[f"flush_{k}_us"] for r in rows) for k in ("short", "long"))
    print(f"flush alone, median over problems: short {short:.2f} us, long {long:.2f} us")
    if out_csv:
        write_csv(out_csv, rows)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None, float(sys.argv[2]) if len(sys.argv) > 2 else math.inf)
