"""The tuning database (stuning.db): file format, merges, concurrency, search path, lookup, misses."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stuning.db import (
    RATIO,
    SCHEMA_VERSION,
    CorruptDatabaseError,
    DBEntry,
    Environment,
    StaleEntriesWarning,
    TimedConfig,
    TuningDB,
    db_file_name,
    device_slug,
    feature_distance,
    load_document,
    load_misses,
    make_key,
    merge_entries,
    merge_files,
    paths,
    prune_stale,
)
from stuning.db.tuning_db import OTHER_DTYPE_DISTANCE

DEVICE = "NVIDIA H100 80GB HBM3"
ENV = Environment(DEVICE, triton="3.2.0", torch="2.5.1", cuda="12.4", stuning="0.1.0",
                  compute_capability=(9, 0), sm_count=132)
HELPER = Path(__file__).resolve().parent / "db_writer_proc.py"


pytestmark = pytest.mark.usefixtures("isolated_db_dirs")


def entry(time_us=10.0, config=None, *, op="spmm", dtype="float16", features=None, measured=True,
          env=None, top_k=(), updated="2025-01-01T00:00:00+00:00", predicted_us=None, dense_us=None,
          other_kernels=(), model_picks=()) -> DBEntry:
    config = {"BLOCK_M": 32} if config is None else config
    return DBEntry(
        op=op, dtype=dtype, features=features if features is not None else {"m": 4096, "k": 4096, "n": 128},
        best=TimedConfig(config, time_us if measured else None),
        top_k=[TimedConfig(c, t if measured else None) for c, t in top_k],
        predicted_us=predicted_us, measured=measured,
        env=(env or ENV).entry_env(), updated=updated, dense_us=dense_us,
        other_kernels=[TimedConfig(c, t) for c, t in other_kernels],
        model_picks=[TimedConfig(c, t) for c, t in model_picks],
    )


def merged_both_ways(entries: list) -> DBEntry:
    """The entries merged first to last and last to first, which must agree."""
    forward, backward = entries[0], entries[-1]
    for e in entries[1:]:
        forward = merge_entries(forward, e)
    for e in reversed(entries[:-1]):
        backward = merge_entries(backward, e)
    assert forward == backward
    return forward


def open_db(directory, env=ENV, **kw) -> TuningDB:
    return TuningDB.open(DEVICE, search_path=[directory], env=env, **kw)


def write_db(directory: Path, entries: dict, env=ENV) -> Path:
    db = open_db(directory, env, write_dir=directory)
    for key, e in entries.items():
        db.put(e, key)
    return db.save()


# -- keys and entries ------------------------------------------------------------------------------

def test_make_key_is_sorted_compact_and_stable():
    key = make_key("spmm", "float16", {"n": 128, "m": 4096, "k": 4096.0, "density": 0.1, "cv": 0.4})
    assert key == "spmm|float16|cv=0.4|density=0.1|k=4096|m=4096|n=128"
    assert make_key("spmm", "torch.float16", {"density": 1 / 3}) == "spmm|float16|density=0.333333"
    assert make_key("sddmm", "bfloat16", {}) == "sddmm|bfloat16"
    for bad in ({"a|b": 1}, {"a": float("nan")}, {"a": True}):
        with pytest.raises(ValueError):
            make_key("spmm", "float16", bad)


def test_device_slug_names_the_file():
    assert db_file_name("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3.json"
    assert device_slug("  NVIDIA GeForce RTX 4090 ") == "nvidia-geforce-rtx-4090"


def test_entry_json_round_trip_and_validation():
    e = entry(7.5, top_k=[({"BLOCK_M": 32}, 7.5), ({"BLOCK_M": 64}, 9.0)], predicted_us=8.0)
    assert DBEntry.from_json(json.loads(json.dumps(e.to_json()))) == e
    predicted = entry(measured=False, predicted_us=3.0)
    assert DBEntry.from_json(predicted.to_json()) == predicted
    bad = e.to_json() | {"measured": False}  # a measured time on an entry labelled predicted
    with pytest.raises(ValueError, match="time_us must be null"):
        DBEntry.from_json(bad)
    with pytest.raises(ValueError, match="unknown field"):
        DBEntry.from_json(e.to_json() | {"extra": 1})


def test_dense_time_round_trips_and_is_optional():
    e = entry(8.0, dense_us=12.0)
    assert DBEntry.from_json(json.loads(json.dumps(e.to_json()))) == e
    assert e.speedup_vs_dense == pytest.approx(1.5)
    assert "dense_us" not in entry(8.0).to_json()  # entries without it keep their old form
    assert entry(8.0).speedup_vs_dense is None and entry(measured=False, dense_us=3.0).speedup_vs_dense is None
    for bad in (0, -1.0, "fast"):
        with pytest.raises(ValueError, match="dense_us"):
            DBEntry.from_json(e.to_json() | {"dense_us": bad})


def test_searched_kernels_round_trip_and_merge_into_their_union():
    """An entry records the kernels its search's space held; the faster of two entries was faster
    than everything the other timed, so the kept one covers both spaces."""
    with_scatter = dataclasses.replace(entry(9.0, {"c": 1}), tuner={"strategy": "x", "trials": 3, "seconds": 1.0,
                                                                    "kernels": ["csr", "scatter", "sell"]})
    assert DBEntry.from_json(json.loads(json.dumps(with_scatter.to_json()))) == with_scatter
    older = entry(5.0, {"c": 2})  # no record: tuned before entries kept one
    for a, b in ((older, with_scatter), (with_scatter, older)):
        kept = merge_entries(a, b)
        assert kept.best.time_us == 5.0 and kept.tuner["kernels"] == ["csr", "scatter", "sell"]
    narrow = dataclasses.replace(older, tuner=dict(with_scatter.tuner, kernels=["csr", "sell"]))
    assert merge_entries(narrow, with_scatter).tuner["kernels"] == ["csr", "scatter", "sell"]
    assert "kernels" not in merge_entries(older, entry(6.0, {"c": 3})).tuner
    for bad in (["sell", "csr"], "csr", ["csr", "csr"], [""], [1]):
        with pytest.raises(ValueError, match="tuner.kernels"):
            DBEntry.from_json(with_scatter.to_json() | {"tuner": dict(with_scatter.tuner, kernels=bad)})


def test_a_merged_entry_is_dated_by_the_later_search():
    """A re-tune that finds nothing faster keeps the old best, dated by the re-tune: the coverage
    check must see it covered the kernels rebuilt between the two."""
    old = dataclasses.replace(entry(5.0, {"c": 1}), updated="2026-11-20T00:00:00+00:00")
    new = dataclasses.replace(entry(6.0, {"c": 2}), updated="2026-11-26T00:00:00+00:00")
    for a, b in ((old, new), (new, old)):
        kept = merge_entries(a, b)
        assert kept.best.time_us == 5.0 and kept.updated == new.updated


def test_merged_entries_keep_the_lower_dense_time():
    fast, slow = entry(5.0, {"c": 1}), entry(8.0, {"c": 2}, dense_us=20.0)
    assert merge_entries(fast, slow).dense_us == 20.0 == merge_entries(slow, fast).dense_us
    assert merge_entries(entry(5.0, dense_us=30.0), slow).dense_us == 20.0
    other = entry(1.0, env=Environment(DEVICE, triton="2.0.0"), updated="2024-01-01T00:00:00+00:00", dense_us=1.0)
    assert merge_entries(other, slow).dense_us == 20.0  # another environment's timing is not carried over


# -- round trip ------------------------------------------------------------------------------------

def test_round_trip_writes_sorted_json_with_header(tmp_path):
    entries = {
        make_key("spmm", "float16", {"m": 4096}): entry(12.0, top_k=[({"BLOCK_M": 64}, 13.0)]),
        make_key("sddmm", "float32", {"m": 512}): entry(op="sddmm", dtype="float32", measured=False,
                                                       config={"BLOCK_N": 64}, predicted_us=4.0),
    }
    written = open_db(tmp_path)
    for key, e in entries.items():
        written.put(e, key)
    path = written.save()
    assert path == tmp_path / "nvidia-h100-80gb-hbm3.json"
    text = path.read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2, sort_keys=True) + "\n"
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["device"] == {"name": DEVICE, "compute_capability": [9, 0], "sm_count": 132}
    assert doc["versions"] == {"triton": "3.2.0", "torch": "2.5.1", "cuda": "12.4", "stuning": "0.1.0"}
    assert "median" in doc["objective"]
    assert doc["parameter_keys"] == {"sddmm": ["BLOCK_N"], "spmm": ["BLOCK_M"]}
    assert doc["calibration"] == {} and doc["model_coefficients"] == {}
    reopened = open_db(tmp_path)
    assert reopened.entries() == written.entries()
    assert reopened.files == [path]
    for key, e in entries.items():
        got = reopened.get(key)
        assert (got.best, got.features, got.measured, got.env) == (e.best, e.features, e.measured, e.env)
    # A measured entry's top_k always holds its best, fastest first.
    spmm = reopened.get(make_key("spmm", "float16", {"m": 4096}))
    assert [(t.config["BLOCK_M"], t.time_us) for t in spmm.top_k] == [(32, 12.0), (64, 13.0)]


def test_header_sections_are_saved_and_merged(tmp_path):
    db = open_db(tmp_path)
    db.update_calibration({"dram_gbs": 3000.0})
    db.update_model_coefficients({"spmm": [1.0, 2.0]})
    db.save()
    other = open_db(tmp_path)
    other.update_calibration({"fp32_tflops": 60.0})
    other.save()
    doc = load_document(tmp_path / db_file_name(DEVICE))
    assert doc["calibration"] == {"dram_gbs": 3000.0, "fp32_tflops": 60.0}
    assert open_db(tmp_path).model_coefficients == {"spmm": [1.0, 2.0]}


# -- merge semantics -------------------------------------------------------------------------------

def test_measured_beats_predicted_and_lower_time_wins():
    measured, predicted = entry(50.0), entry(measured=False, predicted_us=1.0)
    assert merge_entries(measured, predicted) == measured == merge_entries(predicted, measured)
    fast = entry(5.0, {"BLOCK_M": 16}, top_k=[({"BLOCK_M": 16}, 5.0), ({"BLOCK_M": 128}, 6.0)])
    slow = entry(8.0, {"BLOCK_M": 64}, top_k=[({"BLOCK_M": 64}, 8.0), ({"BLOCK_M": 128}, 5.5)])
    merged = merge_entries(slow, fast)
    assert merged == merge_entries(fast, slow)
    assert merged.best == TimedConfig({"BLOCK_M": 16}, 5.0)
    # Union of the top-k lists, one per config at its lowest time, fastest first.
    assert [(t.config["BLOCK_M"], t.time_us) for t in merged.top_k] == [(16, 5.0), (128, 5.5), (64, 8.0)]


def test_top_k_is_capped_and_ties_are_deterministic():
    a = entry(1.0, {"c": 0}, top_k=[({"c": i}, 1.0) for i in range(4)])
    b = entry(1.0, {"c": 9}, top_k=[({"c": i}, 1.0) for i in range(5, 9)])
    merged = merge_entries(a, b)
    assert merged == merge_entries(b, a)
    assert len(merged.top_k) == 5
    assert [t.config["c"] for t in merged.top_k] == [0, 1, 2, 3, 5]  # equal times: ordered by config


def test_times_of_a_later_timer_replace_an_earlier_ones():
    # Timer "1" replayed graphs with L2 warm: its 1 us is no better than timer 2's 3 us, only warmer.
    warm = entry(1.0, {"c": 1}, top_k=[({"c": 1}, 1.0)], dense_us=5.0, updated="2026-01-02T00:00:00+00:00")
    cold = entry(3.0, {"c": 2}, top_k=[({"c": 2}, 3.0)], dense_us=9.0,
                 env=dataclasses.replace(ENV, timer="2"), updated="2026-01-01T00:00:00+00:00")
    assert "timer" not in warm.env and cold.env["timer"] == "2"
    assert DBEntry.from_json(json.loads(json.dumps(cold.to_json()))) == cold
    for merged in (merge_entries(warm, cold), merge_entries(cold, warm)):
        assert merged.best.config == {"c": 2} and merged.dense_us == 9.0
        assert [t.config for t in merged.top_k] == [{"c": 2}]


def test_this_machine_stamps_its_timer_revision():
    from stuning.tuning.session import local_environment
    from stuning.tuning.timing import TIMER_REVISION

    assert local_environment().entry_env("spmm")["timer"] == TIMER_REVISION


def test_entries_from_another_environment_yield_to_the_newer():
    old = entry(1.0, env=Environment(DEVICE, triton="2.0.0"), updated="2024-01-01T00:00:00+00:00")
    new = entry(9.0, updated="2025-01-01T00:00:00+00:00")
    assert merge_entries(old, new) == new == merge_entries(new, old)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1.0, 2.0, 3.0]), st.integers(0, 3), st.booleans(),
                          st.sampled_from([None, 4.0, 5.0])),
                min_size=2, max_size=5))
def test_merge_is_order_independent(specs):
    # As the tuner writes them: the best config heads its top-k list.
    entries = [entry(t, {"c": c}, measured=m, top_k=[({"c": c}, t), ({"c": c + 1}, t + 1)], dense_us=d)
               for t, c, m, d in specs]
    forward = merged_both_ways(entries)
    assert merge_entries(forward, forward) == forward


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1.0, 2.0, 3.0]), st.lists(
    st.tuples(st.sampled_from(["csr", "sell", "scatter"]), st.integers(0, 3), st.sampled_from([1.5, 4.0, 9.0])),
    max_size=4)), min_size=2, max_size=5))
def test_merged_other_kernel_bests_are_order_independent_and_each_kernels_fastest(specs):
    # As a tune leaves them: its fastest configs (here two) in top_k, the best of each other kernel aside.
    entries = []
    for t, others in specs:
        times = {("scatter", 0): t}
        for k, c, u in others:
            times[k, c] = min(u, times.get((k, c), u))
        timed = sorted(times.items(), key=lambda kv: (kv[1], kv[0]))
        top = timed[:2]
        aside = {}
        for (k, c), u in timed[2:]:
            if k not in {k2 for (k2, _), _ in top}:
                aside.setdefault(k, ({"kernel": k, "c": c}, u))
        entries.append(entry(top[0][1], {"kernel": top[0][0][0], "c": top[0][0][1]},
                             top_k=[({"kernel": k, "c": c}, u) for (k, c), u in top],
                             other_kernels=sorted(aside.values(), key=lambda cu: cu[1])))
    forward = merged_both_ways(entries)
    everything = [(t.config, t.time_us) for e in entries for t in (e.best, *e.top_k, *e.other_kernels)]
    shown = {t.config["kernel"] for t in forward.top_k}
    wanted = {k: min(u for c, u in everything if c["kernel"] == k) for k in {c["kernel"] for c, _ in everything}}
    assert {t.config["kernel"]: t.time_us for t in forward.other_kernels} == {
        k: u for k, u in wanted.items() if k not in shown}
    assert [t.time_us for t in forward.other_kernels] == sorted(t.time_us for t in forward.other_kernels)


def test_other_kernel_bests_round_trip_and_are_normalised_on_put(tmp_path):
    scatter = [({"kernel": "scatter", "c": c}, 2.0 + c / 10) for c in range(4)]
    e = entry(2.0, {"kernel": "scatter", "c": 0}, top_k=scatter,
              other_kernels=[({"kernel": "csr", "c": 1}, 7.0), ({"kernel": "csr", "c": 2}, 5.0),
                             ({"kernel": "scatter", "c": 9}, 2.5), ({"kernel": "sell", "c": 4}, 3.0)])
    assert DBEntry.from_json(json.loads(json.dumps(e.to_json()))) == e
    assert "other_kernels" not in entry(2.0).to_json()  # absent when empty: older entries diff as they were
    write_db(tmp_path, {"k": e})
    held = open_db(tmp_path).entries()["k"]
    # scatter's 2.5 fills the top five; of the others each kernel keeps its fastest, fastest first.
    assert [t.time_us for t in held.top_k] == [2.0, 2.1, 2.2, 2.3, 2.5]
    assert [(t.config["kernel"], t.time_us) for t in held.other_kernels] == [("sell", 3.0), ("csr", 5.0)]
    assert [t.time_us for t in held.timed_configs] == [2.0, 2.1, 2.2, 2.3, 2.5, 3.0, 5.0]
    bad = e.to_json() | {"other_kernels": [{"config": {"kernel": "csr"}, "time_us": None}]}
    with pytest.raises(ValueError, match=r"other_kernels\[0\]\.time_us"):
        DBEntry.from_json(bad)


def test_model_picks_round_trip_unite_slowest_first_and_are_checked(tmp_path):
    """The model's misses, kept whatever their time: merged entries unite them (each config at its
    lowest time), slowest first, at most MODEL_PICKS_KEPT, in either merge order."""
    from stuning.db.schema import MODEL_PICKS_KEPT

    assert "model_picks" not in entry(2.0).to_json()  # absent when empty: older entries diff as they were
    picks = [({"kernel": "sell", "c": c}, 10.0 + c) for c in range(6)]
    first = entry(2.0, {"kernel": "scatter", "c": 0}, model_picks=picks[:4] + [({"kernel": "csr", "c": 0}, 40.0)])
    second = entry(1.5, {"kernel": "scatter", "c": 1}, model_picks=[(picks[0][0], 8.0), *picks[4:],
                                                                    ({"kernel": "csr", "c": 1}, 30.0),
                                                                    ({"kernel": "csr", "c": 2}, 3.0)])
    assert DBEntry.from_json(json.loads(json.dumps(first.to_json()))) == first
    merged = merged_both_ways([first, second])
    times = [t.time_us for t in merged.model_picks]
    assert len(times) == MODEL_PICKS_KEPT and times == sorted(times, reverse=True)
    assert times[:2] == [40.0, 30.0] and 3.0 not in times  # the fastest fall off first
    assert 8.0 in times and 10.0 not in times  # sell c=0 at its lowest time
    write_db(tmp_path, {"k": merged})
    held = open_db(tmp_path).entries()["k"]
    assert held.model_picks == merged.model_picks
    # The fit sees each timed config once: a pick also in top_k is not counted twice.
    both = entry(2.0, {"kernel": "scatter", "c": 0}, top_k=[({"kernel": "scatter", "c": 0}, 2.0)],
                 model_picks=[({"kernel": "scatter", "c": 0}, 2.4), ({"kernel": "sell", "c": 7}, 9.0)])
    assert [t.time_us for t in both.timed_configs] == [2.0, 9.0]
    for bad, reason in [
        ({"model_picks": [{"config": {"kernel": "csr"}, "time_us": None}]}, r"model_picks\[0\]\.time_us"),
        ({"model_picks": [{"config": {"c": i}, "time_us": 1.0} for i in range(MODEL_PICKS_KEPT + 1)]},
         "model_picks must be a list of at most"),
    ]:
        with pytest.raises(ValueError, match=reason):
            DBEntry.from_json(first.to_json() | bad)
    with pytest.raises(ValueError, match="in a measured entry only"):
        DBEntry.from_json(entry(measured=False).to_json() | {"model_picks": []})


def test_save_merges_with_what_another_process_wrote(tmp_path):
    key = "spmm|float16|m=1"
    first, second = open_db(tmp_path), open_db(tmp_path)
    first.put(entry(5.0, {"BLOCK_M": 16}), key)
    first.put(entry(1.0), "spmm|float16|only-first")
    first.save()
    second.put(entry(9.0, {"BLOCK_M": 64}), key)
    second.put(entry(measured=False, predicted_us=2.0), "spmm|float16|only-second")
    second.save()
    assert second.get(key).best.time_us == 5.0  # the saver's view picks up the better entry on disk
    on_disk = open_db(tmp_path).entries()
    assert set(on_disk) == {key, "spmm|float16|only-first", "spmm|float16|only-second"}
    assert on_disk[key].best == TimedConfig({"BLOCK_M": 16}, 5.0)
    assert [t.time_us for t in on_disk[key].top_k] == [5.0, 9.0]
    # A predicted result never replaces a measured one.
    third = open_db(tmp_path)
    third.put(entry(measured=False, predicted_us=0.1), key)
    third.save()
    assert open_db(tmp_path).get(key).measured


@pytest.mark.parametrize("writers", [2, 4])
def test_concurrent_writer_processes_lose_nothing(tmp_path, writers):
    n_keys = 50
    procs = [
        subprocess.Popen(
            [sys.executable, str(HELPER), "write", str(tmp_path), str(w), str(n_keys), str(writers)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for w in range(writers)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    device = "Test GPU 80GB"  # as in db_writer_proc.py
    db = TuningDB.open(device, search_path=[tmp_path], env=Environment(device, triton="3.0.0"))
    keys = set(db.entries())
    assert keys == {f"spmm|float16|writer={w}|i={i}" for w in range(writers) for i in range(n_keys)} | {
        "spmm|float16|shared"}
    shared = db.get("spmm|float16|shared")
    assert shared.best.time_us == 1.0 and len(shared.top_k) == writers
    assert not list(tmp_path.glob(".*.tmp")), "a temporary file was left behind"


def test_database_imports_without_triton_or_torch():
    result = subprocess.run([sys.executable, str(HELPER), "check-imports"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# -- corrupt files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("content, reason", [
    (b"{not json", "invalid JSON"),
    (b"\xff\xfe", "invalid JSON"),
    (json.dumps({"schema_version": 99}).encode(), "lacks"),
    (b'{"a": 1, "a": 2}', "duplicate key"),
])
def test_corrupt_file_is_reported_and_never_overwritten(tmp_path, content, reason):
    path = tmp_path / db_file_name(DEVICE)
    path.write_bytes(content)
    with pytest.raises(CorruptDatabaseError, match=reason) as caught:
        open_db(tmp_path)
    assert str(path) in str(caught.value)
    db = open_db(tmp_path / "elsewhere", write_dir=tmp_path)
    db.put(entry(), "spmm|float16|m=1")
    with pytest.raises(CorruptDatabaseError) as caught:
        db.save()
    assert str(path) in str(caught.value)
    assert path.read_bytes() == content


def test_wrong_schema_version_names_the_file(tmp_path):
    path = write_db(tmp_path, {"k": entry()})
    doc = json.loads(path.read_text())
    doc["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    with pytest.raises(CorruptDatabaseError, match="schema_version 2 is not supported") as caught:
        load_document(path)
    assert caught.value.path == str(path) and isinstance(caught.value, ValueError)
    db = open_db(tmp_path / "other", write_dir=tmp_path)
    db.put(entry(), "k")
    with pytest.raises(CorruptDatabaseError):
        db.save()
    assert path.read_bytes() == before


# -- search path -----------------------------------------------------------------------------------

def test_search_path_order_and_write_directory(tmp_path, monkeypatch):
    override, cache, shipped = tmp_path / "override", tmp_path / "cache", tmp_path / "shipped"
    for directory, time_us in ((override, 1.0), (cache, 2.0), (shipped, 3.0)):
        directory.mkdir()
        write_db(directory, {"both": entry(time_us), f"only-{directory.name}": entry(time_us)})
    monkeypatch.setenv(paths.ENV_DB_DIR, str(override))
    assert paths.default_search_path() == [override, cache, shipped]
    db = TuningDB.open(DEVICE, env=ENV)
    assert db.get("both").best.time_us == 1.0
    assert {k: db.get(k).best.time_us for k in ("only-override", "only-cache", "only-shipped")} == {
        "only-override": 1.0, "only-cache": 2.0, "only-shipped": 3.0}
    assert db.write_path == override / db_file_name(DEVICE)

    monkeypatch.delenv(paths.ENV_DB_DIR)
    db = TuningDB.open(DEVICE, env=ENV)
    assert db.get("both").best.time_us == 2.0 and db.get("only-override") is None
    assert db.write_path == cache / db_file_name(DEVICE)
    before = (shipped / db_file_name(DEVICE)).read_bytes()
    db.put(entry(0.5), "new")
    assert db.save() == cache / db_file_name(DEVICE)
    assert (shipped / db_file_name(DEVICE)).read_bytes() == before  # the shipped file is never written


def test_cache_directory_is_created_on_first_save(tmp_path):
    db = TuningDB.open(DEVICE, env=ENV)
    assert db.files == [] and db.save() is None  # nothing to write: nothing created
    assert not (tmp_path / "cache").exists()
    db.put(entry(), "k")
    assert db.save() == tmp_path / "cache" / db_file_name(DEVICE)


def test_explicit_search_path_never_writes_the_shipped_directory(tmp_path):
    shipped = paths.shipped_dir()
    db = TuningDB.open(DEVICE, search_path=[shipped, tmp_path / "mine"], env=ENV)
    assert db.write_path.parent == tmp_path / "mine"
    forced = TuningDB.open(DEVICE, search_path=[shipped], env=ENV, write_dir=shipped)
    assert forced.write_path.parent == shipped


def test_shipped_directory_is_the_package_data(monkeypatch):
    monkeypatch.undo()  # the real paths.shipped_dir
    assert (paths.shipped_dir() / "__init__.py").is_file()
    assert paths.shipped_dir().name == "tuning_db"


# -- lookup ----------------------------------------------------------------------------------------

def test_lookup_exact_then_nearest_within_the_cap(tmp_path):
    db = open_db(tmp_path)
    near = db.put(entry(features={"m": 4096, "k": 4096, "n": 128}), "spmm|float16|n=128")
    db.put(entry(features={"m": 4096, "k": 4096, "n": 1024}), "spmm|float16|n=1024")
    assert db.lookup("spmm", "float16", "spmm|float16|n=128", {}, max_distance=0.0) == (near, "exact", 0.0)
    query = {"m": 4096, "k": 4096, "n": 100}
    found = db.lookup("spmm", "float16", "spmm|float16|n=100", query, max_distance=1.0)
    assert found.how == "nearest" and found.entry == near
    assert found.distance == pytest.approx(math.log2(129 / 101))
    missed = db.lookup("spmm", "float16", "spmm|float16|n=100", query, max_distance=0.1)
    assert missed == (None, "miss", None)
    # Restricting the distance to named features ignores the others.
    found = db.lookup("spmm", "float16", "x", {"m": 4096, "n": 5}, max_distance=0.01, feature_names=["m"])
    assert found.how == "nearest"


def test_feature_distance_compares_each_feature_as_named():
    a = {"m": 4096, "density": 0.05, "row_cv": 0.1, "n": 16}
    b = {"m": 1024, "density": 0.02, "row_cv": 0.4, "n": 128}
    ratio = {"m": RATIO, "density": RATIO, "row_cv": 0.25}
    expected = math.sqrt(2.0**2 + math.log2(0.05 / 0.02) ** 2 + (0.3 / 0.25) ** 2)
    assert feature_distance(a, b, ratio) == pytest.approx(expected)
    assert feature_distance(a, b, ["n"]) == pytest.approx(math.log2(129 / 17))  # a sequence: log2(1 + x)
    assert feature_distance(a, {"m": 0.0}, {"m": RATIO}) == pytest.approx(42.0)  # zero: far, finite
    assert feature_distance(a, {"k": 1}, ratio) is None


@pytest.mark.parametrize("query, wanted", [
    # 95% zeros: the same shape at 98% is 0.04 away in log2(1 + density) but a factor 2.5 in
    # density; twice the N at 95% is the nearer (the replay of BENCHMARKS.md 7q: 3.0x slower).
    ({"density": 0.05, "row_cv": 0.08, "n": 128}, "n=256,density=0.05"),
    # Skewed rows: the same shape with even rows is 0.49 away in log2(1 + cv), under the old limit.
    ({"density": 0.2, "row_cv": 0.4, "n": 128}, "n=256,cv=0.4"),
])
def test_spmm_lookup_weighs_density_as_a_ratio_and_skew_by_difference(tmp_path, query, wanted):
    from stuning.tuning.features import NEAREST_FEATURES, NEAREST_MAX_DISTANCE

    db = open_db(tmp_path)
    shape = {"m": 4096, "k": 4096}
    stored = {
        "n=128,density=0.02": {"n": 128, "density": 0.02, "row_cv": 0.08},
        "n=256,density=0.05": {"n": 256, "density": 0.05, "row_cv": 0.08},
        "n=128,cv=0": {"n": 128, "density": 0.2, "row_cv": 0.03},
        "n=256,cv=0.4": {"n": 256, "density": 0.2, "row_cv": 0.4},
    }
    for key, features in stored.items():
        db.put(entry(config={"key": key}, features={**shape, **features}), key)
    found = db.lookup("spmm", "float16", "q", {**shape, **query}, max_distance=NEAREST_MAX_DISTANCE["spmm"],
                      feature_names=NEAREST_FEATURES["spmm"])
    assert found.how == "nearest" and found.entry.config == {"key": wanted}


@pytest.mark.parametrize("density, row_cv, wanted", [
    # A 95% mask thresholded at random (binomial rows: cv 0.14 at L = 1024) beside the even-row
    # entries: in log2(1 + x) the 98% entry was the nearer (BENCHMARKS.md 8x: its config 1.49x slower).
    (0.05, 0.14, "density=0.05"),
    (0.02, 0.21, "density=0.02"),
    (0.1, 0.09, "density=0.1"),
])
def test_sddmm_lookup_takes_the_same_density_over_the_same_skew(tmp_path, density, row_cv, wanted):
    from stuning.tuning.features import NEAREST_FEATURES, NEAREST_MAX_DISTANCE

    db = open_db(tmp_path)
    shape = {"m": 1024, "n": 1024, "k": 64}
    for stored_density, stored_cv in ((0.1, 0.006), (0.05, 0.0098), (0.02, 0.024)):
        key = f"density={stored_density}"
        db.put(entry(op="sddmm", config={"key": key}, features={**shape, "density": stored_density,
                                                                "row_cv": stored_cv}), key)
    query = {**shape, "density": density, "row_cv": row_cv}
    found = db.lookup("sddmm", "float16", "q", query, max_distance=NEAREST_MAX_DISTANCE["sddmm"],
                      feature_names=NEAREST_FEATURES["sddmm"])
    assert found.how == "nearest" and found.entry.config == {"key": wanted}


def test_sddmm_lookup_prefers_the_callers_operand_layout(tmp_path):
    from stuning.tuning.features import NEAREST_FEATURES, NEAREST_MAX_DISTANCE

    def lookup(db, **query):
        return db.lookup("sddmm", "float16", "q", {**shape, "row_cv": 0.01, **query},
                         max_distance=NEAREST_MAX_DISTANCE["sddmm"], feature_names=NEAREST_FEATURES["sddmm"])

    db = open_db(tmp_path)
    shape = {"m": 4096, "n": 4096, "k": 256}
    db.put(entry(op="sddmm", config={"key": "plain"}, features={**shape, "density": 0.05, "row_cv": 0.01,
                                                                 "a_t": 0}), "plain")
    # Only a K-contiguous entry: it answers a K-strided problem of its features, not one a step away.
    assert lookup(db, density=0.05, a_t=1).entry.config == {"key": "plain"}
    assert lookup(db, density=0.05 * 2 ** 0.9, a_t=1).how == "miss"
    assert lookup(db, density=0.05 * 2 ** 0.9, a_t=0).entry.config == {"key": "plain"}
    # A K-strided entry a density step away is nearer than the other layout's at the same density.
    db.put(entry(op="sddmm", config={"key": "strided"}, features={**shape, "density": 0.1, "row_cv": 0.01,
                                                                   "a_t": 1}), "strided")
    assert lookup(db, density=0.05 * 2 ** 0.6, a_t=1).entry.config == {"key": "strided"}
    assert lookup(db, density=0.05 * 2 ** 0.6, a_t=0).entry.config == {"key": "plain"}
    assert lookup(db, density=0.05, a_t=1).entry.config == {"key": "plain"}


def test_lookup_never_crosses_op_or_dtype_width(tmp_path):
    db = open_db(tmp_path)
    features = {"m": 4096, "k": 4096, "n": 128}
    db.put(entry(features=features), "spmm|float16|a")
    assert db.lookup("spmm", "float32", "q", features, max_distance=100).how == "miss"
    assert db.lookup("sddmm", "float16", "q", features, max_distance=100).how == "miss"
    assert db.lookup("spmm", "float16", "q", features, max_distance=0).how == "nearest"


def test_half_dtypes_answer_for_each_other_where_their_own_entries_are_further(tmp_path):
    db = open_db(tmp_path)
    features = {"m": 4096, "k": 4096, "n": 128}
    fp16 = db.put(entry(features=features), "spmm|float16|n=128")
    found = db.lookup("spmm", "bfloat16", "spmm|bfloat16|n=128", features, max_distance=0.5)
    assert found == (fp16, "other-dtype", 0.0)
    assert "spmm|bfloat16|n=128" in db.misses()  # still untuned: `stuning db misses` lists it
    assert db.lookup("spmm", "bfloat16", "q", {**features, "n": 4096}, max_distance=0.5).how == "miss"
    # A bf16 neighbour further than OTHER_DTYPE_DISTANCE leaves the fp16 entry of the problem itself.
    db.put(entry(dtype="bfloat16", features={**features, "n": 200}), "spmm|bfloat16|n=200")
    found = db.lookup("spmm", "bfloat16", "spmm|bfloat16|n=128", features, max_distance=1.0,
                      feature_names={"n": RATIO})
    assert found == (fp16, "other-dtype", 0.0)
    bf16 = db.put(entry(dtype="bfloat16", features={**features, "n": 160}), "spmm|bfloat16|n=160")
    found = db.lookup("spmm", "bfloat16", "spmm|bfloat16|n=128", features, max_distance=1.0,
                      feature_names={"n": RATIO})
    assert found.how == "nearest" and found.entry == bf16 and found.distance < OTHER_DTYPE_DISTANCE


def test_exact_lookup_takes_microseconds(tmp_path):
    db = open_db(tmp_path)
    for i in range(2000):
        db.put(entry(features={"m": i}), f"spmm|float16|m={i}")
    start, n = time.perf_counter(), 20000
    for _ in range(n):
        db.lookup("spmm", "float16", "spmm|float16|m=7", None, max_distance=1.0)
    assert (time.perf_counter() - start) / n < 50e-6


# -- stale entries ---------------------------------------------------------------------------------

@pytest.mark.parametrize("other", [
    Environment(DEVICE, triton="2.3.0"),  # another Triton
    Environment("NVIDIA A100", triton="3.2.0"),  # another device (in this device's file)
])
def test_stale_entries_are_seeds_not_answers(tmp_path, other):
    features = {"m": 4096, "k": 4096, "n": 128}
    write_db(tmp_path, {"stale": entry(1.0, {"BLOCK_M": 16}, features=features, env=other)}, env=other)
    with pytest.warns(StaleEntriesWarning, match="1 tuning-database entries"):
        db = open_db(tmp_path)
    assert db.get("stale") is None and "stale" in db.stale_entries()
    assert db.lookup("spmm", "float16", "stale", features, max_distance=10).how == "miss"
    db.put(entry(5.0, {"BLOCK_M": 64}, features={"m": 64, "k": 64, "n": 8}), "current")
    seeds = db.seeds("spmm", "float16", features, k=5)
    assert [s.config for s in seeds] == [{"BLOCK_M": 16}, {"BLOCK_M": 64}]  # nearest first
    assert db.lookup("spmm", "float16", "stale", features, max_distance=100).entry.config == {"BLOCK_M": 64}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise here
        open_db(tmp_path)


def test_current_entry_in_a_later_directory_beats_a_stale_one(tmp_path):
    old = Environment(DEVICE, triton="2.0.0")
    write_db(tmp_path / "first", {"k": entry(1.0, env=old)}, env=old)
    write_db(tmp_path / "second", {"k": entry(9.0)})
    db = TuningDB.open(DEVICE, search_path=[tmp_path / "first", tmp_path / "second"], env=ENV)
    assert db.get("k").best.time_us == 9.0  # and no warning: nothing that could answer was demoted


def test_retuning_replaces_a_stale_entry_on_disk(tmp_path):
    old = Environment(DEVICE, triton="2.0.0")
    write_db(tmp_path, {"k": entry(1.0, env=old, updated="2024-01-01T00:00:00+00:00")}, env=old)
    with pytest.warns(StaleEntriesWarning):
        db = open_db(tmp_path)
    db.put(entry(9.0, updated="2025-06-01T00:00:00+00:00"), "k")
    db.save()
    assert open_db(tmp_path).get("k").best.time_us == 9.0


def test_a_kernel_revision_stales_only_its_own_ops_entries(tmp_path):
    # Entries written before revisions existed carry no "kernel": revision "1".
    first = Environment(DEVICE, triton="3.2.0", torch="2.5.1")
    path = write_db(tmp_path, {"spmm-old": entry(1.0, op="spmm", env=first),
                               "sddmm-old": entry(2.0, op="sddmm", env=first)}, env=first)
    assert "kernel" not in load_document(path)["entries"]["spmm-old"]["env"]
    now = Environment(DEVICE, triton="3.2.0", torch="2.5.1", kernel_revisions=(("sddmm", "1"), ("spmm", "2")))
    with pytest.warns(StaleEntriesWarning, match="kernels {'sddmm': '1', 'spmm': '2'}"):
        db = open_db(tmp_path, env=now)
    assert db.get("spmm-old") is None and "spmm-old" in db.stale_entries()  # a seed now, not an answer
    assert db.get("sddmm-old").best.time_us == 2.0
    db.put(dataclasses.replace(entry(3.0, op="spmm"), env={}), "spmm-new")  # stamped with the spmm revision
    db.save()
    stored = load_document(path)["entries"]
    assert stored["spmm-new"]["env"]["kernel"] == "2" and open_db(tmp_path, env=now).get("spmm-new") is not None
    # An environment that does not know the installed kernels (no revisions) does not judge them.
    assert open_db(tmp_path, env=first).get("spmm-new") is not None
    assert prune_stale(path, keep_env=now) == 1
    assert set(load_document(path)["entries"]) == {"sddmm-old", "spmm-new"}


def test_kernel_revision_must_be_a_string(tmp_path):
    obj = entry().to_json()
    obj["env"]["kernel"] = 2
    with pytest.raises(ValueError, match="env.kernel must be a string"):
        DBEntry.from_json(obj)
    obj["env"]["kernel"] = "2"
    assert DBEntry.from_json(obj).to_json()["env"]["kernel"] == "2"


# -- misses ----------------------------------------------------------------------------------------

def test_misses_are_counted_and_flushed_with_merge(tmp_path):
    features = {"m": 8, "k": 8, "n": 8}
    first, second = open_db(tmp_path), open_db(tmp_path)
    for _ in range(3):
        first.lookup("spmm", "float16", "spmm|float16|a", features, max_distance=0)
    first.lookup("spmm", "float16", "spmm|float16|b", features, max_distance=0)
    assert first.misses() == {
        "spmm|float16|a": {"count": 3, "op": "spmm", "dtype": "float16", "features": features},
        "spmm|float16|b": {"count": 1, "op": "spmm", "dtype": "float16", "features": features},
    }
    first.flush_misses()
    assert first.misses() == {}
    second.lookup("spmm", "float16", "spmm|float16|b", features, max_distance=0)
    second.lookup("spmm", "float16", "spmm|float16|b", features, max_distance=0)
    flushed = second.flush_misses()
    assert {k: m["count"] for k, m in flushed.items()} == {"spmm|float16|a": 3, "spmm|float16|b": 3}
    path = tmp_path / "misses-nvidia-h100-80gb-hbm3.json"
    assert list(load_misses(path)) == ["spmm|float16|a", "spmm|float16|b"]
    assert open_db(tmp_path).load_misses() == load_misses(path)
    path.write_text("[]")
    second.lookup("spmm", "float16", "c", features, max_distance=0)
    with pytest.raises(CorruptDatabaseError):
        second.flush_misses()
    assert path.read_text() == "[]" and second.misses()["c"]["count"] == 1


# -- file tools ------------------------------------------------------------------------------------

def test_merge_files_prune_stale_and_export(tmp_path):
    old = Environment(DEVICE, triton="2.0.0")
    a = write_db(tmp_path / "a", {"shared": entry(5.0, {"c": 1}), "a": entry(1.0)})
    b = write_db(tmp_path / "b", {
        "shared": entry(3.0, {"c": 2}), "b": entry(measured=False, predicted_us=2.0), "old": entry(env=old),
    })
    out = tmp_path / "merged.json"
    merged = merge_files([a, b], out)
    assert set(merged["entries"]) == {"shared", "a", "b", "old"}
    assert merged["entries"]["shared"]["best"] == {"config": {"c": 2}, "time_us": 3.0}
    assert load_document(out) == merged
    assert prune_stale(out, keep_env=ENV) == 1
    assert set(load_document(out)["entries"]) == {"shared", "a", "b"}

    other_device = tmp_path / "x" / db_file_name("NVIDIA A100")
    other_device.parent.mkdir()
    a100 = Environment("NVIDIA A100", triton="3.2.0")
    db = TuningDB.open("NVIDIA A100", search_path=[other_device.parent], env=a100)
    db.put(entry(env=a100), "k")
    db.save()
    with pytest.raises(ValueError, match="different devices"):
        merge_files([a, other_device], tmp_path / "bad.json")

    with pytest.warns(StaleEntriesWarning):
        db = open_db(tmp_path / "b")
    exported = tmp_path / "export.json"
    assert db.export(exported, measured_only=True) == 1
    assert set(load_document(exported)["entries"]) == {"shared"}
