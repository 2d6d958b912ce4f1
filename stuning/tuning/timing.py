"""Timing kernels the way the benchmarks do: medians, warm-up, L2 flushed, graphs for short ones."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

# The revision of how ``bench_us`` times (recorded in each database entry's ``env.timer``): "2" is
# graph replays behind an L2 flush; "1" replayed graphs with L2 warm, which flattered any operand
# smaller than L2 (50 MB on the H200), so its times do not compare with these.
# ``graph_ms`` replacing Triton's graph timer left it at "2": at the tuner's 25-ms re-time the two
# read within 1% of each other (BENCHMARKS.md 9v); only short timings, such as a bench row's, moved.
TIMER_REVISION = "2"
GRAPH_BELOW_US = 100.0  # launch overhead (tens of us through a Python launcher) is a visible share below this
# A launch whose host time is this share of do_bench's time or more may be what do_bench timed: the
# GPU waits for the host between calls. The scatter SpMM launcher (TMA descriptors, Gluon) spends
# ~80-150 us of host time on a ~22 us kernel, and do_bench timed some of its configs at 116-219 us
# (BENCHMARKS.md 7s): over GRAPH_BELOW_US, so they were never re-timed in a graph, and lost.
HOST_BOUND_SHARE = 0.25
# A search times many configs and keeps a few (BENCHMARKS.md 8d, H200): ``bench_us``'s defaults took
# ~1 s a config, these ~0.1 s, their times within 3% of the defaults' and the same best of each 12.
# A tuning run then re-times its finalists in turn with RETIME_TIMING (~0.25 s, within 2%).
SCREEN_TIMING = {"warmup_ms": 5, "rep_ms": 10, "graph_rep_ms": 10}
RETIME_TIMING = {"warmup_ms": 10, "rep_ms": 25, "graph_rep_ms": 25}


def bench_us(fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100,
             graph_rep_ms: float | None = None) -> tuple[float, str]:
    """Median time of ``fn`` in microseconds and the method used ("do_bench" or "cudagraph").

    ``do_bench`` flushes L2 between runs; a kernel under ``GRAPH_BELOW_US``, or one whose launch
    takes ``HOST_BOUND_SHARE`` of that time on the host, is re-timed as CUDA-graph replays
    (``flushed_graph_us``, L2 flushed too, ``graph_rep_ms`` of replays; default ``rep_ms``) so that
    the launch overhead of Python does not dominate it.
    """
    import triton.testing

    t = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median") * 1e3
    if t >= GRAPH_BELOW_US and host_us(fn) < HOST_BOUND_SHARE * t:
        return t, "do_bench"
    try:  # graph_ms captures on a side stream of its own
        return flushed_graph_us(fn, rep_ms=rep_ms if graph_rep_ms is None else graph_rep_ms), "cudagraph"
    except Exception:  # some launches cannot be captured (host syncs); keep the eager time
        return t, "do_bench"


def host_us(fn: Callable[[], object], calls: int = 5) -> float:
    """Median host time of one call of ``fn`` (its launch, not its GPU time), after one untimed
    call; the median, so that one slow call (a GC pause, an allocation) is not taken for the launch."""
    import torch

    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def flushed_graph_us(fn: Callable[[], object], *, rep_ms: float = 100) -> float:
    """Median time of ``fn`` in CUDA-graph replays, each call behind an L2 flush captured in the same
    graph, less the flush's own time: no launch overhead, and a cold L2 as ``do_bench`` times.

    Plain replays keep every operand smaller than L2 resident from one call to the next, which
    flattered the sparse kernels (a 90%-sparse 4096x4096 fp16 weight is 10 MB) against their dense
    baseline (34 MB); in a model the other layers' weights evict it between calls.
    """
    flush = _flush_buffer()

    def cold():
        flush.zero_()
        fn()

    both = graph_ms(cold, rep_ms=rep_ms)
    alone = _flush_ms(flush, rep_ms)
    # The difference of two medians can dip below zero for a kernel far shorter than the flush.
    return max(both - alone, 0.0) * 1e3 or 1e-3


_FLUSH_BUFFERS: dict = {}
# The flush alone, per buffer and rep_ms: (ms, when timed). A tuner times configs back to back, and
# timing the flush again for each would double its cost; it is re-timed after a while, as clocks drift.
_FLUSH_TIMES: dict = {}
FLUSH_RETIME_S = 5.0


def _flush_ms(flush, rep_ms: float) -> float:
    key = (id(flush), rep_ms)
    hit = _FLUSH_TIMES.get(key)
    if hit is None or time.monotonic() - hit[1] > FLUSH_RETIME_S:
        hit = _FLUSH_TIMES[key] = (graph_ms(flush.zero_, rep_ms=rep_ms), time.monotonic())
    return hit[0]


# Each timed replay waits behind a sleep kernel of this many GPU cycles (~200 us at an H100's or
# H200's clocks), longer than the host takes to launch a replay.
QUEUE_CYCLES = 400_000


def graph_ms(fn: Callable[[], object], *, rep_ms: float, retries: int = 10) -> float:
    """Median GPU time of one call of ``fn`` in CUDA-graph replays, in milliseconds.

    ``triton.testing.do_bench_cudagraph`` does the same with two habits that overcharge a launcher
    with much host time, such as the scatter kernel's (~100 us a call): it unrolls rep / estimate calls
    into its graph, the estimate taken from eager calls that run at the host's pace, and it starts
    its clock before it launches a replay, so the launch is timed and shared among the calls. Few
    calls share it for such a launcher and many for the flush alone, and ``flushed_graph_us``'s
    difference kept up to a microsecond (BENCHMARKS.md 9u). Here each timed replay queues behind a
    sleep kernel, so the clock starts on the GPU after the replay is already launched, and a graph
    holds the calls that fit ``rep_ms`` at the slower of a call's GPU time (one replay's) and its
    launch's host time (``host_us``), which a capture spends on every call.
    """
    import torch

    with torch.cuda.stream(torch.cuda.Stream()):
        fn()  # compiles and allocates outside the capture
        once = _captured(fn, 1)
        estimate = min(_replay_ms(once, 1) for _ in range(3))
        # A capture launches every call on the host, so calls counted from GPU time alone kept a
        # launcher with more host time than GPU time capturing for longer than its replays run. The
        # replays queue, so their launch is not timed and fewer calls cost no accuracy.
        calls = max(1, int(rep_ms / max(estimate, host_us(fn) / 1e3, 1e-4)))
        graph = once if calls == 1 else _captured(fn, calls)
        return statistics.median(_replay_ms(graph, calls) for _ in range(retries))


def _captured(fn: Callable[[], object], calls: int):
    import torch

    graph = torch.cuda.CUDAGraph()
    # A collection during capture may run finalizers that touch the GPU; Triton's timer pauses it too.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
    finally:
        if collecting:
            gc.enable()
    return graph


def _replay_ms(graph, calls: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(QUEUE_CYCLES)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def _flush_buffer():
    """Twice the device's L2 in bytes: writing it evicts everything a timed call left there."""
    import torch

    device = torch.cuda.current_device()
    if device not in _FLUSH_BUFFERS:
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20
        _FLUSH_BUFFERS[device] = torch.empty(2 * l2 // 4, dtype=torch.int32, device=f"cuda:{device}")
    return _FLUSH_BUFFERS[device]


def retime_alternating(fns: dict, *, rounds: int = 3, timer=None, failures: dict | None = None) -> dict:
    """Time several candidates in turn, ``rounds`` times each, and return each one's median.

    Alternating spreads clock and thermal drift over all candidates instead of favouring whichever
    ran first. ``failures``: where given, a candidate whose timing raises is recorded there (key ->
    exception) and left out of later rounds, its median None; otherwise the exception propagates.
    """
    timer = timer or (lambda f: bench_us(f)[0])
    samples: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for key, fn in fns.items():
            if failures is not None and key in failures:
                continue
            try:
                samples[key].append(timer(fn))
            except Exception as e:
                if failures is None:
                    raise
                failures[key] = e
    return {k: None if failures and k in failures else statistics.median(v) for k, v in samples.items()}
