"""The tuning database's lookups (exact, nearest, across half dtypes), stale entries and misses."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import pytest
from db_builders import DEVICE, ENV, entry, open_db, write_db

from stuning.db import (
    RATIO,
    CorruptDatabaseError,
    DBEntry,
    Environment,
    StaleEntriesWarning,
    TuningDB,
    feature_distance,
    load_document,
    load_misses,
    prune_stale,
)
from stuning.db.tuning_db import OTHER_DTYPE_DISTANCE

pytestmark = pytest.mark.usefixtures("isolated_db_dirs")


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
