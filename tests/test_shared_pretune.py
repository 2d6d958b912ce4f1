"""pretune over several worker processes sharing an Optuna journal storage (CPU, synthetic timer).

The worker processes are real (``stuning.nn.pretune_worker``); kernel timing is replaced by
``pretune_test_timer`` (a pure function of the problem and the config, logging every call), so the
tests check the distribution of work, not the kernels: every problem tuned exactly once, no config
timed twice, the database complete, and a worker killed mid-trial costing only that trial.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import defaultdict
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from pretune_test_timer import CRASH_EXIT, read_log

import stuning
import stuning.nn.shared_pretune as shared_pretune
from stuning.cli.main import main
from stuning.db import TuningDB
from stuning.nn.examples import tiny_encoder, tiny_mlp
from stuning.ops.selection import SELECTOR
from stuning.tuning import claims
from stuning.tuning.claims import ClaimBoard, Lease
from stuning.tuning.optuna_storage import namespace, open_storage, search_study_name
from stuning.tuning.search import Budget
from stuning.tuning.session import INTERPRETER_DEVICE

TESTS = Path(__file__).resolve().parent
TRIALS = 6
SPACE = namespace(INTERPRETER_DEVICE, "model+optuna")


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """Worker processes that time with the test timer and write to a database in ``tmp_path``."""
    monkeypatch.setenv("STUNING_SYNTHETIC_TIMER", "pretune_test_timer:time_us")
    monkeypatch.setenv("STUNING_TEST_TIMER_LOG", str(tmp_path / "timer.log"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    # A lease no loaded CI machine outlasts (a worker starved of the CPU past it would see its problem
    # taken over): a dead worker is noticed by the coordinator watching it exit, not by expiry.
    monkeypatch.setattr(shared_pretune, "DEFAULT_LEASE", Lease(heartbeat_s=0.5, expire_s=600.0))
    SELECTOR.reset()
    yield tmp_path
    SELECTOR.reset()


def _sparse(builder):
    model = builder()
    stuning.sparsify(model, sparsity=0.8, min_size=0)
    return model


def _timings(tmp_path) -> dict[str, list[tuple[int, str]]]:
    by_key = defaultdict(list)
    for pid, key, config in read_log(tmp_path / "timer.log"):
        by_key[key].append((pid, config))
    return by_key


def _db_entries(db_dir: Path) -> dict:
    db = TuningDB.open(INTERPRETER_DEVICE, search_path=[db_dir], write_dir=db_dir)  # validates every entry
    return db.entries()


def test_two_workers_tune_every_problem_exactly_once(shared, capsys):
    journal = shared / "tune.journal"
    argv = ["pretune", "--model", "stuning.nn.examples:tiny_encoder", "--sparsity", "0.8", "--min-size", "0",
            "--tokens", "16,40", "--trials", str(TRIALS), "--workers", "2", "--storage", str(journal),
            "--db", str(shared / "db"), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)["pretune"]
    keys = {p["key"] for p in report["problems"]}
    assert report["tuned"] == len(keys) >= 6 and report["failed"] == 0 and report["lost"] == []
    assert [w["exit_code"] for w in report["workers"]] == [0, 0]

    timings = _timings(shared)
    assert set(timings) == keys
    for key, calls in timings.items():
        assert len({pid for pid, _ in calls}) == 1, f"{key} was tuned by more than one worker"
        assert len(calls) == len({c for _, c in calls}) == TRIALS, f"{key}: a config timed twice, or too few"
    board = ClaimBoard(open_storage(str(journal)), SPACE)
    assert {k: [a.number for a in c.attempts] for k, c in board.snapshot().items()} == {k: [1] for k in keys}

    entries = _db_entries(shared / "db")
    assert set(entries) == keys and all(e.measured and e.tuner["trials"] == TRIALS for e in entries.values())
    assert {p["key"]: p["config"] for p in report["problems"]} == {k: e.best.config for k, e in entries.items()}

    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)["pretune"]
    assert again["skipped"] == len(keys) and again["tuned"] == 0 and again["workers"] == []


def test_a_killed_worker_loses_one_trial_and_its_problem_is_retried(shared, monkeypatch):
    marker = shared / "crashed"
    monkeypatch.setenv("STUNING_TEST_CRASH_MARKER", str(marker))
    journal = shared / "tune.journal"
    report = stuning.pretune(_sparse(tiny_mlp), tokens=[16, 40], db=shared / "db", budget=Budget(max_trials=TRIALS),
                             workers=2, storage=str(journal), progress=False)
    crashed = marker.read_text()
    keys = {p.key for p in report.problems}
    assert crashed in keys
    assert (report.tuned, report.failed) == (len(keys), 0)
    assert sorted(w["exit_code"] for w in report.workers) == [0, CRASH_EXIT]
    assert [(lost["key"], lost["attempt"], lost["retried"]) for lost in report.lost] == [(crashed, 1, True)]

    timings = _timings(shared)
    for key, calls in timings.items():
        configs = [c for _, c in calls]
        assert len(configs) == len(set(configs)) == TRIALS, f"{key}: a config timed twice, or too few"
        assert len({pid for pid, _ in calls}) == (2 if key == crashed else 1)
    board = ClaimBoard(open_storage(str(journal)), SPACE)
    snapshot = board.snapshot()
    assert {k: len(c.attempts) for k, c in snapshot.items()} == {k: 1 + (k == crashed) for k in keys}
    # Taken over because the coordinator saw the worker exit, not because its lease ran out.
    assert snapshot[crashed].attempts[0].result["state"] == claims.DIED
    assert f"exited with code {CRASH_EXIT}" in snapshot[crashed].attempts[0].result["note"]
    # The trial in flight when the worker died is failed in the search's study and not timed again.
    study = optuna.load_study(study_name=search_study_name(SPACE, crashed), storage=open_storage(str(journal)))
    assert [t.state for t in study.trials].count(TrialState.FAIL) == 1

    entries = _db_entries(shared / "db")
    assert set(entries) == keys and all(e.measured for e in entries.values())
    # The resumed search counts the first worker's trials toward its budget; the one in flight is lost.
    assert entries[crashed].tuner["trials"] == TRIALS - 1


def test_an_interrupted_run_resumes_its_search_and_a_new_database_fills_from_the_storage(shared, monkeypatch):
    import pretune_test_timer

    journal, real = str(shared / "tune.journal"), pretune_test_timer.time_us
    calls = []

    def interrupted(features, config):
        calls.append(1)
        if len(calls) == TRIALS + 2:  # the second problem's third config
            raise KeyboardInterrupt
        return real(features, config)

    model = _sparse(tiny_mlp)
    monkeypatch.setattr(pretune_test_timer, "time_us", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stuning.pretune(model, tokens=[16, 40], db=shared / "db", budget=Budget(max_trials=TRIALS), storage=journal,
                        progress=False)
    monkeypatch.setattr(pretune_test_timer, "time_us", real)
    resumed = stuning.pretune(model, tokens=[16, 40], db=shared / "db", budget=Budget(max_trials=TRIALS),
                              storage=journal, progress=False)
    # The first problem reached the database before the interrupt; the second was given back, not lost.
    assert (resumed.skipped, resumed.tuned) == (1, len(resumed.problems) - 1) and resumed.lost == []
    for key, calls_of_key in _timings(shared).items():
        configs = [c for _, c in calls_of_key]
        assert len(configs) == len(set(configs)) == TRIALS, f"{key}: the resumed search timed a config again"

    # Another machine's database (here: a new directory) gets every entry from the storage, untimed.
    elsewhere = stuning.pretune(model, tokens=[16, 40], db=shared / "other", budget=Budget(max_trials=TRIALS),
                                storage=journal, progress=False)
    assert elsewhere.skipped == len(elsewhere.problems) and elsewhere.tuned == 0
    assert _db_entries(shared / "other").keys() == _db_entries(shared / "db").keys()
    assert len(read_log(shared / "timer.log")) == TRIALS * len(resumed.problems)


class FakeClock:
    def __init__(self):
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now


def test_claims_are_exclusive_and_expire_with_their_heartbeat(tmp_path, monkeypatch):
    clock = FakeClock()  # expiry by the clock the test moves, not by sleeping: no race on a loaded machine
    monkeypatch.setattr(claims, "time", clock)
    path = str(tmp_path / "claims.journal")
    lease = Lease(heartbeat_s=60.0, expire_s=10.0, max_deaths=2)
    # Two handles on one journal, as two processes would have.
    mine, theirs = (ClaimBoard(open_storage(path), "space", lease=lease, worker=w) for w in ("mine", "theirs"))
    first = mine.try_claim("k", None)
    assert first is not None and theirs.try_claim("k", None) is None  # the same attempt is won once
    clock.now += 9.0
    assert theirs.status(theirs.snapshot()["k"]) == claims.BUSY
    first._stop.set()  # stop heartbeating without a result: a dead worker
    clock.now += 2.0
    seen = theirs.snapshot()["k"]
    assert theirs.status(seen) == claims.FREE
    second = theirs.try_claim("k", seen)
    assert second.number == 2 and mine.try_claim("k", seen) is None
    second._stop.set()
    clock.now += 11.0
    assert theirs.status(theirs.snapshot()["k"]) == claims.FAILED  # two deaths: given up

    long_lease = Lease(heartbeat_s=60.0, expire_s=60.0)
    parent = ClaimBoard(open_storage(path), "other space", lease=long_lease)
    orphan = ClaimBoard(open_storage(path), "other space", lease=long_lease).try_claim("d", None)
    orphan._stop.set()  # its process exited, and its parent saw it: the problem is free at once
    assert parent.declare_dead(socket.gethostname(), os.getpid(), "exited with code 1") == 1
    seen = parent.snapshot()["d"]
    assert parent.status(seen) == claims.FREE and [a.number for a in seen.lost(long_lease, clock.now)] == [1]

    released = mine.try_claim("r", None)
    released.release()
    assert mine.status(mine.snapshot()["r"]) == claims.FREE  # given back: free at once, no death
    done = mine.try_claim("r", mine.snapshot()["r"])
    done.finish(claims.DONE, entry={"x": 1})
    assert theirs.status(theirs.snapshot()["r"]) == claims.DONE


def test_an_entry_stored_by_a_holder_taken_for_dead_is_kept(tmp_path, monkeypatch):
    """A holder whose heartbeat starved past the lease (a long compile holding the GIL) is taken over
    while alive; if it then stores its entry and the taker fails, the problem is done, not failed."""
    clock = FakeClock()
    monkeypatch.setattr(claims, "time", clock)
    lease = Lease(heartbeat_s=60.0, expire_s=10.0)
    board = ClaimBoard(open_storage(str(tmp_path / "claims.journal")), "space", lease=lease)
    slow = board.try_claim("k", None)
    clock.now += 11.0
    taker = board.try_claim("k", board.snapshot()["k"])
    assert taker.number == 2
    slow.finish(claims.DONE, entry={"x": 1})
    taker.finish(claims.FAILED, note="its search collided with the first holder's")
    seen = board.snapshot()["k"]
    assert board.status(seen) == claims.DONE and seen.done.number == 1 and seen.done.result["entry"] == {"x": 1}
    assert seen.lost(lease, clock.now) == []


def test_the_last_worker_to_die_has_its_problem_freed(tmp_path):
    """The coordinator marks a crashed worker's claims died even when it was the last one running."""
    import subprocess
    import sys

    board = ClaimBoard(open_storage(str(tmp_path / "claims.journal")), "space", lease=Lease(heartbeat_s=60.0))
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    claim = board.try_claim("k", None)
    claim._stop.set()
    board.storage.set_study_user_attr(claim.study_id, "owner", {"host": socket.gethostname(), "pid": proc.pid})
    proc.wait()
    shared_pretune._wait([proc], board, ["k"], progress=False)
    seen = board.snapshot()["k"]
    assert seen.last.result["state"] == claims.DIED and board.status(seen) == claims.FREE


def test_a_worker_is_interrupted_once():
    """Ctrl-C reaches a worker from the terminal and again from the coordinator: only the first
    interrupts it, so the second cannot cut short the release of its claim."""
    import signal

    from stuning.nn import pretune_worker

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            pretune_worker.stop_on_signals()
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), sig)
                time.sleep(1.0)  # the handler runs between bytecodes, at once
            os.kill(os.getpid(), signal.SIGINT)  # ignored now
            time.sleep(0.05)
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # a hard stop still ends it
        finally:
            for s, h in previous.items():
                signal.signal(s, h)


def test_a_bad_storage_url_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"storage 'sqlite:///.*nowhere.*': cannot open it"):
        open_storage(f"sqlite:///{tmp_path}/nowhere/x.db")
    with pytest.raises(ValueError, match=r"storage 'nodriver://user:\*\*\*@host/db': cannot open it"):
        open_storage("nodriver://user:secret@host/db")


def test_worker_count(monkeypatch):
    monkeypatch.setattr(shared_pretune, "visible_gpus", lambda: [])  # no GPU
    assert shared_pretune.worker_count("auto") == 1 and shared_pretune.worker_count(0) == 1
    assert shared_pretune.worker_count(3) == 3  # CPU processes
    for bad in (-1, "many"):
        with pytest.raises(ValueError, match="workers"):
            shared_pretune.worker_count(bad)
    monkeypatch.setattr(shared_pretune, "visible_gpus", lambda: ["3", "5"])  # two GPUs
    assert shared_pretune.worker_count("auto") == 2 and shared_pretune.worker_count(1) == 1
    with pytest.raises(ValueError, match="3 workers but 2 GPUs"):
        shared_pretune.worker_count(3)


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    import torch

    import stuning.tuning.driver as driver

    monkeypatch.setattr(driver, "can_measure", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert shared_pretune.visible_gpus() == ["3", "5"]  # worker i gets the i-th listed, not GPU i
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert shared_pretune.visible_gpus() == ["0", "1"]


def test_pretune_without_a_gpu_still_refuses_measuring_without_the_synthetic_timer(tmp_path, monkeypatch):
    monkeypatch.delenv("STUNING_SYNTHETIC_TIMER", raising=False)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        stuning.pretune(_sparse(tiny_encoder), tokens=[16], db=tmp_path, workers=2, progress=False)
