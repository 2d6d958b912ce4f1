"""``time_row``: the implementations of a benchmark row timed in turn, in rounds, with one method.
The GPU's timers are replaced by recorded times, so these run anywhere."""

from __future__ import annotations

import pytest

from stuning.bench.timer import RowTimer, TimerSettings, time_row


class RecordedTimer(RowTimer):
    """A GPU row timer whose measurements are given: ``times[name]`` is consumed one per call."""

    def __init__(self, times: dict[str, list], *, rounds: int = 3, method: str = "do_bench", on_gpu: bool = True):
        super().__init__(TimerSettings(rounds=rounds), on_gpu=False)  # no calibration without a GPU
        self.on_gpu = on_gpu
        self.times = {name: list(t) for name, t in times.items()}
        self.method = method
        self.calls: list[tuple[str, str, float]] = []

    def probe(self, fn):
        return 1.0, 1.0

    def choose(self, probes):
        return self.method, "recorded"

    def measure_us(self, fn, method, share=1.0):
        name = fn()
        self.calls.append((name, method, share))
        t = self.times[name].pop(0)
        if isinstance(t, Exception):
            raise t
        return t


def impls(*names):
    return {name: (lambda name=name: name) for name in names}


def test_implementations_are_timed_in_turn_and_keep_the_median_of_their_rounds():
    timer = RecordedTimer({"dense": [10.0, 30.0, 11.0], "stuning": [5.0, 5.5, 50.0]})
    row = time_row(timer, impls("dense", "stuning"))
    assert row.times_us == {"dense": 11.0, "stuning": 5.5}
    assert [name for name, _, _ in timer.calls] == ["dense", "stuning"] * 3
    assert [(method, share) for _, method, share in timer.calls] == [("do_bench", pytest.approx(1 / 3))] * 6


def test_a_path_that_fails_is_left_out_of_later_rounds_and_noted():
    timer = RecordedTimer({"dense": [10.0, 12.0, 11.0], "cusparse": [7.0, RuntimeError("out of memory")]})
    row = time_row(timer, impls("dense", "cusparse"))
    assert row.times_us == {"dense": 11.0, "cusparse": None}
    assert "cusparse: RuntimeError: out of memory" in row.note
    assert [name for name, _, _ in timer.calls].count("cusparse") == 2


def test_a_graph_that_cannot_be_captured_times_the_whole_row_with_do_bench():
    timer = RecordedTimer({"dense": [4.0, 4.2, 4.4, 4.1], "stuning": [RuntimeError("capture failed"), 3.0, 3.1, 2.9]},
                          method="cudagraph")
    row = time_row(timer, impls("dense", "stuning"))
    assert row.method == "do_bench" and "cudagraph failed for stuning" in row.note
    assert row.times_us == {"dense": 4.2, "stuning": 3.0}
    assert [m for _, m, _ in timer.calls] == ["cudagraph"] * 2 + ["do_bench"] * 6


def test_without_a_gpu_each_path_is_timed_once():
    timer = RecordedTimer({"dense": [9.0], "stuning": [8.0]}, on_gpu=False)
    assert time_row(timer, impls("dense", "stuning")).times_us == {"dense": 9.0, "stuning": 8.0}
    assert [share for _, _, share in timer.calls] == [1.0, 1.0]


def test_a_path_whose_launch_outlasts_the_flush_is_timed_in_graphs():
    """do_bench's flush hides only flush_us of host work; a longer launch would be timed with it."""
    timer = RowTimer(TimerSettings(graph_below_us=100.0), on_gpu=False)
    timer.on_gpu, timer.flush_us = True, 80.0
    method, why = timer.choose({"stuning": (206.0, 148.0), "dense": (24.0, 238.0)})
    assert method == "cudagraph" and why == "host-bound: stuning 206 us"
    assert timer.choose({"stuning": (60.0, 148.0), "dense": (24.0, 238.0)}) == ("do_bench", "")
    assert timer.choose({"stuning": (300.0, 40.0), "dense": (24.0, 238.0)})[1] == "stuning runs in 40 us < 100 us"
