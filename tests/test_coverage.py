"""Search coverage (``stuning.tuning.coverage``): entries whose search never tried a kernel their
problem's space has now, how the tuner records what it searched, and ``stuning db untried``."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from stuning.kernels import semi24_hopper, spmm_scatter
from stuning.kernels.target import H100_BUDGET

from stuning.cli.main import main as cli_main
from stuning.db import DBEntry, Environment, TimedConfig, TuningDB
from stuning.suite import SDDMMCase, SpMMCase
from stuning.tuning.coverage import (
    CONFIGS_RERANKED,
    KERNELS_JOINED,
    KERNELS_REBUILT,
    kernels_not_installed,
    untried_kernels,
)
from stuning.tuning.driver import entry_problem, seeds_from_db
from stuning.tuning.features import synthetic_sddmm_features, synthetic_spmm_features
from stuning.tuning.problems import build_problem, spmm_problem
from stuning.tuning.registry import family
from stuning.tuning.session import key_for, open_db

pytestmark = pytest.mark.usefixtures("isolated_db_dirs")

SCATTER_JOINED = KERNELS_JOINED["spmm"]["scatter"]


def spmm_entry(*, kernels=None, updated="2026-11-26T12:00:00+00:00", dtype="float16") -> DBEntry:
    features = synthetic_spmm_features(4096, 4096, 128, 0.1, getattr(torch, dtype))
    tuner = {"strategy": "model+optuna", "trials": 8, "seconds": 5.0} | ({"kernels": kernels} if kernels else {})
    return DBEntry(op="spmm", dtype=dtype, features=dict(features.values),
                   best=TimedConfig({"kernel": "csr"}, 20.0), tuner=tuner, updated=updated)


@pytest.fixture
def scatter_in_space(monkeypatch):
    """This installation as the H100/H200's: the scatter kernel (Gluon, Triton 3.6) in its spaces."""
    monkeypatch.setattr(spmm_scatter, "available", lambda: True)
    space = family("spmm").space(synthetic_spmm_features(4096, 4096, 128, 0.1, torch.float16), H100_BUDGET)
    assert {c.kernel for c in space} == {"csr", "sell", "scatter"}


def test_recorded_kernels_say_what_the_search_never_tried(scatter_in_space):
    assert untried_kernels(spmm_entry(kernels=["csr", "sell"]), H100_BUDGET) == ["scatter"]
    assert untried_kernels(spmm_entry(kernels=["csr", "scatter", "sell"]), H100_BUDGET) == []
    # The record wins over the date: an old installation may tune after a kernel's date.
    late = spmm_entry(kernels=["csr", "sell"], updated="2027-01-01T00:00:00+00:00")
    assert untried_kernels(late, H100_BUDGET) == ["scatter"]


def test_unrecorded_entries_are_judged_by_when_each_kernel_joined(scatter_in_space):
    assert untried_kernels(spmm_entry(updated="2026-11-24T10:00:00+00:00"), H100_BUDGET) == ["scatter"]
    # From the day it joined until its rebuild, a search that another kernel won timed its old form.
    assert untried_kernels(spmm_entry(updated=SCATTER_JOINED), H100_BUDGET) == ["scatter"]
    assert untried_kernels(spmm_entry(updated=KERNELS_REBUILT["spmm"]["scatter"]), H100_BUDGET) == []
    assert untried_kernels(spmm_entry(updated="2026-11-23T00:00:00+00:00"), H100_BUDGET) == ["scatter", "sell"]


def test_a_hand_written_stamp_without_a_zone_is_read_as_utc(scatter_in_space):
    assert untried_kernels(spmm_entry(updated="2026-11-24T10:00:00"), H100_BUDGET) == ["scatter"]
    assert untried_kernels(spmm_entry(kernels=["csr", "scatter", "sell"], updated="2026-11-26T00:00:00"),
                           H100_BUDGET) == []


def test_a_kernel_outside_the_space_here_is_not_missed(monkeypatch, scatter_in_space):
    # Without Gluon's Triton no problem has the scatter kernel; with it fp32 has it too (as fp16 parts),
    # so fp32 entries searched before it are listed.
    old = spmm_entry(updated="2026-11-24T10:00:00+00:00")
    assert untried_kernels(dataclasses.replace(old, dtype="float32"), H100_BUDGET) == ["scatter"]
    monkeypatch.setattr(spmm_scatter, "available", lambda: False)
    assert untried_kernels(old, H100_BUDGET) == []
    assert untried_kernels(dataclasses.replace(old, dtype="float32"), H100_BUDGET) == []


@pytest.mark.filterwarnings("ignore::stuning.db.StaleEntriesWarning")  # entries of Triton 3.6, not this one
def test_db_untried_lists_the_entries_to_tune_again(tmp_path, monkeypatch, capsys, scatter_in_space):
    monkeypatch.setenv("STUNING_DB_DIR", str(tmp_path))
    name = "NVIDIA H100 80GB HBM3"
    env = Environment(name, triton="3.6.0", torch="2.11.0", cuda="13.0", stuning="0.2.0",
                      compute_capability=(9, 0), sm_count=132)
    db = TuningDB.open(name, search_path=[tmp_path], write_dir=tmp_path, env=env)
    fresh = spmm_entry(kernels=["csr", "scatter", "sell"])
    db.put(spmm_entry(updated="2026-11-24T10:00:00+00:00"), "old")
    db.put(fresh, "fresh")
    db.put(dataclasses.replace(fresh, dtype="float32", tuner=dict(fresh.tuner, kernels=["csr", "sell"])), "fp32")
    db.save()
    assert cli_main(["db", "untried", "--device", name, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["entries"]
    assert listed == {"old": {"kernel": "csr", "time_us": 20.0, "untried": ["scatter"], "answered_by": None},
                      "fp32": {"kernel": "csr", "time_us": 20.0, "untried": ["scatter"], "answered_by": None}}


def test_db_untried_says_which_entries_a_siblings_wider_search_answers_for(tmp_path, monkeypatch, capsys,
                                                                            scatter_in_space):
    monkeypatch.setenv("STUNING_DB_DIR", str(tmp_path))
    name = "NVIDIA H200"
    here = dataclasses.replace(open_db(name).env, compute_capability=(9, 0), sm_count=132)  # the CLI's, with a chip
    h100 = dataclasses.replace(here, device="NVIDIA H100 80GB HBM3")
    old = dataclasses.replace(spmm_entry(kernels=["csr", "sell"], dtype="float32"), env=here.entry_env("spmm"))
    theirs = dataclasses.replace(old, env=h100.entry_env("spmm"), best=TimedConfig({"kernel": "scatter"}, 8.0),
                                 tuner=dict(old.tuner, kernels=["csr", "scatter", "sell"]))
    for env, entries in ((here, {"fp32": old, "fp32-slower-there": old}),
                         (h100, {"fp32": theirs, "fp32-slower-there": dataclasses.replace(
                             theirs, best=TimedConfig({"kernel": "scatter"}, 30.0))})):
        db = TuningDB.open(env.device, search_path=[tmp_path], write_dir=tmp_path, env=env)
        for key, e in entries.items():
            db.put(e, key)
        db.save()
    assert cli_main(["db", "untried", "--device", name, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["entries"]
    assert listed["fp32"]["answered_by"] == {"device": "NVIDIA H100 80GB HBM3", "kernel": "scatter", "time_us": 8.0}
    assert listed["fp32-slower-there"]["answered_by"] is None
    assert cli_main(["db", "untried", "--device", name]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1 of them answer with a sibling device's entry" in out


@pytest.mark.filterwarnings("ignore::stuning.db.StaleEntriesWarning")
@pytest.mark.parametrize("gluon", [True, False])
def test_db_untried_says_which_kernels_this_triton_cannot_judge(tmp_path, monkeypatch, capsys, gluon):
    # Off Gluon's Triton an fp32 entry that never tried the scatter kernel is not listed, and the
    # listing must say why rather than read as "nothing to re-tune".
    monkeypatch.setattr(spmm_scatter, "available", lambda: gluon)
    monkeypatch.setattr(semi24_hopper, "available", lambda: gluon)
    monkeypatch.setenv("STUNING_DB_DIR", str(tmp_path))
    name = "NVIDIA H100 80GB HBM3"
    db = TuningDB.open(name, search_path=[tmp_path], write_dir=tmp_path)
    db.put(spmm_entry(kernels=["csr", "sell"], dtype="float32"), "fp32")
    db.save()
    missing = {} if gluon else {"semi24": ["hopper", "sparse_mma", "wgmma_sp"], "spmm": ["scatter"]}
    assert kernels_not_installed() == missing
    assert kernels_not_installed(["sddmm"]) == {}
    assert cli_main(["db", "untried", "--device", name, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["not_judged"] == missing
    assert list(listed["entries"]) == (["fp32"] if gluon else [])
    assert cli_main(["db", "untried", "--device", name, "--op", "spmm"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("Not judged" in out) is not gluon
    if not gluon:
        assert "spmm scatter" in out and "semi24" not in out


SCATTER_REBUILT = KERNELS_REBUILT["spmm"]["scatter"]


def test_a_kernel_rebuilt_since_counts_as_untried_where_another_won(scatter_in_space):
    searched = ["csr", "scatter", "sell"]
    before = spmm_entry(kernels=searched, updated="2026-11-25T01:00:00+00:00")
    assert untried_kernels(before, H100_BUDGET) == ["scatter"]
    assert untried_kernels(spmm_entry(kernels=searched, updated=SCATTER_REBUILT), H100_BUDGET) == []
    # Its config won on the old form and runs on the new one: nothing to search again for (unless a
    # later launch change re-ranked its configs: the next test).
    won = dataclasses.replace(before, best=TimedConfig({"kernel": "scatter"}, 20.0),
                              updated=CONFIGS_RERANKED["spmm"]["scatter"][0])
    assert untried_kernels(won, H100_BUDGET) == []


@pytest.mark.parametrize("n, listed", [(16, False), (64, True), (128, True), (512, True), (2048, False)])
def test_a_kernel_whose_configs_were_reranked_counts_as_untried_where_it_won(scatter_in_space, n, listed):
    # The four-split clusters (BENCHMARKS.md 8v-8x) re-ranked the scatter kernel's own configs at N
    # tiles of 64 and up with few bands: an entry it won before them is searched again, at those N.
    searched = ["csr", "scatter", "sell"]
    reranked = CONFIGS_RERANKED["spmm"]["scatter"][0]
    features = dict(synthetic_spmm_features(768, 3072, n, 0.1, torch.float16).values)

    def entry(kernel, updated):
        return dataclasses.replace(spmm_entry(kernels=searched, updated=updated), features=features,
                                   best=TimedConfig({"kernel": kernel}, 9.6))

    before = "2026-11-25T12:00:00+00:00"
    assert untried_kernels(entry("scatter", before), H100_BUDGET) == (["scatter"] if listed else [])
    assert untried_kernels(entry("scatter", reranked), H100_BUDGET) == []
    assert "scatter" not in untried_kernels(entry("csr", reranked), H100_BUDGET)


@pytest.mark.parametrize("dtype, listed", [("float32", True), ("float16", False)])
def test_fp32_sddmm_entries_from_before_the_fp16_parts_search_the_tiles_again(dtype, listed):
    # fp32 tiles became fp16 parts (not tf32x3): an fp32 entry from before, whichever kernel won,
    # lists the tiled kernel; a 16-bit entry's tiles did not change.
    features = dict(synthetic_sddmm_features(4096, 4096, 2048, 0.05, dtype).values)
    rebuilt = KERNELS_REBUILT["sddmm"]["tiled"]
    searched = ["dense", "gather", "tiled"]

    def entry(kernel, updated):
        return DBEntry(op="sddmm", dtype=dtype, features=features, best=TimedConfig({"kernel": kernel}, 400.0),
                       tuner={"kernels": searched}, updated=updated)

    before = "2026-11-26T09:20:52+00:00"
    for kernel in searched:
        assert untried_kernels(entry(kernel, before), H100_BUDGET) == (["tiled"] if listed else []), kernel
        assert untried_kernels(entry(kernel, rebuilt), H100_BUDGET) == []


def test_sliced_ell_counts_as_rebuilt_only_where_it_cuts_rows(scatter_in_space, monkeypatch):
    # Its rebuild cut rows longer than CUT_SLACK x the mean: skewed entries from before it are listed
    # unless sliced ELL won; entries whose rows it would not cut are not. (The scatter kernel's later
    # rebuild and re-ranking left out: they would list them all.)
    monkeypatch.delitem(KERNELS_REBUILT["spmm"], "scatter")
    monkeypatch.delitem(CONFIGS_RERANKED["spmm"], "scatter")
    sell_rebuilt = KERNELS_REBUILT["spmm"]["sell"]
    searched = ["csr", "scatter", "sell"]
    before = "2026-11-25T15:00:00+00:00"

    def entry(row_cv, updated=before, kernel="csr"):
        f = synthetic_spmm_features(4096, 4096, 128, 0.05, torch.float16, row_cv=row_cv)
        return dataclasses.replace(spmm_entry(kernels=searched, updated=updated), features=dict(f.values),
                                   best=TimedConfig({"kernel": kernel}, 20.0))

    assert untried_kernels(entry(0.4), H100_BUDGET) == ["sell"]
    assert untried_kernels(entry(0.05), H100_BUDGET) == []  # longest row 1.15x the mean: nothing cut
    assert untried_kernels(entry(0.4, updated=sell_rebuilt), H100_BUDGET) == []
    assert untried_kernels(entry(0.4, kernel="sell"), H100_BUDGET) == []
    assert untried_kernels(entry(0.4, kernel="scatter"), H100_BUDGET) == ["sell"]


def test_an_entry_seeds_its_configs_of_a_rebuilt_kernel(scatter_in_space):
    features = synthetic_spmm_features(4096, 4096, 128, 0.1, torch.float16)
    fam = family("spmm")
    space = fam.space(features, H100_BUDGET)
    scatter = [c for c in space if c.kernel == "scatter"][:2]
    csr = [c for c in space if c.kernel == "csr"][:3]
    entry = dataclasses.replace(
        spmm_entry(kernels=["csr", "scatter", "sell"], updated="2026-11-25T01:00:00+00:00"),
        best=TimedConfig(csr[0].as_dict(), 20.0),
        top_k=[TimedConfig(c.as_dict(), t) for c, t in zip([csr[0], csr[1], scatter[0], csr[2], scatter[1]],
                                                             [20.0, 21.0, 22.0, 23.0, 24.0], strict=True)])
    db = TuningDB.open("NVIDIA H100 80GB HBM3", search_path=[], write_dir=None)
    db.put(entry, key_for(features))
    own, _ = seeds_from_db(db, features, H100_BUDGET)
    assert own == [csr[0], scatter[0], scatter[1]]
    db = TuningDB.open("NVIDIA H100 80GB HBM3", search_path=[], write_dir=None)
    db.put(dataclasses.replace(entry, updated=SCATTER_REBUILT), key_for(features))
    assert seeds_from_db(db, features, H100_BUDGET)[0] == [csr[0], csr[1], scatter[0], csr[2], scatter[1]]


def _entry_of(features, *, updated: str, time_us: float) -> DBEntry:
    return DBEntry(op="spmm", dtype=features.dtype, features=dict(features.values),
                   best=TimedConfig({"kernel": "csr"}, time_us),
                   tuner={"strategy": "model+optuna", "trials": 4, "seconds": 1.0}, updated=updated, measured=True)


def test_tune_untried_retunes_the_listed_entries_on_their_keys(db_dir, capsys, fake_measuring):
    # Here (no sm_90) the spaces hold CSR and sliced ELL: entries from before sliced ELL joined,
    # one read with B row-major and one with B as a transposed view (keyed bt=1), never tried it.
    before_sell = "2026-11-23T00:00:00+00:00"
    keys = []
    for b_t in (False, True):
        features = spmm_problem(SpMMCase(48, 64, 16, 0.75, 0.0, "fp16"), device="cpu", b_transposed=b_t).features
        keys.append(key_for(features))
        db = open_db()
        # The second entry's best (1 us) beats every re-tuned config (5 us) and stays, re-dated.
        db.put(_entry_of(features, updated=before_sell, time_us=1.0 if b_t else 20.0), keys[-1])
        db.save()
    assert "bt=1" in keys[1] and "bt=1" not in keys[0]
    listed = json.loads(_cli(capsys, ["db", "untried", "--json"]))["entries"]
    assert sorted(listed) == sorted(keys) and all(e["untried"] == ["sell"] for e in listed.values())
    fake_measuring.extend([10.0, 10.0])
    out = json.loads(_cli(capsys, ["tune", "--untried", "--trials", "2", "--json"]))
    assert sorted(r["key"] for r in out["results"]) == sorted(keys) and not out["skipped"]
    assert all(r["measured"] for r in out["results"])
    assert json.loads(_cli(capsys, ["db", "untried", "--json"]))["entries"] == {}
    assert all(open_db().get(k).updated > before_sell for k in keys)
    assert [open_db().get(k).best.time_us for k in keys] == [5.0, 1.0]


@pytest.mark.parametrize("k_strided", [False, True])
def test_tune_untried_retunes_sddmm_entries_on_their_keys(db_dir, capsys, fake_measuring, k_strided):
    # An SDDMM entry from before the tiled and dense kernels joined, on a mask of even rows; A read
    # in place or as a weight gradient's transposed view (keyed at=1).
    case = SDDMMCase(40, 56, 32, 0.7, "fp32", k_strided=k_strided)
    features = build_problem(case, device="cpu").features
    key = key_for(features)
    assert ("at=1" in key) is k_strided
    db = open_db()
    db.put(dataclasses.replace(_entry_of(features, updated="2026-11-23T00:00:00+00:00", time_us=20.0), op="sddmm",
                               best=TimedConfig({"kernel": "gather"}, 20.0)), key)
    db.save()
    listed = json.loads(_cli(capsys, ["db", "untried", "--json"]))["entries"]
    assert list(listed) == [key] and "tiled" in listed[key]["untried"]
    fake_measuring.append(10.0)
    out = json.loads(_cli(capsys, ["tune", "--untried", "--trials", "2", "--json"]))
    assert [r["key"] for r in out["results"]] == [key] and not out["skipped"], out["skipped"]
    assert json.loads(_cli(capsys, ["db", "untried", "--json"]))["entries"] == {}
    assert open_db().get(key).best.time_us == 5.0


def test_entries_of_other_ops_are_named_not_retuned():
    entry = DBEntry(op="semi24", dtype="float16", features={"m": 64, "k": 64, "n": 16, "b_t": 1},
                    best=TimedConfig({"kernel": "triton"}, 20.0), tuner={}, updated="2026-11-23T00:00:00+00:00")
    problem, why = entry_problem("semi24|...", entry)
    assert problem is None and "pretune" in why


def _cli(capsys, argv) -> str:
    assert cli_main(argv) == 0
    return capsys.readouterr().out
