"""Tuning end to end in the interpreter, and the run-time chain: exact, nearest, model, heuristic."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest
import torch
from naive import TOL, assert_close, random_24, random_sparse, semi24_ref, spmm_ref

import stuning
from stuning import CSRMatrix, Semi24Matrix
from stuning.db import DBEntry, TimedConfig, TuningDB
from stuning.ops.selection import SELECTOR
from stuning.suite import SpMMCase
from stuning.tuning.driver import tune_case
from stuning.tuning.features import semi24_features, spmm_features
from stuning.tuning.session import key_for, local_environment, open_db


def test_model_only_tune_end_to_end_in_the_interpreter(db_dir):
    case = SpMMCase(48, 64, 24, 0.8, 0.4, "bf16")
    outcome, key = tune_case(case, strategy="model", device_name="h100")
    assert not outcome.measured and outcome.best_time_us is None and outcome.timed == 0
    doc = json.loads((db_dir / "nvidia-h100-sxm.json").read_text())
    entry = doc["entries"][key]
    assert entry["measured"] is False and entry["best"]["time_us"] is None  # a prediction, labelled so
    assert entry["best"]["config"] == outcome.best_config.as_dict()
    assert entry["tuner"]["strategy"] == "model"
    # What the search could pick from, so that a kernel added later shows the entry as untried.
    assert entry["tuner"]["kernels"] == list(outcome.kernels) and {"csr", "sell"} <= set(outcome.kernels)
    assert doc["device"]["name"] == "NVIDIA H100 SXM"


def test_measuring_strategies_refuse_without_a_gpu(db_dir):
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        tune_case(SpMMCase(16, 32, 8, 0.5, 0.0, "fp32"), strategy="model+optuna")


def _put(db: TuningDB, a: CSRMatrix, n: int, config: dict) -> str:
    f = spmm_features(a, n)
    key = key_for(f)
    db.put(DBEntry(op="spmm", dtype=f.dtype, features=dict(f.values), best=TimedConfig(config, 12.5),
                   top_k=[TimedConfig(config, 12.5)], predicted_us=10.0, measured=True,
                   tuner={"strategy": "exhaustive", "trials": 1, "seconds": 0.1},
                   env=local_environment().entry_env("spmm")), key)
    db.save()
    return key


# A config no heuristic or model would pick for these shapes, to see where an answer came from.
ODD = {"rows": 2, "nnz_step": 8, "block_n": 16, "vec": 1, "swizzle": True, "num_warps": 2, "num_stages": 1}


def test_run_time_chain_exact_nearest_model(db_dir, gen):
    dense = random_sparse(40, 64, 0.25, torch.float32, gen)
    a = CSRMatrix.from_dense(dense)
    db = open_db()
    _put(db, a, 32, ODD)
    SELECTOR.reset()

    def source(matrix, n):
        return SELECTOR.choose(spmm_features(matrix, n), key_for(spmm_features(matrix, n)))

    cfg, how = source(a, 32)
    # Stored before either field existed; N = 32 is a decode width, where CSR configs prefetch.
    assert how == "exact" and cfg.as_dict() == {**ODD, "kernel": "csr", "prefetch": True, "split_k": 1}
    cfg, how = source(a, 33)  # another width bucket: the nearest entry, repaired (vec must divide 33)
    assert how == "nearest" and cfg.rows == 2 and cfg.vec == 1
    far = CSRMatrix.from_dense(random_sparse(400, 640, 0.9, torch.float32, gen))
    cfg, how = source(far, 4096)
    assert how == "model"
    # The op uses the chosen config and stays correct.
    b = torch.randn(64, 33, generator=gen)
    assert_close(stuning.spmm(a, b), spmm_ref(dense, b), TOL[torch.float32], "spmm via nearest entry")


@pytest.mark.parametrize("seed", range(3))
def test_a_padded_weight_finds_its_unpadded_problems_entry(db_dir, seed):
    # 98% zeros, ~61 nonzeros a row: padding rows to fours adds ~2.5% entries, which crossed the
    # density grid's boundary, so the bench's padded matrices missed the entries tuned for them.
    gen = torch.Generator().manual_seed(seed)
    a = CSRMatrix.from_dense(random_sparse(32, 3072, 0.02, torch.float16, gen))
    padded = a.padded(4)
    assert padded.nnz > 1.02 * a.nnz
    assert key_for(spmm_features(padded, 128)) == key_for(spmm_features(a, 128))
    db = open_db()
    _put(db, a, 128, ODD)
    SELECTOR.reset()
    _, how = SELECTOR.choose(spmm_features(padded, 128), key_for(spmm_features(padded, 128)))
    assert how == "exact"


def test_an_entry_the_kernel_no_longer_takes_falls_back_to_the_model(db_dir, gen):
    # A 2:4 config tuned for the kernel before its rewrite, which Triton 3.6 cannot compile now.
    dense = random_24(128, 256, torch.float16, gen)
    w = Semi24Matrix.from_dense(dense)
    f = semi24_features(128, 256, 64, torch.float16)
    dropped = {"block_m": 128, "block_n": 64, "block_k": 64, "group_m": 1, "split_k": 1, "num_warps": 4,
               "num_stages": 2}
    db = open_db()
    db.put(DBEntry(op="semi24", dtype=f.dtype, features=dict(f.values), best=TimedConfig(dropped, 12.5),
                   top_k=[TimedConfig(dropped, 12.5)], predicted_us=10.0, measured=True,
                   tuner={"strategy": "exhaustive", "trials": 1, "seconds": 0.1},
                   env=local_environment().entry_env("semi24")), key_for(f))
    db.save()
    SELECTOR.reset()
    with pytest.warns(UserWarning, match="ignoring database entry .*Triton 3.6 fails to compile"):
        cfg, how = SELECTOR.choose(f, key_for(f))
    assert how == "model" and cfg.as_dict() != dropped
    x = torch.randn(256, 64, generator=gen).to(torch.float16)
    assert_close(stuning.semi24_mm(w, x), semi24_ref(dense, x), TOL[torch.float16], "2:4 after the fallback")


def test_heuristic_when_the_model_cannot_answer(db_dir, gen, monkeypatch):
    a = CSRMatrix.from_dense(random_sparse(24, 32, 0.5, torch.float32, gen))
    monkeypatch.setenv("STUNING_NO_DB", "1")
    monkeypatch.setattr(SELECTOR, "model", lambda: (_ for _ in ()).throw(RuntimeError("no model")))
    f = spmm_features(a, 16)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        cfg, how = SELECTOR.choose(f, key_for(f))
    assert how == "heuristic"
    from stuning.tuning.registry import family

    assert cfg == family("spmm").default(f)


def test_misses_are_counted_and_listed(db_dir, gen):
    a = CSRMatrix.from_dense(random_sparse(20, 24, 0.5, torch.float32, gen))
    stuning.spmm(a, torch.randn(24, 8, generator=gen))
    db = SELECTOR.db()
    assert any(m["op"] == "spmm" for m in db.misses().values())
    db.flush_misses()
    listed = open_db().load_misses()
    assert any(m["op"] == "spmm" and m["count"] >= 1 for m in listed.values())


def test_corrupt_database_is_a_clear_error(db_dir, gen):
    (db_dir / "triton-interpreter-cpu.json").write_text("{ not json")
    a = CSRMatrix.from_dense(random_sparse(20, 24, 0.5, torch.float32, gen))
    with pytest.raises(ValueError, match="triton-interpreter-cpu.json"):
        stuning.spmm(a, torch.randn(24, 8, generator=gen))
    assert (db_dir / "triton-interpreter-cpu.json").read_text() == "{ not json"


def test_seeded_ranking_puts_own_configs_first_and_alternates_neighbours_with_the_model():
    from stuning.tuning.tuner import seeded_ranking

    ranked = [(c, float(i)) for i, c in enumerate("abcdefg")]
    order = [c for c, _ in seeded_ranking(ranked, seeds=["e", "x", "e"], nearby=["f", "a", "g", "y", "e"])]
    # own first (unknown and repeated ones dropped), then neighbour / model turn about, nothing lost
    assert order == ["e", "f", "b", "a", "c", "g", "d"]
    assert dict(seeded_ranking(ranked, ["e"], ["f"]))["e"] == 4.0  # predictions kept
    assert seeded_ranking(ranked) == ranked


def test_seeds_are_the_own_entry_whole_and_only_the_best_of_each_neighbour(db_dir, gen):
    from stuning.tuning.driver import seeds_from_db

    a = CSRMatrix.from_dense(random_sparse(40, 64, 0.25, torch.float32, gen))
    db = open_db()
    own = [dict(ODD, num_warps=w) for w in (2, 4)]
    near = [dict(ODD, rows=r) for r in (1, 4)]
    for n, configs in ((32, own), (8, near)):
        f = spmm_features(a, n)
        db.put(DBEntry(op="spmm", dtype=f.dtype, features=dict(f.values), best=TimedConfig(configs[0], 10.0),
                       top_k=[TimedConfig(c, 10.0 + i) for i, c in enumerate(configs)], predicted_us=10.0,
                       measured=True, tuner={"strategy": "exhaustive", "trials": 2, "seconds": 0.1},
                       env=local_environment().entry_env("spmm")), key_for(f))
    db.save()
    seeds, nearby = seeds_from_db(open_db(), spmm_features(a, 32))
    assert [(c.rows, c.num_warps) for c in seeds] == [(2, 2), (2, 4)]
    assert [(c.rows, c.num_warps) for c in nearby] == [(1, 2)]  # the neighbour's best, not its runners-up
    # An own entry whose search never tried a kernel of today's space (here: tuned before the
    # sliced-ELL kernel joined) seeds only its best, so a short search reaches the new kernel.
    db = open_db()
    key = key_for(spmm_features(a, 32))
    old = db.get(key)
    db.put(dataclasses.replace(old, tuner=dict(old.tuner, kernels=["csr"])), key)
    db.save()
    seeds, _ = seeds_from_db(open_db(), spmm_features(a, 32))
    assert [(c.rows, c.num_warps) for c in seeds] == [(2, 2)]
