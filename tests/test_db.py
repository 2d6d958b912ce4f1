"""The tuning database (stuning.db): keys, entries, the file format, merges and concurrent writers.
Lookups, stale entries and misses are in test_db_lookup.py; corrupt files, the search path and the
file tools in test_db_files.py."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from db_builders import DEVICE, ENV, entry, merged_both_ways, open_db, write_db
from hypothesis import given, settings
from hypothesis import strategies as st

from stuning.db import (
    SCHEMA_VERSION,
    DBEntry,
    Environment,
    TimedConfig,
    TuningDB,
    db_file_name,
    device_slug,
    load_document,
    make_key,
    merge_entries,
)

HELPER = Path(__file__).resolve().parent / "db_writer_proc.py"

pytestmark = pytest.mark.usefixtures("isolated_db_dirs")


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
