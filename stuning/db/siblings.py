"""Sibling devices: other GPUs of the same chip, whose tuned configs stand in for missing ones.

Two devices are siblings when their database headers name the same compute capability and SM
count: an H100 SXM and an H200 share the Hopper die, its shared memory and its register file, and
differ in memory bandwidth. A config's fit (tiles, warps, stages) is decided by the first, so a
sibling's tuned winner is a far better answer than the cost model's guess. On the H100 the H200's
tuned config was the H100's own tuned best in 63 of 98 keys, and where it was not it ran 0.1-3.8%
slower than that best (BENCHMARKS.md 9p). A sibling's entry also stands in for an own entry of the
same problem whose search never tried the kernel that won on the sibling (``searched_further``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

from stuning.db.entry import DBEntry
from stuning.db.paths import db_file_name
from stuning.db.storage import load_document, load_entries

# The distance a sibling's entry counts further than this device's own in a lookup: an own entry
# of a problem within 0.25 (a size 19% off, in log2 of ratios) answers before the sibling's entry
# of the problem itself, which is a measurement on another GPU.
SIBLING_DEVICE_DISTANCE = 0.25

ChipIdentity = tuple[tuple[int, ...], int]


def searched_further(own: DBEntry, theirs: DBEntry) -> bool:
    """Whether a sibling's entry of the same problem knows it better than this device's own: its
    search covered a kernel ``own``'s never did (each records the kernels its space held), that
    kernel won there, and in less time than ``own``'s best here.

    An entry tuned before a kernel joined the library never tried it, and the lookup would return
    it as it is. The shipped H200 database held 29 fp32 SpMM entries (`sell`, `csr`) tuned before
    the scatter kernel took fp32, whose keys the H100 tuned later with it, each choosing it. In 28
    the H100's time was 0.37-0.99x the H200 entry's recorded one (4096 x 11008 at N = 2048, 90% zeros:
    969 against 2604 us; on the H100 the H200's config ran 2848 us, BENCHMARKS.md 9s); the 29th,
    1.5% slower, keeps its own. All 28 have since been re-tuned on the H200 (9u, 9v), so no shipped
    entry answers through this rule today; entries tuned before the next new kernel will.
    Times from two devices compare only because siblings are one chip.
    """
    mine, searched = own.tuner.get("kernels"), theirs.tuner.get("kernels")
    if not mine or not searched or not (own.measured and theirs.measured):
        return False
    kernel, time_us, own_us = theirs.best.config.get("kernel"), theirs.best.time_us, own.best.time_us
    return (kernel in searched and kernel not in mine and time_us is not None and own_us is not None
            and time_us < own_us)


def chip_identity(device_header: dict | None) -> ChipIdentity | None:
    """(compute capability, SM count) from a database's ``device`` header; None if either is unknown."""
    header = device_header or {}
    capability, sm_count = header.get("compute_capability"), header.get("sm_count")
    if not capability or not isinstance(sm_count, int) or sm_count <= 0:
        return None
    return tuple(int(x) for x in capability), sm_count


def load_sibling_entries(search_path: list[Path], device_name: str, identity: ChipIdentity | None,
                         is_answer: Callable[[DBEntry], bool]) -> dict[tuple[str, str], dict[str, DBEntry]]:
    """Entries of sibling devices' files on ``search_path``, grouped by (op, dtype).

    Per key the earliest directory wins, as for a device's own files. ``is_answer`` says whether an
    entry would answer here but for its device (the same Triton and kernel revision); the rest are
    left out. A sibling's file that cannot be read is skipped with a warning: it is not this
    device's database, so it must not stop a lookup.
    """
    groups: dict[tuple[str, str], dict[str, DBEntry]] = {}
    if identity is None:
        return groups
    own = db_file_name(device_name)
    for directory in search_path:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.json")):
            if path.name == own or path.name.startswith("misses-"):
                continue
            try:
                doc = load_document(path)
            except (OSError, ValueError) as e:
                warnings.warn(f"stuning: skipping {path} as a sibling device's database: {e}", stacklevel=4)
                continue
            header = doc.get("device") or {}
            if header.get("name") == device_name or chip_identity(header) != identity:
                continue
            for key, entry in load_entries(doc).items():
                if is_answer(entry):
                    groups.setdefault((entry.op, entry.dtype), {}).setdefault(key, entry)
    return groups
