"""Graph timing with L2 flushed: the flush is captured with each call, then subtracted; and which
timer a config gets."""

from __future__ import annotations

import contextlib
import time

import pytest
import torch
import triton.testing

from stuning.tuning import timing


class FakeFlush:
    def __init__(self, calls: list):
        self.calls = calls

    def zero_(self):
        self.calls.append("flush")


def _fake_graph_timer(calls: list, ms_of: dict):
    def graph_ms(fn, *, rep_ms):
        start = len(calls)
        fn()  # one call stands for a replay: record what the graph would hold
        return ms_of[tuple(calls[start:])]

    return graph_ms


@pytest.fixture(autouse=True)
def no_flush_timed_yet(monkeypatch):
    monkeypatch.setattr(timing, "_FLUSH_TIMES", {})


def test_each_call_runs_behind_a_flush_and_the_flush_alone_is_subtracted(monkeypatch):
    calls: list = []
    monkeypatch.setattr(timing, "_flush_buffer", lambda: FakeFlush(calls))
    monkeypatch.setattr(timing, "graph_ms", _fake_graph_timer(calls, {("flush", "kernel"): 0.0412, ("flush",): 0.0350}))
    us = timing.flushed_graph_us(lambda: calls.append("kernel"), rep_ms=7)
    assert us == pytest.approx(6.2)
    assert calls == ["flush", "kernel", "flush"]


def test_a_difference_lost_in_noise_is_still_a_positive_time(monkeypatch):
    calls: list = []
    monkeypatch.setattr(timing, "_flush_buffer", lambda: FakeFlush(calls))
    monkeypatch.setattr(timing, "graph_ms", _fake_graph_timer(calls, {("flush", "kernel"): 0.0349, ("flush",): 0.0350}))
    assert 0 < timing.flushed_graph_us(lambda: calls.append("kernel")) < 0.01


def test_the_flush_alone_is_timed_again_only_after_a_while(monkeypatch):
    calls: list = []
    flush = FakeFlush(calls)
    monkeypatch.setattr(timing, "_flush_buffer", lambda: flush)
    monkeypatch.setattr(timing, "graph_ms", _fake_graph_timer(calls, {("flush", "kernel"): 0.0412, ("flush",): 0.0350}))
    clock = [100.0]
    monkeypatch.setattr(timing.time, "monotonic", lambda: clock[0])
    for _ in range(3):
        assert timing.flushed_graph_us(lambda: calls.append("kernel")) == pytest.approx(6.2)
    assert calls.count("flush") == 3 + 1  # one per timed call, and the flush timed alone once
    clock[0] += timing.FLUSH_RETIME_S + 1
    timing.flushed_graph_us(lambda: calls.append("kernel"))
    assert calls[-2:] == ["kernel", "flush"]


class FakeGraph:
    def __init__(self, calls: int):
        self.calls = calls


@pytest.fixture
def fake_graphs(monkeypatch):
    """graph_ms with capture, replay and the launch's host time replaced: a replay of a graph of n
    calls returns the next of ``per_call[n]`` (ms a call), a launch takes ``host_us``; ``captured``
    lists the calls of each graph made."""
    state = {"captured": [], "per_call": {}, "host_us": 5.0}

    def replay(graph, calls):
        assert graph.calls == calls  # a replay's time is shared among the calls its graph holds
        return state["per_call"][calls].pop(0)

    monkeypatch.setattr(timing, "_captured", lambda fn, calls: state["captured"].append(calls) or FakeGraph(calls))
    monkeypatch.setattr(timing, "_replay_ms", replay)
    monkeypatch.setattr(timing, "host_us", lambda fn: state["host_us"])
    monkeypatch.setattr(torch.cuda, "Stream", lambda: None)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    return state


def test_a_graph_holds_the_calls_that_fit_its_time_on_the_gpu(fake_graphs):
    # 20 us on the GPU, 5 us on the host: 2 ms of replay hold 100 calls.
    calls = []
    fake_graphs["per_call"] = {1: [0.0230, 0.0200, 0.0210], 100: [0.0195 + i * 1e-4 for i in range(10)]}
    ms = timing.graph_ms(lambda: calls.append(1), rep_ms=2)
    assert fake_graphs["captured"] == [1, 100]
    assert ms == pytest.approx(0.0195 + 4.5e-4)  # the median of the ten timed replays
    assert len(calls) == 1  # one warm-up call before the captures; the fakes run no others


def test_a_host_bound_launcher_gets_the_calls_its_capture_can_launch_in_the_replay_time(fake_graphs):
    # 1 ms on the host, 20 us on the GPU: counted from GPU time, 2 ms of replay would hold 100 calls
    # and their capture take 100 ms; at the host's pace they are 2, each timed at its GPU time.
    fake_graphs["host_us"] = 1000.0
    fake_graphs["per_call"] = {1: [0.0230, 0.0200, 0.0210], 2: [0.0205] * 10}
    assert timing.graph_ms(lambda: None, rep_ms=2) == pytest.approx(0.0205)
    assert fake_graphs["captured"] == [1, 2]


def test_a_call_longer_than_the_replay_time_is_timed_alone(fake_graphs):
    fake_graphs["per_call"] = {1: [0.5, 0.4, 0.45] + [0.4] * 9 + [0.6]}
    assert timing.graph_ms(lambda: None, rep_ms=0.1, retries=10) == pytest.approx(0.4)
    assert fake_graphs["captured"] == [1]  # the one-call graph of the estimate is the timed one


@pytest.mark.gpu
def test_graph_ms_replays_its_graph_on_the_gpu():
    # Behaviour, not speed: one warm-up call, three replays of one call, six eager calls timing the
    # host (host_us), then ten replays of one graph of n calls; each call adds 1.
    x = torch.zeros(1, device="cuda")
    ms = timing.graph_ms(lambda: x.add_(1.0), rep_ms=0.5)
    runs = int(x.item()) - 1 - 3 - 6
    assert ms > 0 and runs > 0 and runs % 10 == 0


@pytest.fixture
def timers(monkeypatch):
    """bench_us with do_bench, the launch's host time and the graph timer replaced: set their times
    (us) in the returned dict; no GPU needed."""
    times = {"do_bench": 0.0, "host": 0.0, "graph": 0.0}
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, warmup, rep, return_mode: times["do_bench"] / 1e3)
    monkeypatch.setattr(timing, "host_us", lambda fn: times["host"])
    monkeypatch.setattr(timing, "flushed_graph_us", lambda fn, rep_ms: times["graph"])
    return times


@pytest.mark.parametrize("do_bench_us, host_us, expected", [
    (50.0, 5.0, (22.0, "cudagraph")),  # short: the launch would be a visible share
    (216.0, 150.0, (22.0, "cudagraph")),  # long only because the GPU waited for the host
    (216.0, 60.0, (22.0, "cudagraph")),  # host time over a quarter of it: do_bench may have timed it
    (216.0, 20.0, (216.0, "do_bench")),  # long on the GPU: do_bench's time stands
])
def test_bench_us_times_short_and_host_bound_calls_in_a_graph(timers, do_bench_us, host_us, expected):
    timers.update(do_bench=do_bench_us, host=host_us, graph=22.0)
    assert timing.bench_us(lambda: None) == expected


def test_host_time_is_the_median_of_calls_after_an_untimed_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    sleeps = iter([0.5, 0.002, 0.3, 0.002, 0.002, 0.002])  # the untimed first call, then one slow call

    def fn():
        time.sleep(next(sleeps))

    us = timing.host_us(fn)
    assert 2000 <= us < 100_000


@pytest.mark.gpu
def test_a_host_bound_launch_gets_its_gpu_time_on_the_gpu():
    # A call that spends 300 us on the host around a few-us kernel: do_bench sees the host's pace,
    # the graph replays only the kernel.
    x = torch.randn(1 << 16, device="cuda")
    out = torch.empty_like(x)

    def slow_launch():
        time.sleep(3e-4)
        torch.mul(x, 2.0, out=out)

    us, method = timing.bench_us(slow_launch, warmup_ms=5, rep_ms=20)
    assert method == "cudagraph" and 0 < us < 100
    assert torch.equal(out, x * 2.0)


@pytest.mark.gpu
def test_flushed_graph_time_on_the_gpu():
    # Behaviour, not speed: the flush buffer spans twice L2, and a captured kernel gets a finite,
    # positive time that the graph really ran (its output written).
    x = torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    us = timing.flushed_graph_us(lambda: torch.mul(x, 2.0, out=out), rep_ms=20)
    assert 0 < us < 1e4
    assert torch.equal(out, x * 2.0)
    buffer = timing._flush_buffer()
    assert buffer.numel() * buffer.element_size() >= 2 * torch.cuda.get_device_properties(0).L2_cache_size


def test_bench_us_gives_the_graph_timer_its_own_replay_time(monkeypatch, timers):
    """A search screens configs with short replays (``SCREEN_TIMING``) and re-times the finalists
    longer: each setting must reach the graph timer, which times every call under 100 us."""
    asked = []
    monkeypatch.setattr(timing, "flushed_graph_us", lambda fn, rep_ms: asked.append(rep_ms) or 22.0)
    timers.update(do_bench=50.0, host=5.0)
    timing.bench_us(lambda: None, rep_ms=40)
    timing.bench_us(lambda: None, rep_ms=40, graph_rep_ms=8)
    timing.bench_us(lambda: None, **timing.SCREEN_TIMING)
    assert asked == [40, 8, timing.SCREEN_TIMING["graph_rep_ms"]]


def test_retime_alternating_notes_a_failing_candidate_or_raises():
    from stuning.tuning.timing import retime_alternating

    calls = []

    def timer(key):
        calls.append(key)
        if key == "bad" and calls.count("bad") == 2:
            raise RuntimeError("capture failed")
        return {"good": 3.0, "bad": 1.0}[key] + len(calls) / 100

    failures = {}
    times = retime_alternating({"good": "good", "bad": "bad"}, timer=timer, failures=failures)
    assert times["bad"] is None and list(failures) == ["bad"] and times["good"] == pytest.approx(3.03)
    assert calls == ["good", "bad", "good", "bad", "good"]
    calls.clear()
    with pytest.raises(RuntimeError, match="capture failed"):
        retime_alternating({"good": "good", "bad": "bad"}, timer=timer)
