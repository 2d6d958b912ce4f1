"""Reading and writing database files: validated loads, atomic locked merge-writes, file-level tools.

Every write is a read-modify-write under ``<file>.lock``: the file is re-read under the lock, the
new entries are merged into what is there (entry.merge_entries), and the result replaces the file
atomically (temp file in the same directory, fsync, os.replace). Readers take no lock: they see
either the old file or the new one, never a half-written one. A file that fails validation is never
replaced; the write raises CorruptDatabaseError instead.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from filelock import FileLock

from stuning.db.entry import DBEntry, merge_entries
from stuning.db.environment import Environment, as_entry_env, judges_kernels, same_environment
from stuning.db.paths import device_slug
from stuning.db.schema import (
    CorruptDatabaseError,
    empty_document,
    validate_document,
    validate_misses_document,
)

LOCK_TIMEOUT_S = 120.0  # long enough for a busy shared directory, short enough to surface a stuck lock


def read_json(path, validate: Callable[[object, object], None]):
    """Parse and validate a JSON file; CorruptDatabaseError names the file on any defect."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError and the hooks' errors
        raise CorruptDatabaseError(path, f"invalid JSON: {e}") from None
    validate(doc, path)
    return doc


def load_document(path) -> dict:
    """A validated database document. FileNotFoundError if absent, CorruptDatabaseError if invalid."""
    return read_json(path, validate_document)


def load_entries(doc: dict) -> dict[str, DBEntry]:
    return {key: DBEntry.from_json(obj, validate=False) for key, obj in doc["entries"].items()}


def write_json_atomic(path, doc) -> None:
    """Replace ``path`` by ``doc`` (sorted, indented JSON) in one step; a crash leaves the old file."""
    path = Path(path)
    text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private; a database is meant to be shared like any other file.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def update_json(path, change: Callable[[dict], object], *, new: Callable[[], dict], validate) -> dict:
    """Under the file's lock: read it (or start from ``new()``), apply ``change`` in place, write it."""
    path = Path(path)
    with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S):
        doc = read_json(path, validate) if path.exists() else new()
        change(doc)
        validate(doc, path)  # never write what the next reader would reject
        write_json_atomic(path, doc)
    return doc


def update_document(path, change: Callable[[dict], object], *, new: Callable[[], dict]) -> dict:
    def change_and_index(doc: dict) -> None:
        change(doc)
        doc["parameter_keys"] = parameter_keys(doc["entries"])

    return update_json(path, change_and_index, new=new, validate=validate_document)


def update_misses(path, change: Callable[[dict], object], *, new: Callable[[], dict]) -> dict:
    return update_json(path, change, new=new, validate=validate_misses_document)


def merge_into(doc: dict, entries: Mapping[str, DBEntry]) -> dict[str, DBEntry]:
    """Merge ``entries`` into the document's; returns the merged entry for each of their keys."""
    merged = {}
    for key, entry in entries.items():
        on_disk = doc["entries"].get(key)
        if on_disk is not None:
            entry = merge_entries(DBEntry.from_json(on_disk, validate=False), entry)
        doc["entries"][key] = entry.to_json()
        merged[key] = entry
    return merged


def merge_header(doc: dict, device: dict, versions: dict) -> None:
    """Record the writer's device and versions, keeping facts the writer does not know (None)."""
    for name, value in device.items():
        if value is not None:
            doc["device"][name] = value
    doc["versions"] = {**doc["versions"], **{k: v for k, v in versions.items() if v is not None}}


def parameter_keys(entries: Mapping[str, dict]) -> dict[str, list[str]]:
    """Per op, the config field names used by its entries (derived, so never out of date)."""
    names: dict[str, set] = {}
    for obj in entries.values():
        fields = names.setdefault(obj["op"], set())
        for item in (obj["best"], *obj["top_k"], *obj.get("other_kernels", ())):
            fields.update(item["config"])
    return {op: sorted(fields) for op, fields in sorted(names.items())}


def merge_files(paths: Iterable, out_path) -> dict:
    """Merge database files of one device into ``out_path`` (itself included if it exists)."""
    docs = [(Path(p), load_document(p)) for p in paths]
    if not docs:
        raise ValueError("merge_files needs at least one input file")
    slugs = {device_slug(doc["device"]["name"]) for _, doc in docs}
    if len(slugs) > 1:
        listing = ", ".join(f"{p} ({doc['device']['name']})" for p, doc in docs)
        raise ValueError(f"cannot merge databases of different devices: {listing}")
    first = docs[0][1]

    def merge_all(doc: dict) -> None:
        for _, other in docs:
            merge_header(doc, other["device"], other["versions"])
            for section in ("calibration", "model_coefficients"):
                # Earlier inputs take precedence, as on the search path.
                doc[section] = {**other[section], **doc[section]}
            merge_into(doc, load_entries(other))

    header = (first["device"], first["versions"], first["objective"])
    return update_document(out_path, merge_all, new=lambda: empty_document(*header))


def prune_stale(path, *, keep_env: Environment | dict) -> int:
    """Drop the entries whose env differs from ``keep_env`` (device, triton or the op's kernel
    revision); returns how many."""
    if not Path(path).exists():
        _missing(path)
    dropped = 0

    def prune(doc: dict) -> None:
        nonlocal dropped
        stale = [k for k, obj in doc["entries"].items()
                 if not same_environment(obj["env"], as_entry_env(keep_env, obj["op"]),
                                         kernels=judges_kernels(keep_env))]
        for key in stale:
            del doc["entries"][key]
        dropped = len(stale)

    update_document(path, prune, new=lambda: _missing(path))
    return dropped


def _missing(path):
    raise FileNotFoundError(f"{path}: no such tuning database")


def _no_duplicate_keys(pairs):
    # A git merge can leave a key twice; json would silently keep the last one. dict() builds the
    # object in C (every database read, a sibling's file included, goes through here per object).
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return obj


def _no_constants(name):
    raise ValueError(f"{name} is not a JSON number")


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable on POSIX; directories cannot be opened this way on Windows.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
