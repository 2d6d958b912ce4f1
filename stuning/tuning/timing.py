"""Timing kernels the way the benchmarks do: medians, warm-up, L2 flushed, graphs for short ones."""

from __future__ import annotations

import statistics
from collections.abc import Callable

GRAPH_BELOW_US = 100.0  # launch overhead (tens of us through a Python launcher) is a visible share below this


def bench_us(fn: Callable[[], object], *, warmup_ms: int = 25, rep_ms: int = 100) -> tuple[float, str]:
    """Median time of ``fn`` in microseconds and the method used ("do_bench" or "cudagraph").

    ``do_bench`` flushes L2 between runs; a kernel under ``GRAPH_BELOW_US`` is re-timed as CUDA-graph
    replays so that the launch overhead of Python does not dominate it.
    """
    import torch
    import triton.testing

    t = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median") * 1e3
    if t >= GRAPH_BELOW_US:
        return t, "do_bench"
    try:
        with torch.cuda.stream(torch.cuda.Stream()):
            g = triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median") * 1e3
        return g, "cudagraph"
    except Exception:  # some launches cannot be captured (host syncs); keep the eager time
        return t, "do_bench"


def retime_alternating(fns: dict, *, rounds: int = 3, timer=None) -> dict:
    """Time several candidates in turn, ``rounds`` times each, and return each one's median.

    Alternating spreads clock and thermal drift over all candidates instead of favouring whichever
    ran first.
    """
    timer = timer or (lambda f: bench_us(f)[0])
    samples: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for key, fn in fns.items():
            samples[key].append(timer(fn))
    return {k: statistics.median(v) for k, v in samples.items()}
