"""Timing the implementations of one benchmark row with one method, or one config of a sweep.

On a GPU every implementation of a row is probed first (host time per call, and GPU time with its
launches queued behind a sleep kernel). The row is then timed with ``do_bench`` (median, L2 flushed
before every call) or, when some implementation runs under ``graph_below_us`` or takes longer on the
host than do_bench's L2 flush keeps the GPU busy, with CUDA-graph replays (``flushed_graph_us``:
median, L2 flushed inside the graph), where do_bench would time the launch. One method per row keeps
the ratios within a row fair, and so do rounds: the implementations are timed in turn, ``rounds``
times, each time for a share of the budget, and each keeps the median of its rounds, so a drift of
the GPU's clocks over a row (the dense Llama-7B block at 8192 tokens ran 2705-3461 us from run to
run) falls on all of them alike. Through Triton's interpreter there is no GPU time: the wall clock
of a few calls is taken, and every result says so.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from stuning.bench import error_text
from stuning.tuning.timing import GRAPH_BELOW_US, bench_us, flushed_graph_us, host_us, retime_alternating

WALL_CLOCK = "perf_counter"  # the `timing` of a result taken through the interpreter
WALL_CLOCK_NOTE = "no GPU: wall clock through Triton's interpreter, not a GPU time"


def timing_label(on_gpu: bool, *, per_row: bool) -> str:
    """How a run's times were taken, in words: rows of implementations (bench) or single configs (sweep)."""
    if not on_gpu:
        return "interpreter: wall clock of Triton's interpreter on the CPU, not GPU times"
    if per_row:
        return "GPU: do_bench medians (L2 flushed) or CUDA-graph replays, one method per row"
    return f"GPU: do_bench medians (L2 flushed), CUDA-graph replays for configs under {GRAPH_BELOW_US:g} us"


@dataclass(frozen=True)
class TimerSettings:
    graph_below_us: float = GRAPH_BELOW_US
    warmup_ms: float = 10.0
    rep_ms: float = 40.0
    graph_rep_ms: float = 8.0
    rounds: int = 3  # the implementations of a row are timed in turn this many times (GPU only)


@dataclass
class RowTiming:
    times_us: dict[str, float | None] = field(default_factory=dict)
    probes: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (host us, GPU us)
    method: str = ""
    note: str = ""


def wall_clock_us(fn: Callable[[], object], repeats: int = 3) -> float:
    """Median wall-clock time of ``fn`` after one untimed call (the interpreter's first call traces)."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def config_timer(on_gpu: bool, *, warmup_ms: float = 25, rep_ms: float = 100) -> Callable:
    """``fn -> (us, method)`` for timing one config: the tuner's own timer on a GPU, else the wall clock."""
    if on_gpu:
        return lambda fn: bench_us(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
    return lambda fn: (wall_clock_us(fn), WALL_CLOCK)


class RowTimer:
    """Probes each implementation of a row, picks one method for the row, and times with it."""

    def __init__(self, settings: TimerSettings, on_gpu: bool):
        self.settings = settings
        self.on_gpu = on_gpu
        self.cycles_per_us = 1500.0
        self.flush_us = 0.0
        if on_gpu:
            self._calibrate()

    def _calibrate(self) -> None:
        import torch
        from triton import runtime

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # warm up the sleep kernel
        start.record()
        torch.cuda._sleep(2_000_000)
        end.record()
        torch.cuda.synchronize()
        self.cycles_per_us = 2_000_000 / max(1.0, start.elapsed_time(end) * 1e3)
        # How long do_bench's L2 flush keeps the GPU busy: host work up to that long is hidden.
        cache = runtime.driver.active.get_empty_cache_for_benchmark()
        runtime.driver.active.clear_cache(cache)
        start.record()
        for _ in range(5):
            runtime.driver.active.clear_cache(cache)
        end.record()
        torch.cuda.synchronize()
        self.flush_us = start.elapsed_time(end) / 5 * 1e3

    def probe(self, fn) -> tuple[float, float]:
        """(host us, GPU us) per call, unflushed. The GPU time is taken with the calls queued behind a
        sleep kernel, so the launches are all issued before the GPU reaches them."""
        if not self.on_gpu:
            t0 = time.perf_counter()
            fn()
            t = (time.perf_counter() - t0) * 1e6
            return t, t
        import torch

        host = host_us(fn)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int(self.cycles_per_us * (6 * host + 100)))
        start.record()
        for _ in range(3):
            fn()
        end.record()
        torch.cuda.synchronize()
        return host, start.elapsed_time(end) / 3 * 1e3

    def choose(self, probes: dict[str, tuple[float, float]]) -> tuple[str, str]:
        """One method for the whole row, and why."""
        if not self.on_gpu:
            return WALL_CLOCK, WALL_CLOCK_NOTE
        thr = self.settings.graph_below_us
        fastest = min(probes, key=lambda k: probes[k][1])
        if probes[fastest][1] < thr:
            return "cudagraph", f"{fastest} runs in {probes[fastest][1]:.0f} us < {thr:g} us"
        # do_bench flushes L2 before each call, which hides up to flush_us of host work. Host work
        # past that delays the call's launches behind the start event, and the GPU work after the
        # last launch cannot overlap it, so any longer launch leaks into the time: fp32 SpMM rows
        # with 196-206 us of host time on 143-148 us kernels were timed at 268-308 us (BENCHMARKS.md
        # 9m) by the earlier rule, host > GPU + flush.
        slow = [k for k, (h, _) in probes.items() if h > self.flush_us]
        if slow:
            return "cudagraph", "host-bound: " + ", ".join(f"{k} {probes[k][0]:.0f} us" for k in slow)
        return "do_bench", ""

    def measure_us(self, fn, method: str, share: float = 1.0) -> float:
        """``fn``'s time by ``method``, spending ``share`` of the settings' repetition budget."""
        if method == WALL_CLOCK:
            return wall_clock_us(fn)
        import triton.testing

        s = self.settings
        if method == "cudagraph":
            return flushed_graph_us(fn, rep_ms=s.graph_rep_ms * share)
        return triton.testing.do_bench(fn, warmup=s.warmup_ms, rep=s.rep_ms * share, return_mode="median") * 1e3

    def rounds(self) -> int:
        return max(1, self.settings.rounds) if self.on_gpu else 1  # the interpreter's wall clock: once


def time_row(timer: RowTimer, impls: dict) -> RowTiming:
    """Probe, then time every implementation of a row with one method.

    ``impls`` maps a name to a callable (None: not available). A path that fails its probe or its
    timing is left out of the times, and its error goes into the note.
    """
    probes, errors = {}, {}
    for name, fn in impls.items():
        if fn is None:
            continue
        try:
            probes[name] = timer.probe(fn)
        except Exception as e:
            errors[name] = error_text(e)
    if not probes:
        return RowTiming(note="; ".join(f"{k}: {v}" for k, v in errors.items()))
    method, why = timer.choose(probes)
    try:
        times = _in_rounds(timer, impls, list(probes), method, errors, raise_first=method == "cudagraph")
    except _CaptureFailed as failed:
        # One method per row: time the whole row again with do_bench.
        method, why = "do_bench", f"{why}; cudagraph failed for {failed.name}: {error_text(failed.error, 120)}"
        errors = {k: v for k, v in errors.items() if k not in probes}
        times = _in_rounds(timer, impls, list(probes), method, errors, raise_first=False)
    note = "; ".join([why] * bool(why) + [f"{k}: {v}" for k, v in errors.items()])
    return RowTiming(times, probes, method, note)


class _CaptureFailed(Exception):
    def __init__(self, name: str, error: Exception):
        super().__init__(name)
        self.name, self.error = name, error


def _in_rounds(timer: RowTimer, impls: dict, names: list[str], method: str, errors: dict, *,
               raise_first: bool) -> dict[str, float | None]:
    """Each of ``names`` timed in turn, ``timer.rounds()`` times; the median of its rounds. A path
    that fails is dropped from later rounds with its error noted (or, ``raise_first``, stops all)."""
    rounds = timer.rounds()

    def timed(name):
        def measure():
            try:
                return timer.measure_us(impls[name], method, share=1.0 / rounds)
            except Exception as e:  # a path that cannot be timed (or captured) this way
                _synchronize_quietly(timer.on_gpu)
                if raise_first:
                    raise _CaptureFailed(name, e) from e
                raise
        return measure

    failures = None if raise_first else {}
    times = retime_alternating({name: timed(name) for name in names if name not in errors}, rounds=rounds,
                               timer=lambda measure: measure(), failures=failures)
    errors.update({name: error_text(e) for name, e in (failures or {}).items()})
    return {name: times.get(name) for name in names}


def _synchronize_quietly(on_gpu: bool) -> None:
    # After a failed launch the error may surface at the next synchronize; it is already recorded.
    if on_gpu:
        import torch

        with contextlib.suppress(Exception):
            torch.cuda.synchronize()
