"""Graph timing with L2 flushed: the flush is captured with each call, then subtracted."""

from __future__ import annotations

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
    def do_bench_cudagraph(fn, rep, return_mode):
        assert return_mode == "median"
        start = len(calls)
        fn()  # one call stands for a replay: record what the graph would hold
        return ms_of[tuple(calls[start:])]

    return do_bench_cudagraph


@pytest.fixture(autouse=True)
def no_flush_timed_yet(monkeypatch):
    monkeypatch.setattr(timing, "_FLUSH_TIMES", {})


def test_each_call_runs_behind_a_flush_and_the_flush_alone_is_subtracted(monkeypatch):
    calls: list = []
    monkeypatch.setattr(timing, "_flush_buffer", lambda: FakeFlush(calls))
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph",
                        _fake_graph_timer(calls, {("flush", "kernel"): 0.0412, ("flush",): 0.0350}))
    us = timing.flushed_graph_us(lambda: calls.append("kernel"), rep_ms=7)
    assert us == pytest.approx(6.2)
    assert calls == ["flush", "kernel", "flush"]


def test_a_difference_lost_in_noise_is_still_a_positive_time(monkeypatch):
    calls: list = []
    monkeypatch.setattr(timing, "_flush_buffer", lambda: FakeFlush(calls))
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph",
                        _fake_graph_timer(calls, {("flush", "kernel"): 0.0349, ("flush",): 0.0350}))
    assert 0 < timing.flushed_graph_us(lambda: calls.append("kernel")) < 0.01


def test_the_flush_alone_is_timed_again_only_after_a_while(monkeypatch):
    calls: list = []
    flush = FakeFlush(calls)
    monkeypatch.setattr(timing, "_flush_buffer", lambda: flush)
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph",
                        _fake_graph_timer(calls, {("flush", "kernel"): 0.0412, ("flush",): 0.0350}))
    clock = [100.0]
    monkeypatch.setattr(timing.time, "monotonic", lambda: clock[0])
    for _ in range(3):
        assert timing.flushed_graph_us(lambda: calls.append("kernel")) == pytest.approx(6.2)
    assert calls.count("flush") == 3 + 1  # one per timed call, and the flush timed alone once
    clock[0] += timing.FLUSH_RETIME_S + 1
    timing.flushed_graph_us(lambda: calls.append("kernel"))
    assert calls[-2:] == ["kernel", "flush"]


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
