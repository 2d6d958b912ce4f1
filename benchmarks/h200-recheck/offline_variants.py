"""Session 55, no GPU: three changes to the SpMM cost model judged on entries each fit did not see.

The measured SpMM entries of tuning_db/nvidia-h200.json (as of cc50100) fall into four folds by key;
each fold's entries are predicted by a fit (from the analytic prior) on the other three. A fold's
entry is judged on every config timed on it: the entry's own (top five, other kernels' best, the
model's recorded picks) and every pick a ``probe_model_cap.py`` run timed there
(``benchmarks/*/call*/**/variants.csv``). Reported per dtype: the share of two timed configs at
least 1.3x apart that the fit orders right, and, where some run timed it, the time of the fit's pick
over the whole space against the entry's fastest timed config.

    python3 benchmarks/h200-recheck/offline_variants.py [library,dtype-effects,resident-occupancy]

- ``dtype-effects``: the operands' element size joins each config's values as one more parameter
  (its own effects, and in pairs with every value), so fp32 may learn effects of its own.
- ``resident-occupancy``: a grid of fewer programs than an SM holds counts only its share resident
  (the library counts what fits, however few programs there are).
"""

from __future__ import annotations

import ast
import dataclasses
import glob
import math
import statistics
import sys
import zlib
from pathlib import Path

import pandas as pd

import stuning.tuning.cost_model as cost_model
import stuning.tuning.cost_model.base as cost_base
from stuning.tuning.features import DTYPE_BYTES, ProblemFeatures
from stuning.tuning.model_check import open_file, timed_trials
from stuning.tuning.registry import family
from stuning.tuning.session import model_for, target_spec

FOLDS, APART = 4, 1.3
FAMILY = family("spmm")


@dataclasses.dataclass(frozen=True)
class WithDtype:
    """A config whose effect names carry the operands' element size (``config_features``)."""

    config: object
    dtype_bytes: int

    def feature_items(self) -> dict:
        return {**self.config.as_dict(), "dtype_bytes": self.dtype_bytes}


def with_dtype_effects():
    def predict_us(self, features, config):
        coef = self.coefficients.get(features.op, cost_base.Coefficients())
        return coef.predict_us(self.terms(features, config), WithDtype(config, DTYPE_BYTES[features.dtype]))

    def fit(self, op, samples, *, incremental=False):
        terms = [self.terms(f, c) for f, c, _ in samples]
        coef = cost_base.fit_coefficients(terms, [t for *_, t in samples],
                                          [WithDtype(c, DTYPE_BYTES[f.dtype]) for f, c, _ in samples],
                                          problems=[cost_model.problem_id(f) for f, _, _ in samples])
        self.coefficients[op] = coef
        return coef

    cost_model.CostModel.predict_us, cost_model.CostModel.fit = predict_us, fit


def with_resident_occupancy():
    library = cost_base.launch_shape

    def launch_shape(programs, threads, regs_per_thread, smem_bytes, device):
        launch = library(programs, threads, regs_per_thread, smem_bytes, device)
        resident = min(launch.programs_per_sm, max(1, programs) / device.sm_count)
        return dataclasses.replace(launch, occupancy=min(1.0, resident * threads / device.max_threads_per_sm))

    cost_base.launch_shape = launch_shape


def timed_configs(entries) -> dict[str, list[tuple[object, float]]]:
    known: dict[str, dict] = {}
    for key, entry in entries.items():
        for t in entry.timed_configs:
            if t.time_us:
                config = FAMILY.config_from_dict(t.config)
                known.setdefault(key, {})[repr(config)] = (config, t.time_us)
    for path in sorted(glob.glob("benchmarks/*/call*/**/variants.csv", recursive=True)
                      + glob.glob("benchmarks/*/call*/**/variants.csv.gz", recursive=True)):
        df = pd.read_csv(path)
        for row in df.itertuples() if {"label", "config"} <= set(df.columns) else ():
            if row.key in entries and row.us == row.us:
                config = FAMILY.config_from_dict(ast.literal_eval(row.config))
                known.setdefault(row.key, {}).setdefault(repr(config), (config, row.us))
    return {key: list(timed.values()) for key, timed in known.items()}


def judge(db, entries, known) -> dict[str, str]:
    pairs: dict[str, list[int]] = {}
    picks: dict[str, list[float]] = {}
    for fold in range(FOLDS):
        test = {k: e for k, e in entries.items() if zlib.crc32(k.encode()) % FOLDS == fold}
        model = model_for(db, target_spec("nvidia-h200"))
        model.coefficients.pop("spmm", None)
        model.fit("spmm", timed_trials({k: e for k, e in entries.items() if k not in test})["spmm"])
        for key, entry in test.items():
            features = ProblemFeatures("spmm", entry.dtype, dict(entry.features))
            timed = known[key]
            predicted = [model.predict_us(features, c) for c, _ in timed]
            right = pairs.setdefault(entry.dtype, [0, 0])
            for (_, fast), p_fast in zip(timed, predicted, strict=True):
                for (_, slow), p_slow in zip(timed, predicted, strict=True):
                    if slow >= APART * fast:
                        right[0] += p_fast < p_slow
                        right[1] += 1
            pick = repr(model.rank(features, FAMILY.space(features))[0][0])
            pick_us = dict((repr(c), t) for c, t in timed).get(pick)
            picks.setdefault(entry.dtype, []).append(pick_us / min(t for _, t in timed) if pick_us else math.nan)
    out = {}
    for dtype, (right, total) in sorted(pairs.items()):
        seen = [r for r in picks[dtype] if r == r]
        geo = math.exp(statistics.mean(map(math.log, seen))) if seen else math.nan
        out[dtype] = (f"pairs {right / total:.3f} of {total}; picks timed {len(seen)}/{len(picks[dtype])}, "
                      f"geomean {geo:.3f}, over 1.5x {sum(r > 1.5 for r in seen)}")
    return out


def main() -> int:
    variants = (sys.argv[1] if len(sys.argv) > 1 else "library,dtype-effects,resident-occupancy").split(",")
    db = open_file(Path("tuning_db/nvidia-h200.json"))
    entries = {k: e for k, e in db.entries(include_stale=False).items() if e.measured and e.op == "spmm"}
    known = timed_configs(entries)
    library = cost_model.CostModel.predict_us, cost_model.CostModel.fit, cost_base.launch_shape
    for name in variants:
        {"library": lambda: None, "dtype-effects": with_dtype_effects,
         "resident-occupancy": with_resident_occupancy}[name]()
        for dtype, line in judge(db, entries, known).items():
            print(f"{name:18s} {dtype:9s} {line}", flush=True)
        cost_model.CostModel.predict_us, cost_model.CostModel.fit, cost_base.launch_shape = library
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
