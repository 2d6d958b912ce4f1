"""TuningDB: one device's tuning results, read from the search path, written to one directory.

Reading: the device's file from every directory on the search path; per key the earliest directory
wins, except that an entry from the current environment beats a stale one from an earlier directory
(a stale entry is no answer, so it must not hide one). Current entries' ``failed`` lists are united
across directories: a config that failed in this environment fails whichever file recorded it. Stale
entries (another device or Triton version) stay loaded as seeds for a new search, and lookup skips
them.

Writing: put() collects entries in memory; save() merges them into the write directory's file under
its lock (storage.update_document), so concurrent tuners lose nothing.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from stuning.db.entry import (
    DBEntry,
    dtype_name,
    feature_distance,
    is_number,
    kept_model_picks,
    merge_entries,
    top_and_other_kernels,
    union_failed,
)
from stuning.db.environment import Environment, judges_kernels, same_environment
from stuning.db.misses import MissCounter, load_misses
from stuning.db.paths import (
    db_file_name,
    default_search_path,
    first_writable,
    misses_file_name,
    write_candidates,
)
from stuning.db.schema import DEFAULT_OBJECTIVE, empty_document
from stuning.db.siblings import (
    SIBLING_DEVICE_DISTANCE,
    chip_identity,
    load_sibling_entries,
    searched_further,
)
from stuning.db.storage import load_document, load_entries, merge_header, merge_into, update_document

HEADER_SECTIONS = ("calibration", "model_coefficients")


class StaleEntriesWarning(UserWarning):
    """Entries tuned on another device or Triton version were found; they are used only as seeds."""


class LookupResult(NamedTuple):
    entry: DBEntry | None
    how: str  # "exact" | "nearest" | "other-dtype" | "sibling" | "miss"
    distance: float | None  # 0.0 for exact, None for a miss


# fp16 and bf16 kernels share tile shapes, shared memory and registers, so a config tuned for one
# is a far better first guess for the other than the cost model's (measured on the H200: bf16 2:4 at
# 0.41x cuBLAS with the model's configs, fp16 at 0.63x with tuned ones). fp32 has its own widths.
SAME_WIDTH_DTYPES = {"float16": ("bfloat16",), "bfloat16": ("float16",)}
# The distance the other dtype adds to its entries' in a lookup: an entry of the same problem tuned
# in the other half dtype beats an own-dtype entry of a neighbour more than this far. On the H200's
# bf16 first table, bf16 entries of 90% zeros answering 70% problems ran 0.86x as fast as the fp16
# entries of those problems (BENCHMARKS.md 8q).
OTHER_DTYPE_DISTANCE = 0.5

_stale_warned = False  # one warning per process is enough to explain slow, untuned runs


class TuningDB:
    def __init__(self, device_name: str, env: Environment, search_path: list[Path], *,
                 write_dirs: list[Path], objective: str = DEFAULT_OBJECTIVE):
        self.device_name = device_name
        self.env = env
        self.search_path = search_path
        self.objective = objective
        self.files: list[Path] = []  # the files read, in search order
        self.calibration: dict = {}
        self.model_coefficients: dict = {}
        self._write_dirs = write_dirs
        self._entries: dict[str, DBEntry] = {}  # every key, current or stale
        self._answers: dict[str, DBEntry] = {}  # the current ones: what get and lookup return
        self._groups: dict[tuple[str, str], dict[str, DBEntry]] = {}  # (op, dtype) -> entries
        self._pending: dict[str, DBEntry] = {}
        self._pending_header: dict[str, dict] = {section: {} for section in HEADER_SECTIONS}
        self._missed = MissCounter()
        self._device_header: dict = {}  # the first own file's
        self._siblings: dict[tuple[str, str], dict[str, DBEntry]] | None = None  # read at the first miss
        self._load()

    @classmethod
    def open(cls, device_name: str, *, search_path=None, env: Environment | None = None,
             write_dir=None, objective: str = DEFAULT_OBJECTIVE) -> TuningDB:
        """Read ``device_name``'s files from ``search_path`` (default: paths.default_search_path()).

        Writes go to ``write_dir`` if given, else the first writable directory of an explicit
        ``search_path`` other than the shipped one, else $STUNING_DB_DIR or the user cache directory.
        """
        env = env if env is not None else Environment.detect(device_name)
        path = [Path(d) for d in search_path] if search_path is not None else default_search_path()
        if write_dir is not None:
            write_dirs = [Path(write_dir)]
        else:
            write_dirs = write_candidates(path if search_path is not None else None)
        return cls(device_name, env, path, write_dirs=write_dirs, objective=objective)

    # -- reading -----------------------------------------------------------------------------------

    def get(self, key: str) -> DBEntry | None:
        """The current-environment entry stored under ``key`` (a plain dict lookup)."""
        return self._answers.get(key)

    def entries(self, *, include_stale: bool = True) -> dict[str, DBEntry]:
        return dict(self._entries) if include_stale else dict(self._answers)

    def stale_entries(self) -> dict[str, DBEntry]:
        return {k: e for k, e in self._entries.items() if k not in self._answers}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._answers

    def lookup(self, op: str, dtype, key: str, features: dict, *, max_distance: float,
               feature_names=None) -> LookupResult:
        """The entry for ``key`` (``how`` "exact"; a sibling device's entry of ``key`` instead where
        it searched a kernel this one never did and found it faster: ``how`` "sibling", not counted
        as a miss, see ``siblings.searched_further``), else the nearest same-op entry within
        ``max_distance`` of the same dtype (``how`` "nearest"), of a dtype of the same width
        (``how`` "other-dtype", counted ``OTHER_DTYPE_DISTANCE`` further), or of a sibling device
        (``how`` "sibling", the problem itself included, counted ``SIBLING_DEVICE_DISTANCE`` further;
        see ``stuning.db.siblings``).

        Distance: ``feature_distance`` over ``feature_names`` (default: log2(1 + x) of every feature
        both have). Stale entries are never answers. A miss is counted (see misses()), also when an
        other-dtype or sibling entry answers: the problem itself is still untuned here.
        """
        entry = self._answers.get(key)
        if entry is not None:
            theirs = self._stand_in(entry, key)
            return LookupResult(entry, "exact", 0.0) if theirs is None else LookupResult(theirs, "sibling", 0.0)
        dtype, features = dtype_name(dtype), features or {}
        dtypes = (dtype, *SAME_WIDTH_DTYPES.get(dtype, ()))
        found = []  # (distance counted, order, result)
        for order, other in enumerate(dtypes):
            own = ((k, e) for k, e in self._groups.get((op, other), {}).items() if k in self._answers)
            nearest = self._nearest(own, features, max_distance, feature_names)
            if nearest is not None:
                counted = nearest[0] + (OTHER_DTYPE_DISTANCE if order else 0.0)
                found.append((counted, order, LookupResult(nearest[1], "other-dtype" if order else "nearest",
                                                           nearest[0])))
        # A sibling's entry cannot beat an own one this near, so its files are not read for it.
        if not found or min(found, key=lambda f: f[:2])[0] > SIBLING_DEVICE_DISTANCE:
            for order, other in enumerate(dtypes, start=len(dtypes)):
                siblings = self.sibling_entries().get((op, other), {}).items()
                nearest = self._nearest(siblings, features, max_distance, feature_names)
                if nearest is not None:
                    counted = nearest[0] + SIBLING_DEVICE_DISTANCE + (OTHER_DTYPE_DISTANCE if other != dtype else 0.0)
                    found.append((counted, order, LookupResult(nearest[1], "sibling", nearest[0])))
        result = min(found, key=lambda f: f[:2])[2] if found else LookupResult(None, "miss", None)
        if result.how != "nearest":
            self._missed.record(key, op, dtype, {k: v for k, v in features.items() if is_number(v)})
        return result

    def sibling_entries(self) -> dict[tuple[str, str], dict[str, DBEntry]]:
        """Sibling devices' entries that would answer here, by (op, dtype); read once, when first asked."""
        if self._siblings is None:
            here = {"compute_capability": self.env.compute_capability, "sm_count": self.env.sm_count}
            identity = chip_identity(here) or chip_identity(self._device_header)
            self._siblings = load_sibling_entries(self.search_path, self.device_name, identity,
                                                  self._answers_but_for_device)
        return self._siblings

    def sibling_stand_in(self, key: str) -> DBEntry | None:
        """A sibling device's entry of ``key`` that answers lookups in place of this device's own
        one, since its search found a faster kernel the own never tried (``searched_further``); or None."""
        return self._stand_in(self._answers.get(key), key)

    def _stand_in(self, entry: DBEntry | None, key: str) -> DBEntry | None:
        if entry is None or not entry.tuner.get("kernels"):  # nothing to compare: siblings stay unread
            return None
        theirs = self.sibling_entries().get((entry.op, entry.dtype), {}).get(key)
        return theirs if theirs is not None and searched_further(entry, theirs) else None

    @staticmethod
    def _nearest(candidates, features, max_distance, feature_names) -> tuple[float, DBEntry] | None:
        nearest = None
        for other_key, candidate in candidates:
            distance = feature_distance(features, candidate.features, feature_names)
            if distance is None or distance > max_distance:
                continue
            if nearest is None or (distance, other_key) < nearest[:2]:
                nearest = (distance, other_key, candidate)
        return None if nearest is None else (nearest[0], nearest[2])

    def seeds(self, op: str, dtype, features: dict, k: int = 5, *, feature_names=None) -> list[DBEntry]:
        """Up to ``k`` same-op, same-dtype entries, stale and sibling devices' ones included, nearest
        first (at equal distance this device's current entries, then its stale ones, then siblings'):
        search seeds."""
        dtype = dtype_name(dtype)
        own = self._groups.get((op, dtype), {}).items()
        siblings = self.sibling_entries().get((op, dtype), {}).items()
        ranked = []
        for rank, (key, entry) in enumerate([*own, *siblings]):
            distance = feature_distance(features, entry.features, feature_names)
            standing = 0 if key in self._answers and rank < len(own) else 1 if rank < len(own) else 2
            ranked.append((math.inf if distance is None else distance, standing, key, rank, entry))
        ranked.sort(key=lambda r: r[:4])
        return [r[4] for r in ranked[:k]]

    # -- writing -----------------------------------------------------------------------------------

    def put(self, entry: DBEntry, key: str) -> DBEntry:
        """Add ``entry`` in memory (merged with what is held under ``key``); save() writes it.

        An entry without ``env`` is stamped with this database's environment; a measured entry's
        top_k is made to hold its best (and other_kernels the best of each kernel top_k leaves out),
        and its failed list deduplicated and ordered, as merged entries' are. Returns what is held now.
        """
        if not entry.env:
            entry = replace(entry, env=self.env.entry_env(entry.op))
        entry.validate()
        if entry.measured:
            top, others = top_and_other_kernels([entry.best, *entry.top_k, *entry.other_kernels])
            entry = replace(entry, top_k=top, other_kernels=others, model_picks=kept_model_picks(entry.model_picks))
        if entry.failed:
            entry = replace(entry, failed=union_failed(entry.failed))
        held = self._pending.get(key)
        self._pending[key] = entry if held is None else merge_entries(held, entry)
        held = self._entries.get(key)
        result = entry if held is None else merge_entries(held, entry)
        self._set(key, result)
        return result

    def update_calibration(self, values: dict) -> None:
        self._update_header("calibration", values)

    def update_model_coefficients(self, values: dict) -> None:
        self._update_header("model_coefficients", values)

    @property
    def write_path(self) -> Path:
        """The file save() writes (its directory is created if need be)."""
        return first_writable(self._write_dirs) / db_file_name(self.device_name)

    def save(self) -> Path | None:
        """Merge the entries put since the last save into the write file, atomically, under its lock.

        Returns the file written (None if there was nothing to write). Raises CorruptDatabaseError,
        leaving the file alone, if the file on disk is corrupt.
        """
        if not self._pending and not any(self._pending_header.values()):
            return None
        path = self.write_path
        pending, header = dict(self._pending), {s: dict(v) for s, v in self._pending_header.items()}
        merged: dict[str, DBEntry] = {}

        def change(doc: dict) -> None:
            if doc["objective"] != self.objective:
                raise ValueError(f"{path} times {doc['objective']!r}, not {self.objective!r}: "
                                 "the timings would not compare")
            merge_header(doc, self.env.device_header(), self.env.versions())
            for section, values in header.items():
                doc[section].update(values)
            merged.update(merge_into(doc, pending))

        update_document(path, change, new=lambda: empty_document(
            self.env.device_header(), self.env.versions(), self.objective))
        for key, entry in merged.items():
            self._set(key, merge_entries(self._entries.get(key, entry), entry))
            if self._pending.get(key) is pending[key]:  # not put again meanwhile
                del self._pending[key]
        for section, values in header.items():
            for name in values:
                self._pending_header[section].pop(name, None)
        return path

    def export(self, out_path, *, include_stale: bool = False, measured_only: bool = False) -> int:
        """Merge this database's entries (by default the current, measured or not) into ``out_path``."""
        chosen = {
            key: entry for key, entry in self.entries(include_stale=include_stale).items()
            if entry.measured or not measured_only
        }

        def change(doc: dict) -> None:
            merge_header(doc, self.env.device_header(), self.env.versions())
            for section in HEADER_SECTIONS:
                doc[section] = {**getattr(self, section), **doc[section]}
            merge_into(doc, chosen)

        update_document(Path(out_path), change, new=lambda: empty_document(
            self.env.device_header(), self.env.versions(), self.objective))
        return len(chosen)

    # -- misses ------------------------------------------------------------------------------------

    def misses(self) -> dict[str, dict]:
        """Lookups that missed since the last flush: key -> {count, op, dtype, features}."""
        return self._missed.snapshot()

    def flush_misses(self) -> dict[str, dict]:
        """Add the counted misses to misses-<device>.json in the write directory; returns its contents."""
        path = first_writable(self._write_dirs) / misses_file_name(self.device_name)
        return self._missed.flush(path, self.device_name)

    def load_misses(self) -> dict[str, dict]:
        """The misses flushed to the write directory (by every process), most frequent first."""
        if not self._write_dirs:
            return {}
        return load_misses(self._write_dirs[0] / misses_file_name(self.device_name))

    # -- internals ---------------------------------------------------------------------------------

    def _load(self) -> None:
        for directory in self.search_path:
            path = directory / db_file_name(self.device_name)
            if not path.is_file():
                continue
            doc = load_document(path)
            self.files.append(path)
            self._device_header = self._device_header or dict(doc.get("device") or {})
            for section in HEADER_SECTIONS:
                setattr(self, section, {**doc[section], **getattr(self, section)})
            for key, entry in load_entries(doc).items():
                held = self._entries.get(key)
                if held is None or (key not in self._answers and self._is_current(entry)):
                    self._set(key, entry)
                elif key in self._answers and self._is_current(entry) and entry.failed:
                    self._set(key, replace(held, failed=union_failed([*held.failed, *entry.failed])))
        stale = len(self._entries) - len(self._answers)
        if stale:
            _warn_stale_once(stale, self.files, self.env)

    def _set(self, key: str, entry: DBEntry) -> None:
        held = self._entries.get(key)
        if held is not None and (held.op, held.dtype) != (entry.op, entry.dtype):
            self._groups[(held.op, held.dtype)].pop(key, None)
        self._entries[key] = entry
        self._groups.setdefault((entry.op, entry.dtype), {})[key] = entry
        if self._is_current(entry):
            self._answers[key] = entry
        else:
            self._answers.pop(key, None)

    def _is_current(self, entry: DBEntry) -> bool:
        return same_environment(entry.env, self.env.entry_env(entry.op), kernels=judges_kernels(self.env))

    def _answers_but_for_device(self, entry: DBEntry) -> bool:
        return self._is_current(replace(entry, env={**entry.env, "device": self.env.device}))

    def _update_header(self, section: str, values: dict) -> None:
        self._pending_header[section].update(values)
        setattr(self, section, {**getattr(self, section), **values})


def export(db: TuningDB, out_path, **options) -> int:
    """Module form of TuningDB.export, for the CLI."""
    return db.export(out_path, **options)


def _warn_stale_once(count: int, files: list[Path], env: Environment) -> None:
    global _stale_warned
    if _stale_warned:
        return
    _stale_warned = True
    warnings.warn(
        f"{count} tuning-database entries in {', '.join(map(str, files))} were tuned on another device, "
        f"Triton version or revision of the op's kernels (this is {env.device!r}, triton {env.triton}, "
        f"kernels {dict(env.kernel_revisions) or 'unversioned'}); lookups ignore them and tuning "
        "uses them only as seeds. Re-tune those problems, or prune the stale entries, to refresh them.",
        StaleEntriesWarning,
        stacklevel=5,  # the caller of TuningDB.open
    )
