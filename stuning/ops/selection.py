"""Choosing a config at run time: the tuning database, else the cost model, else the heuristic.

The chain for a problem: the exact database key (or a sibling device's entry of it, where its search
found a faster kernel the own entry never tried); else the nearest entry within the op's
``NEAREST_MAX_DISTANCE`` (``tuning.features``: which features, compared how; its config repaired
for this shape) or of the other half-precision dtype (fp16 for bf16 and back), whichever is nearer
with the other dtype counted ``OTHER_DTYPE_DISTANCE`` further, or of a sibling device (the same
chip: an H200's entries on an H100) counted ``SIBLING_DEVICE_DISTANCE`` further; else the cost
model's best config; else the kernel's default heuristic. Answers are cached per key, and static
operands (weights) keep their own small cache, so a repeated call costs a couple of dict lookups.
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings

from stuning.tuning.features import NEAREST_FEATURES, NEAREST_MAX_DISTANCE, ProblemFeatures
from stuning.tuning.registry import family

ENV_NO_DB = "STUNING_NO_DB"  # set to 1 to skip the database (heuristic and model only)


class ConfigSelector:
    def __init__(self):
        self._db = None
        self._model = None
        self._lock = threading.Lock()
        self._by_key: dict[str, tuple[object, str]] = {}
        self._dense_by_key: dict[str, bool] = {}

    def reset(self) -> None:
        """Forget the opened database and every cached answer (after the database changed)."""
        with self._lock:
            self._db = None
            self._model = None
            self._by_key.clear()
            self._dense_by_key.clear()

    def db(self):
        if self._db is None:
            from stuning.tuning.session import open_db

            self._db = open_db()
            atexit.register(self._flush_misses, self._db)
        return self._db

    @staticmethod
    def _flush_misses(db) -> None:
        # Misses are what `stuning db misses` lists for offline tuning; losing them is not worth a crash.
        try:
            if db.misses():
                db.flush_misses()
        except Exception as e:
            warnings.warn(f"stuning: could not record tuning-database misses: {e}", stacklevel=1)

    def model(self):
        if self._model is None:
            from stuning.tuning.session import model_for, target_spec

            self._model = model_for(self.db(), target_spec())
        return self._model

    def choose(self, features: ProblemFeatures, key: str) -> tuple[object, str]:
        """(config, source) for a problem; source is exact, nearest, other-dtype, sibling, model or
        heuristic."""
        hit = self._by_key.get(key)
        if hit is not None:
            return hit
        with self._lock:
            answer = self._resolve(features, key)
            self._by_key[key] = answer
        return answer

    def dense_faster(self, key: str) -> bool:
        """Whether this key's own entry (this device and Triton; not a neighbour's) measured the
        dense product faster than its best config; where a sibling's entry of the key answers in the
        own one's place (``TuningDB.sibling_stand_in``), that entry's measurement, since its config
        is the one that runs. Read once per key, like the configs."""
        hit = self._dense_by_key.get(key)
        if hit is not None:
            return hit
        faster = False
        if os.environ.get(ENV_NO_DB, "0") in ("", "0"):
            db = self.db()
            entry = db.sibling_stand_in(key) or db.get(key)
            speedup = entry.speedup_vs_dense if entry is not None else None
            faster = speedup is not None and speedup < 1.0
        self._dense_by_key[key] = faster
        return faster

    def _resolve(self, features: ProblemFeatures, key: str) -> tuple[object, str]:
        fam = family(features.op)
        if os.environ.get(ENV_NO_DB, "0") in ("", "0"):
            found = self.db().lookup(
                features.op, features.dtype, key, features.values, max_distance=NEAREST_MAX_DISTANCE[features.op],
                feature_names=NEAREST_FEATURES[features.op],
            )
            if found.entry is not None:
                try:
                    config = fam.repair(fam.config_from_dict(found.entry.config), features)
                    return config, found.how
                except (TypeError, ValueError) as e:  # an incompatible schema, or a config the kernel dropped
                    warnings.warn(f"stuning: ignoring database entry {key}: {e}", stacklevel=3)
        try:
            space = fam.space(features)
            if space:
                return self.model().rank(features, space)[0][0], "model"
        except Exception as e:  # the heuristic below always works; say why the model did not
            warnings.warn(f"stuning: cost model failed for {key} ({e}); using the heuristic", stacklevel=3)
        return fam.default(features), "heuristic"


SELECTOR = ConfigSelector()
