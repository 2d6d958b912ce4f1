"""Lookups that found nothing: counted in memory, merged into misses-<device>.json on flush.

The file is the to-do list of a later ``stuning db misses`` / tune run: which problems ran on the
default heuristic, and how often.
"""

from __future__ import annotations

from pathlib import Path

from stuning.db.schema import empty_misses_document
from stuning.db.storage import read_json, update_misses, validate_misses_document


class MissCounter:
    def __init__(self) -> None:
        self._misses: dict[str, dict] = {}

    def record(self, key: str, op: str, dtype: str, features: dict) -> None:
        miss = self._misses.get(key)
        if miss is None:
            self._misses[key] = {"count": 1, "op": op, "dtype": dtype, "features": dict(features)}
        else:
            miss["count"] += 1

    def snapshot(self) -> dict[str, dict]:
        return {key: {**miss, "features": dict(miss["features"])} for key, miss in self._misses.items()}

    def flush(self, path: Path, device_name: str) -> dict[str, dict]:
        """Add the counts to the file (under its lock), forget them here; returns the file's misses."""
        pending = self.snapshot()

        def add(doc: dict) -> None:
            for key, miss in pending.items():
                if key in doc["misses"]:
                    doc["misses"][key]["count"] += miss["count"]
                    doc["misses"][key]["features"] = miss["features"]  # the latest problem seen
                else:
                    doc["misses"][key] = miss

        if not pending:
            return load_misses(path)
        doc = update_misses(path, add, new=lambda: empty_misses_document(device_name))
        # Only what was written is forgotten; a failed flush keeps the counts for the next try.
        for key, miss in pending.items():
            self._misses[key]["count"] -= miss["count"]
            if self._misses[key]["count"] <= 0:
                del self._misses[key]
        return doc["misses"]


def load_misses(path) -> dict[str, dict]:
    """The misses recorded in ``path`` ({} if it does not exist), most frequent first."""
    path = Path(path)
    if not path.exists():
        return {}
    misses = read_json(path, validate_misses_document)["misses"]
    return dict(sorted(misses.items(), key=lambda kv: (-kv[1]["count"], kv[0])))
