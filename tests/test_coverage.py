"""Search coverage (``stuning.tuning.coverage``): entries whose search never tried a kernel their
problem's space has now, how the tuner records what it searched, and ``stuning db untried``."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from stuning.kernels import spmm_scatter
from stuning.kernels.target import H100_BUDGET

from stuning.cli.main import main as cli_main
from stuning.db import DBEntry, Environment, TimedConfig, TuningDB
from stuning.tuning.coverage import KERNELS_JOINED, untried_kernels
from stuning.tuning.features import synthetic_spmm_features
from stuning.tuning.registry import family

pytestmark = pytest.mark.usefixtures("isolated_db_dirs")

SCATTER_JOINED = KERNELS_JOINED["spmm"]["scatter"]


def spmm_entry(*, kernels=None, updated="2026-11-25T00:00:00+00:00", dtype="float16") -> DBEntry:
    features = synthetic_spmm_features(4096, 4096, 128, 0.1, getattr(torch, dtype))
    tuner = {"strategy": "model+optuna", "trials": 8, "seconds": 5.0} | ({"kernels": kernels} if kernels else {})
    return DBEntry(op="spmm", dtype=dtype, features=dict(features.values),
                   best=TimedConfig({"kernel": "csr"}, 20.0), tuner=tuner, updated=updated)


@pytest.fixture
def scatter_in_space(monkeypatch):
    """This installation as the H100/H200's: the scatter kernel (Gluon, Triton 3.6) in fp16 spaces."""
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
    assert untried_kernels(spmm_entry(updated=SCATTER_JOINED), H100_BUDGET) == []
    assert untried_kernels(spmm_entry(updated="2026-11-23T00:00:00+00:00"), H100_BUDGET) == ["scatter", "sell"]


def test_a_kernel_outside_the_space_here_is_not_missed(monkeypatch):
    # fp32 has no scatter kernel, and without Gluon's Triton no problem has it.
    old = spmm_entry(updated="2026-11-24T10:00:00+00:00")
    assert untried_kernels(dataclasses.replace(old, dtype="float32"), H100_BUDGET) == []
    monkeypatch.setattr(spmm_scatter, "available", lambda: False)
    assert untried_kernels(old, H100_BUDGET) == []


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
    assert listed == {"old": {"kernel": "csr", "time_us": 20.0, "untried": ["scatter"]}}
