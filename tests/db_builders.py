"""Entries and databases for the tuning-database tests (test_db.py, test_db_lookup.py, test_db_files.py)."""

from __future__ import annotations

from pathlib import Path

from stuning.db import DBEntry, Environment, TimedConfig, TuningDB, merge_entries

DEVICE = "NVIDIA H100 80GB HBM3"
ENV = Environment(DEVICE, triton="3.2.0", torch="2.5.1", cuda="12.4", stuning="0.1.0",
                  compute_capability=(9, 0), sm_count=132)


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
