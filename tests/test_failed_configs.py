"""Configs that failed (compile error, out of resources, wrong result) are stored and never retried.

The database half is plain JSON; the tuning half runs the real driver with a stand-in objective (a
deterministic table of times and failures), so no kernel is launched or compiled.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import replace

import pytest

from stuning.db import (
    CorruptDatabaseError,
    DBEntry,
    Environment,
    FailedConfig,
    StaleEntriesWarning,
    TimedConfig,
    TuningDB,
    db_file_name,
    load_document,
    merge_entries,
    paths,
)
from stuning.suite import SpMMCase
from stuning.tuning import driver
from stuning.tuning.cost_model import CostModel
from stuning.tuning.device import spec_for
from stuning.tuning.features import synthetic_spmm_features
from stuning.tuning.registry import budget_of, family
from stuning.tuning.search import Budget, TrialFailure
from stuning.tuning.session import local_environment, outcome_to_entry
from stuning.tuning.tuner import tune

DEVICE = "NVIDIA H100 80GB HBM3"
ENV = Environment(DEVICE, triton="3.2.0", torch="2.5.1")
OTHER_TRITON = Environment(DEVICE, triton="3.3.0", torch="2.5.1")
OOR = FailedConfig({"BLOCK_M": 256}, "out_of_resources", "out of resource: shared memory, Required: 300000")
CE = FailedConfig({"BLOCK_M": 8}, "compile_error", "CompilationError: at 12:4")


pytestmark = pytest.mark.usefixtures("isolated_db_dirs")


def entry(time_us=10.0, failed=(), *, env=ENV, measured=True, updated="2025-01-01T00:00:00+00:00") -> DBEntry:
    return DBEntry(op="spmm", dtype="float16", features={"m": 64}, best=TimedConfig({"BLOCK_M": 32},
                   time_us if measured else None), measured=measured, env=env.entry_env(), updated=updated,
                   failed=list(failed))


def open_db(directory, env=ENV) -> TuningDB:
    return TuningDB.open(DEVICE, search_path=[directory], env=env, write_dir=directory)


# -- the entry field -------------------------------------------------------------------------------

def test_failed_round_trips_and_is_omitted_when_empty(tmp_path):
    assert "failed" not in entry().to_json()  # files without failures keep their old form
    e = entry(failed=[OOR, CE])
    assert DBEntry.from_json(json.loads(json.dumps(e.to_json()))) == e
    db = open_db(tmp_path)
    db.put(e, "k")
    path = db.save()
    stored = load_document(path)["entries"]["k"]["failed"]
    assert [f["config"] for f in stored] == [{"BLOCK_M": 256}, {"BLOCK_M": 8}]  # ordered by config
    assert open_db(tmp_path).get("k").failed == [OOR, CE]
    assert FailedConfig.make({"a": 1}, "compile_error", "first line\nsecond\n" + "x" * 900).message == "first line"
    assert len(FailedConfig.make({}, "error", "y" * 900).message) == 200


@pytest.mark.parametrize("failed, reason", [
    ({"config": {}}, r"entries\['k'\]\.failed must be a list"),
    ([{"config": {"BLOCK_M": 8}, "status": "compile_error"}], r"failed\[0\] lacks message"),
    ([{"config": {"BLOCK_M": 8}, "status": "", "message": ""}], r"failed\[0\]\.status must be a non-empty"),
    ([{"config": [8], "status": "oops", "message": ""}], r"failed\[0\]\.config must map"),
    ([{"config": {}, "status": "x", "message": "two\nlines"}], r"failed\[0\]\.message must be one line"),
    ([{"config": {}, "status": "x", "message": "", "why": 1}], r"failed\[0\] has unknown field\(s\) why"),
])
def test_malformed_failed_names_the_file_and_field(tmp_path, failed, reason):
    db = open_db(tmp_path)
    db.put(entry(), "k")
    path = db.save()
    doc = json.loads(path.read_text())
    doc["entries"]["k"]["failed"] = failed
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptDatabaseError, match=reason) as caught:
        open_db(tmp_path)
    assert caught.value.path == str(path)


# -- merging ---------------------------------------------------------------------------------------

def test_merge_unites_failures_of_one_environment_whichever_entry_wins():
    slow, fast = entry(20.0, [OOR]), entry(10.0, [CE, replace(OOR, message="again")])
    for merged in (merge_entries(slow, fast), merge_entries(fast, slow)):
        assert merged.best.time_us == 10.0
        assert [f.config for f in merged.failed] == [{"BLOCK_M": 256}, {"BLOCK_M": 8}]  # one per config
    assert merge_entries(slow, fast) == merge_entries(fast, slow)
    predicted = entry(measured=False, failed=[CE])
    assert merge_entries(predicted, slow).failed == [OOR, CE]  # the measured entry wins, keeps both


def test_failures_do_not_cross_environments():
    old = entry(5.0, [OOR])
    new = entry(30.0, [CE], env=OTHER_TRITON, updated="2025-06-01T00:00:00+00:00")
    assert merge_entries(old, new).failed == [CE]  # the newer wins, with its own failures only


def test_two_processes_saving_failures_lose_neither(tmp_path):
    a, b = open_db(tmp_path), open_db(tmp_path)  # both read the (empty) directory first
    a.put(entry(12.0, [OOR]), "k")
    b.put(entry(11.0, [CE]), "k")
    a.save()
    b.save()
    assert open_db(tmp_path).get("k").failed == [OOR, CE]


def test_current_failures_are_united_across_the_search_path(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    for directory, failed in ((first, [OOR]), (second, [CE])):
        db = open_db(directory)
        db.put(entry(10.0, failed), "k")
        db.save()
    db = TuningDB.open(DEVICE, search_path=[first, second], env=ENV, write_dir=first)
    assert db.get("k").failed == [OOR, CE]


# -- tuning ----------------------------------------------------------------------------------------

def _crc(config) -> int:
    return zlib.crc32(json.dumps(config.as_dict(), sort_keys=True).encode())


class StandIn:
    """What the driver builds as its objective: times from a fixed table, some configs failing.

    Every ninth config fails to compile, every eleventh runs out of resources, every thirteenth
    computes a wrong result: recorded kinds. Every seventh raises a plain error, which may be
    transient and so is tried again. ``calls`` counts the configs run, across tuning runs.
    """

    calls: dict = {}

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, config) -> float:
        StandIn.calls[config] = StandIn.calls.get(config, 0) + 1
        crc = _crc(config)
        for every, status in ((9, "compile_error"), (11, "out_of_resources"), (13, "wrong"), (7, "error")):
            if crc % every == 0:
                raise TrialFailure(status, f"{status} of config {crc % 1000}\nTraceback: ...")
        return 1.0 + (crc % 997) / 10.0


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """The driver's measuring path on a CPU: no GPU check, no precompile, the stand-in objective."""
    monkeypatch.setenv(paths.ENV_DB_DIR, str(tmp_path))
    monkeypatch.setattr(driver, "can_measure", lambda: True)
    monkeypatch.setattr(driver, "KernelObjective", StandIn)
    precompiled = []
    monkeypatch.setattr(driver, "precompile", lambda case, configs, **_: precompiled.extend(configs))
    monkeypatch.setattr(driver, "bench_us", lambda fn: (DENSE_US, "do_bench"))  # the dense baseline
    StandIn.calls = {}
    return precompiled


CASE = SpMMCase(48, 64, 24, 0.8, 0.4, "fp16")
DENSE_US = 7.0


def test_a_measured_entry_records_the_dense_baseline(fake_gpu, tmp_path):
    outcome, key = _tune()
    assert outcome.dense_us == DENSE_US and outcome.speedup_vs_dense == DENSE_US / outcome.best_time_us
    stored = json.loads((tmp_path / db_file_name(local_environment().device)).read_text())["entries"][key]
    assert stored["dense_us"] == DENSE_US


def test_a_failing_dense_baseline_leaves_the_tuning_result(fake_gpu, tmp_path, monkeypatch):
    def out_of_memory(fn):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(driver, "bench_us", out_of_memory)
    with pytest.warns(UserWarning, match="dense baseline .* out of memory"):
        outcome, key = _tune()
    assert outcome.dense_us is None and outcome.best_time_us is not None
    stored = json.loads((tmp_path / db_file_name(local_environment().device)).read_text())["entries"][key]
    assert "dense_us" not in stored and stored["best"]["time_us"] == outcome.best_time_us


def _tune():
    return driver.tune_case(CASE, strategy="exhaustive", budget=Budget(max_seconds=60.0))


def test_a_second_run_never_tries_the_recorded_failures(fake_gpu, tmp_path):
    first, key = _tune()
    recorded = {"compile_error", "out_of_resources", "wrong"}
    assert recorded <= set(first.failures)  # the space is large enough to hit every kind
    failed = {json.dumps(f.config, sort_keys=True): f for f in first.failed if f.status in recorded}
    stored = json.loads((tmp_path / db_file_name(local_environment().device)).read_text())["entries"][key]
    assert {json.dumps(f["config"], sort_keys=True) for f in stored["failed"]} == set(failed)
    assert all("\n" not in f["message"] for f in stored["failed"])
    assert {f["status"] for f in stored["failed"]} == recorded  # the plain errors are not stored

    calls_before, fake_gpu[:] = dict(StandIn.calls), []
    second, _ = _tune()
    again = {c: n - calls_before.get(c, 0) for c, n in StandIn.calls.items()}
    name = lambda c: json.dumps(c.as_dict(), sort_keys=True)  # noqa: E731
    assert all(n == 0 for c, n in again.items() if name(c) in failed)  # never run again
    assert not any(name(c) in failed for c in fake_gpu)  # nor precompiled
    errors = [c for c, n in again.items() if n and _crc(c) % 7 == 0 and name(c) not in failed]
    assert errors  # plain errors are retried
    assert second.timed == first.timed - len(failed)  # excluded configs count as not timed
    assert second.best_config == first.best_config
    assert {json.dumps(f.config, sort_keys=True) for f in second.failed if f.status in recorded} == set(failed)


def test_another_triton_versions_failures_are_not_excluded(fake_gpu, tmp_path):
    first, key = _tune()
    env = local_environment()
    other = Environment(env.device, triton="0.0.0-other", torch=env.torch)
    stale_file = tmp_path / db_file_name(env.device)
    doc = json.loads(stale_file.read_text())
    doc["entries"][key]["env"] = other.entry_env()  # as if tuned with another compiler
    stale_file.write_text(json.dumps(doc))
    with pytest.warns(StaleEntriesWarning):
        db = driver.open_db()
    assert db.get(key) is None and driver.known_failures_of(db, key) == []
    StandIn.calls = {}
    second, _ = driver.tune_case(CASE, strategy="exhaustive", db=db)
    assert second.timed == first.timed  # the other compiler's failures are tried again


def test_tune_excludes_configs_and_carries_their_records():
    features = synthetic_spmm_features(4096, 4096, 128, 0.1, "float16", row_cv=0.4)
    device = spec_for("h100")
    plain = tune(features, strategy="model", device=device)
    record = FailedConfig(plain.best_config.as_dict(), "compile_error", "no")
    excluded = tune(features, strategy="model", device=device, exclude=[record])
    assert excluded.best_config != plain.best_config
    assert all(t["config"] != record.config for t in excluded.top_k)
    assert excluded.failed == [record]
    assert outcome_to_entry(excluded).failed == [record]
    every = family("spmm").space(features, budget_of(device))
    with pytest.raises(RuntimeError, match="recorded as failing"):
        tune(features, strategy="model", device=device, exclude=every)


def test_compiling_ahead_takes_at_most_its_share_of_the_time_limit(fake_gpu, monkeypatch):
    import time

    def slow_precompile(case, configs, *, seed=0, timeout_s):
        assert timeout_s == pytest.approx(0.4 * driver.PRECOMPILE_SHARE)  # the workers' stop
        fake_gpu.extend(configs)
        time.sleep(timeout_s)  # as if stopped there
        return 0

    monkeypatch.setattr(driver, "precompile", slow_precompile)
    monkeypatch.setattr(driver, "PRECOMPILE_MIN_SECONDS", 0.0)
    started = time.perf_counter()
    outcome, _ = driver.tune_case(CASE, strategy="model+optuna", budget=Budget(max_trials=40, max_seconds=0.4))
    assert time.perf_counter() - started < 0.4 + 0.5  # the limit bounds the wall time (plus one trial)
    assert len(fake_gpu) == driver.PRECOMPILE_TOP
    # The rest of the limit times configs (the stand-in objective takes no time): more than one.
    assert len(outcome.top_k) > 1


def test_the_clock_never_stops_a_search_before_one_config_ran(fake_gpu, monkeypatch):
    import time

    def slow_precompile(case, configs, *, seed=0, timeout_s):
        time.sleep(0.3)  # overran its share (the workers' stop is not instantaneous)
        return 0

    monkeypatch.setattr(driver, "precompile", slow_precompile)
    monkeypatch.setattr(driver, "PRECOMPILE_MIN_SECONDS", 0.0)
    outcome, _ = driver.tune_case(CASE, strategy="model+optuna", budget=Budget(max_trials=40, max_seconds=0.2))
    assert len(outcome.top_k) == 1 and outcome.timed == 1 + sum(outcome.failures.values())


def test_no_more_configs_compiled_ahead_than_the_search_may_time(fake_gpu):
    driver.tune_case(CASE, strategy="model+optuna", budget=Budget(max_trials=3, max_seconds=60.0))
    assert len(fake_gpu) == 3
    fake_gpu.clear()
    limit = driver.PRECOMPILE_MIN_SECONDS - 1
    driver.tune_case(CASE, strategy="model+optuna", budget=Budget(max_trials=30, max_seconds=limit))
    assert fake_gpu == []  # too little time for worker processes to finish compiling


def test_tune_keeps_the_models_first_picks_that_lose():
    """The search times the model's favourites whatever it predicts; where they are not among the
    fastest, the outcome keeps them at their timings, so that a refit sees the model's misses."""
    features = synthetic_spmm_features(4096, 4096, 128, 0.1, "float16", row_cv=0.4)
    device = spec_for("h100")
    ranked = [c for c, _ in CostModel(device).rank(features, family("spmm").space(features, budget_of(device)))]
    favourite = ranked[0]

    def timer(config):  # the model's favourite runs 50x slower than anything else
        return 500.0 if config == favourite else 10.0 + ranked.index(config) * 1e-3

    outcome = tune(features, objective=timer, strategy="model+optuna", device=device, budget=Budget(max_trials=12))
    assert favourite.as_dict() not in [t["config"] for t in outcome.top_k]
    assert outcome.model_picks == [{"config": favourite.as_dict(), "time_us": 500.0}]
    assert outcome_to_entry(outcome).model_picks == [TimedConfig(favourite.as_dict(), 500.0)]
    # Where the favourite is also the fastest, nothing is kept twice.
    won = tune(features, objective=lambda c: 1.0 if c == favourite else timer(c), strategy="model+optuna",
               device=device, budget=Budget(max_trials=12))
    assert won.best_config == favourite and won.model_picks == []
