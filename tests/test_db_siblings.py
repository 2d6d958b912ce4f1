"""Sibling devices' entries (same compute capability and SM count) answering a lookup this device misses."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from db_builders import DEVICE, ENV, entry, open_db

from stuning.db import TuningDB, db_file_name
from stuning.db.paths import shipped_dir
from stuning.db.siblings import SIBLING_DEVICE_DISTANCE, chip_identity

pytestmark = pytest.mark.usefixtures("isolated_db_dirs")

FEATURES = {"m": 4096, "k": 4096, "n": 128}
KEY = "spmm|float16|n=128"
H200 = dataclasses.replace(ENV, device="NVIDIA H200")
SHIPPED = shipped_dir()  # the real one: isolated_db_dirs replaces it inside each test
H100_PCIE = dataclasses.replace(ENV, device="NVIDIA H100 PCIe", sm_count=114)
A100 = dataclasses.replace(ENV, device="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0), sm_count=108)


def write_device_db(directory, env, entries: dict):
    db = TuningDB.open(env.device, search_path=[directory], env=env, write_dir=directory)
    for key, e in entries.items():
        db.put(e, key)
    return db.save()


def lookup(db, features=FEATURES, key=KEY, dtype="float16", max_distance=2.0):
    return db.lookup("spmm", dtype, key, features, max_distance=max_distance, feature_names=dict.fromkeys(features))


def test_a_siblings_entry_answers_what_this_device_lacks_and_still_counts_as_a_miss(tmp_path):
    theirs = entry(config={"BLOCK_M": 64}, env=H200)
    write_device_db(tmp_path, H200, {KEY: theirs})
    db = open_db(tmp_path)
    found = lookup(db)
    assert found.how == "sibling" and found.entry.config == {"BLOCK_M": 64} and found.distance == 0.0
    assert KEY in db.misses()  # untuned on this device: `stuning db misses` lists it
    assert db.get(KEY) is None  # never an own entry, so not its dense-faster flag either
    # Nearby problems borrow it too, within the distance limit.
    near = lookup(db, {**FEATURES, "n": 160}, key="q")
    assert near.how == "sibling" and near.distance == pytest.approx(math.log2(161 / 129))
    assert lookup(db, {**FEATURES, "n": 160}, key="q", max_distance=0.1).how == "miss"


def test_own_entries_answer_first_unless_the_sibling_is_nearer_by_the_margin(tmp_path):
    write_device_db(tmp_path, H200, {KEY: entry(config={"who": "sibling"}, env=H200)})
    db = open_db(tmp_path)
    step = 2 ** (SIBLING_DEVICE_DISTANCE * 0.8)  # an own neighbour within the margin
    db.put(entry(config={"who": "own, near"}, features={**FEATURES, "n": 129 * step - 1}), "near")
    found = lookup(db)
    assert found.how == "nearest" and found.entry.config == {"who": "own, near"}
    db = open_db(tmp_path)
    db.put(entry(config={"who": "own, far"}, features={**FEATURES, "n": 129 * step ** 2 - 1}), "far")
    assert lookup(db).entry.config == {"who": "sibling"}
    # The own exact key always wins.
    db.put(entry(config={"who": "own"}), KEY)
    assert lookup(db).how == "exact"


@pytest.mark.parametrize("other", [H100_PCIE, A100], ids=["other-sm-count", "other-capability"])
def test_other_chips_never_answer(tmp_path, other):
    write_device_db(tmp_path, other, {KEY: entry(env=other)})
    assert lookup(open_db(tmp_path)).how == "miss"


def test_a_siblings_stale_entries_do_not_answer_but_seed(tmp_path):
    old = dataclasses.replace(H200, triton="3.1.0")
    write_device_db(tmp_path, old, {KEY: entry(config={"BLOCK_M": 8}, env=old)})
    db = open_db(tmp_path)
    assert lookup(db).how == "miss"
    write_device_db(tmp_path, H200, {"other": entry(config={"BLOCK_M": 16}, env=H200,
                                                      features={**FEATURES, "n": 256})})
    db = open_db(tmp_path)
    assert lookup(db).entry.config == {"BLOCK_M": 16}
    # Seeds: own entries first at equal distance, then siblings' (stale ones included).
    mine = db.put(entry(config={"BLOCK_M": 32}), KEY)
    seeds = db.seeds("spmm", "float16", FEATURES, k=5, feature_names=dict.fromkeys(FEATURES))
    assert [s.config for s in seeds] == [mine.config, {"BLOCK_M": 16}]


def test_the_chip_comes_from_the_own_file_when_the_environment_does_not_know_it(tmp_path):
    write_device_db(tmp_path, ENV, {"own": entry(features={"m": 1, "k": 1, "n": 1})})
    write_device_db(tmp_path, H200, {KEY: entry(env=H200)})
    named = dataclasses.replace(ENV, compute_capability=None, sm_count=None)  # `--device` from another machine
    assert lookup(open_db(tmp_path, env=named)).how == "sibling"
    assert chip_identity({"compute_capability": [9, 0], "sm_count": 132}) == ((9, 0), 132)
    assert chip_identity({"compute_capability": None, "sm_count": 132}) is None


def test_an_unreadable_siblings_file_is_skipped_with_a_warning(tmp_path):
    (tmp_path / "nvidia-h200.json").write_text("{ not json")
    db = open_db(tmp_path)
    with pytest.warns(UserWarning, match="nvidia-h200.json"):
        assert lookup(db).how == "miss"
    assert db.lookup("spmm", "float16", KEY, FEATURES, max_distance=1.0).how == "miss"  # read once


def test_the_shipped_h200_entries_answer_an_h100_where_it_has_none(tmp_path):
    if not (SHIPPED / db_file_name(DEVICE)).is_file():
        pytest.skip("no shipped databases in this checkout")
    theirs = json.loads((SHIPPED / db_file_name(H200.device)).read_text())
    key, wanted = next((k, e) for k, e in sorted(theirs["entries"].items()) if k.startswith("semi24|float16|"))
    # The shipped H100 file as it was before it held 2:4 entries (session 74 tuned them there): its
    # own entries of the problem's neighbours would answer before the sibling's, as they should.
    ours = json.loads((SHIPPED / db_file_name(DEVICE)).read_text())
    ours["entries"] = {k: e for k, e in ours["entries"].items() if not k.startswith("semi24|")}
    (tmp_path / db_file_name(DEVICE)).write_text(json.dumps(ours))
    (tmp_path / db_file_name(H200.device)).write_text(json.dumps(theirs))
    here = dataclasses.replace(ENV, triton=wanted["env"]["triton"])  # no kernel revisions: not judged
    db = TuningDB.open(DEVICE, search_path=[tmp_path], env=here)
    assert db.get(key) is None
    found = db.lookup("semi24", "float16", key, wanted["features"], max_distance=1.0)
    assert found.how == "sibling" and found.distance == 0.0 and found.entry.config == wanted["best"]["config"]


def searched(e, *kernels):
    return dataclasses.replace(e, tuner={"strategy": "model+optuna", "trials": 9, "seconds": 1.0,
                                         "kernels": sorted(kernels)})


def test_a_siblings_entry_of_the_problem_answers_where_it_searched_a_faster_kernel_this_one_never_tried(tmp_path):
    theirs = searched(entry(40.0, {"kernel": "scatter"}, env=H200), "csr", "scatter", "sell")
    write_device_db(tmp_path, H200, {KEY: theirs})
    db = open_db(tmp_path)
    db.put(searched(entry(90.0, {"kernel": "sell"}), "csr", "sell"), KEY)
    found = lookup(db)
    assert found.how == "sibling" and found.distance == 0.0 and found.entry.config == {"kernel": "scatter"}
    assert KEY not in db.misses()  # tuned here, only not as widely: `db untried` lists it, not `db misses`
    assert db.get(KEY).config == {"kernel": "sell"}  # the own entry is still what is stored


@pytest.mark.parametrize("case", ["slower there", "same kernels", "won by a kernel tried here", "nothing recorded"])
def test_the_own_entry_answers_unless_the_sibling_found_a_faster_kernel_it_never_tried(tmp_path, case):
    theirs_us, their_kernels, their_best, own_kernels = {
        "slower there": (95.0, ("csr", "scatter", "sell"), "scatter", ("csr", "sell")),
        "same kernels": (40.0, ("csr", "scatter", "sell"), "scatter", ("csr", "scatter", "sell")),
        "won by a kernel tried here": (40.0, ("csr", "scatter", "sell"), "sell", ("csr", "sell")),
        "nothing recorded": (40.0, ("csr", "scatter", "sell"), "scatter", ()),
    }[case]
    write_device_db(tmp_path, H200, {KEY: searched(entry(theirs_us, {"kernel": their_best}, env=H200), *their_kernels)})
    db = open_db(tmp_path)
    own = entry(90.0, {"kernel": "sell"})
    db.put(searched(own, *own_kernels) if own_kernels else own, KEY)
    found = lookup(db)
    assert found.how == "exact" and found.entry.config == {"kernel": "sell"}
    if case == "nothing recorded":
        assert db._siblings is None  # no kernels to compare: the sibling's files are never read


@pytest.mark.parametrize("own_speedup, their_speedup", [(0.8, 1.6), (1.2, 0.9)])
def test_dense_fallback_follows_the_entry_that_answers(tmp_path, own_speedup, their_speedup):
    # A layer with dense_fallback runs dense where the key's entry measured dense faster: where the
    # sibling's entry answers in the own one's place, its config runs, so its measurement decides.
    from stuning.ops.selection import ConfigSelector

    theirs = searched(entry(40.0, {"kernel": "scatter"}, env=H200, dense_us=40.0 * their_speedup),
                      "csr", "scatter", "sell")
    write_device_db(tmp_path, H200, {KEY: theirs})
    db = open_db(tmp_path)
    db.put(searched(entry(90.0, {"kernel": "sell"}, dense_us=90.0 * own_speedup), "csr", "sell"), KEY)
    selector = ConfigSelector()
    selector._db = db
    assert selector.dense_faster(KEY) is (their_speedup < 1.0)
