"""Search coverage: which database entries were tuned before a kernel joined their op's config space,
or while it ran in an older, slower form.

A lookup returns a problem's entry as it is, and ``pretune`` skips problems the database holds, so a
kernel added to the library never competes for problems tuned before it: on the H200 such entries
ran up to 1.9x slower than a re-tune (BENCHMARKS.md 8b). An entry records the kernels its searched
space held (``tuner.kernels``); entries written before that record existed are judged by the date
each kernel joined its op's space, against the entry's ``updated``.

A kernel rebuilt to run faster under the same configs (no new kernel revision: its configs and
results stay valid) lost its searches to other kernels on times it no longer runs at. An entry
updated before the rebuild whose best is another kernel counts that kernel as untried too, where
the rebuild changed the entry's problem (``REBUILT_FOR``: sliced ELL's cut rows, only skewed ones;
the tiled SDDMM kernel's fp16 parts, only fp32).
A launch change that re-ranked a kernel's own configs (``CONFIGS_RERANKED``) counts that kernel as
untried for entries it won before the change, on the problems the change touched.

Whether a kernel is in a problem's space depends on the device and on this installation (the Gluon
kernels need sm_90 and Triton 3.6), so which kernels an entry never tried depends on the machine
that asks.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from stuning.db.entry import DBEntry, parse_timestamp
from stuning.formats.sell import CUT_SLACK
from stuning.kernels import semi24_hopper, semi24_sparse_mma, semi24_wgmma_sp, spmm_scatter
from stuning.kernels.target import DeviceBudget
from stuning.tuning.features import ProblemFeatures
from stuning.tuning.registry import family

# When each kernel joined its op's config space (UTC; the commit that added it). Kernels of the first
# release are absent: no entry predates them.
KERNELS_JOINED: dict[str, dict[str, str]] = {
    "spmm": {"sell": "2026-11-23T11:30:23+00:00", "scatter": "2026-11-24T13:49:03+00:00"},
    "sddmm": {"tiled": "2026-11-23T11:33:37+00:00", "dense": "2026-11-26T05:52:07+00:00"},
    "semi24": {"hopper": "2026-11-24T05:40:51+00:00", "sparse_mma": "2026-11-24T17:02:51+00:00",
               "wgmma_sp": "2026-11-24T22:02:20+00:00"},
}


# When a kernel's current form shipped, for kernels rebuilt since joining where the rebuild moved
# their times well past run-to-run noise (UTC; the commit). The scatter SpMM kernel: entries through
# a ring, split-K slices, tile lists of one capacity (BENCHMARKS.md 7y-8b): 4096 x 4096 at N = 128
# from 19.2 to 15.2 us; then two splits as a cluster (8u): 14.5 to 11.3-11.8 us at 95% zeros. The
# sliced-ELL capacity (8f) moved its rows within noise, so it is absent.
# The tiled SDDMM kernel: fp32 tiles as one fp16 product of the operands' parts, in place of three
# TF32 products (BENCHMARKS.md 9o).
KERNELS_REBUILT: dict[str, dict[str, str]] = {
    "spmm": {"scatter": "2026-11-25T23:51:04+00:00", "sell": "2026-11-25T15:48:44+00:00"},
    "sddmm": {"tiled": "2026-12-07T02:50:00+00:00"},
}


def _rows_to_cut(entry: DBEntry) -> bool:
    features = entry.features
    return features.get("row_max", 0) > CUT_SLACK * features.get("row_mean", 0)


def _fp32(entry: DBEntry) -> bool:
    return entry.dtype == "float32"


# The problems a rebuild changed, where not all (entry -> whether it did). Sorted sliced ELL cuts
# rows longer than their share (a283186: 768 x 3072 at N = 128, 95% zeros, rows of cv 0.4 from 14.1
# to 9.3 us, BENCHMARKS.md 8n); where no row is longer than CUT_SLACK x the mean, nothing is cut.
# The tiled SDDMM kernel's fp16 parts change only fp32 tiles.
REBUILT_FOR: dict[str, dict[str, Callable[[DBEntry], bool]]] = {
    "spmm": {"sell": _rows_to_cut},
    "sddmm": {"tiled": _fp32},
}


def _four_split_clusters(entry: DBEntry) -> bool:
    return 64 <= entry.features.get("n", 0) <= 512


# Launch changes that re-ranked a kernel's own configs, not only its time against other kernels'
# (UTC, the commit; and the problems it changed): an entry updated before one whose best is that
# kernel counts it as untried too, so `db untried` lists it and `tune --untried` searches it again.
# The scatter kernel's four K splits as a cluster of four (8v, 61769b5) made four-split configs
# faster where N tiles are 64 and up and the bands few: on the H200 a thresholded 768 x 3072 weight at
# N = 128, 90% zeros, ran 6.2 us on an even-row entry's four-split config and 9.8 us on its own
# entry's eight-split one, tuned before the clusters (BENCHMARKS.md 8x). From N = 2048 the bands fill
# the GPU without splits.
# fp32 SDDMM tiles as fp16 parts halve a tile's shared memory and MMA time and add a pass that
# splits A and B, so the tile shapes and depths that won under tf32x3 need not win now.
CONFIGS_RERANKED: dict[str, dict[str, tuple[str, Callable[[DBEntry], bool]]]] = {
    "spmm": {"scatter": ("2026-11-26T01:19:10+00:00", _four_split_clusters)},
    "sddmm": {"tiled": (KERNELS_REBUILT["sddmm"]["tiled"], _fp32)},
}


# Kernels that only some Triton releases run (Gluon's API as used here): where this installation's
# does not, they are out of every space, so no entry counts them as untried here, whatever the
# entry's device runs. (Each kernel's module: its ``available()``.)
KERNELS_INSTALLED: dict[str, dict[str, ModuleType]] = {
    "spmm": {"scatter": spmm_scatter},
    "semi24": {"hopper": semi24_hopper, "sparse_mma": semi24_sparse_mma, "wgmma_sp": semi24_wgmma_sp},
}


def kernels_not_installed(ops=None) -> dict[str, list[str]]:
    """The kernels of each op (of ``ops`` if given) that this installation cannot run, so that
    ``untried_kernels`` never names them here; ops with none are left out."""
    missing = {op: sorted(k for k, module in kernels.items() if not module.available())
               for op, kernels in KERNELS_INSTALLED.items() if ops is None or op in ops}
    return {op: kernels for op, kernels in missing.items() if kernels}


def space_kernels(space) -> tuple[str, ...]:
    """The kernels a config space holds, sorted (the database records them with each entry)."""
    return tuple(sorted({c.kernel for c in space}))


def untried_kernels(entry: DBEntry, budget: DeviceBudget) -> list[str]:
    """The kernels of the entry's problem's space on ``budget``'s device that its search never
    covered, or covered only in a form since rebuilt while another kernel won (sorted; empty: up to
    date)."""
    features = ProblemFeatures(entry.op, entry.dtype, dict(entry.features))
    try:
        space = family(entry.op).space(features, budget)
    except (KeyError, TypeError, ValueError):  # features of another layout: nothing to compare
        return []
    current = set(space_kernels(space))
    updated = parse_timestamp(entry.updated)
    searched = entry.tuner.get("kernels")
    if searched is not None:
        never = current - set(searched)
    else:
        joined = KERNELS_JOINED.get(entry.op, {})
        never = {k for k in current if k in joined and updated < parse_timestamp(joined[k])}
    rebuilt = KERNELS_REBUILT.get(entry.op, {})
    touched = REBUILT_FOR.get(entry.op, {})
    older = {k for k in current if k in rebuilt and updated < parse_timestamp(rebuilt[k])
             and entry.best.config.get("kernel") != k and touched.get(k, lambda e: True)(entry)}
    best = entry.best.config.get("kernel")
    reranked = CONFIGS_RERANKED.get(entry.op, {}).get(best)
    if best in current and reranked and updated < parse_timestamp(reranked[0]) and reranked[1](entry):
        older.add(best)
    return sorted(never | older)


def untried_entries(db, budget: DeviceBudget, ops=None) -> list:
    """(key, entry, its untried kernels) for each entry of ``db`` (of ``ops`` if given) whose search
    never covered a kernel of its space, in key order: what ``stuning db untried`` lists."""
    found = []
    for key, entry in sorted(db.entries().items()):
        if ops is None or entry.op in ops:
            untried = untried_kernels(entry, budget)
            if untried:
                found.append((key, entry, untried))
    return found
