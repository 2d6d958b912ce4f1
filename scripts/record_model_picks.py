#!/usr/bin/env python3
"""Record the cost model's timed picks from a ``probe_model_cap.py`` run into a database file's entries.

``probe_model_cap.py`` times the model's pick over each entry's whole config space (``variants.csv``:
one row per entry and variant). Where a pick ran slower than the entry's own config, the entry
keeps it in ``model_picks`` (BENCHMARKS.md 9f), so that ``stuning db refit`` learns what the
model's favourites cost: the fastest configs an entry keeps never show a miss. Rows of the entry's
own config (label ``own``) and picks that ran no slower than it are skipped; entries that are gone
or are not measured are left alone. The file is rewritten through ``TuningDB`` (merged, atomic).

    python3 scripts/record_model_picks.py benchmarks/.../variants.csv tuning_db/nvidia-h200.json
    stuning db refit tuning_db/nvidia-h200.json
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
from pathlib import Path

import pandas as pd

from stuning.db import TimedConfig
from stuning.db.entry import kept_model_picks
from stuning.tuning.model_check import open_file


def picks_of(csv: Path) -> dict[str, list[TimedConfig]]:
    """Each key's picks that ran slower than its own config, from a ``variants.csv``."""
    rows = pd.read_csv(csv)
    own = rows[rows["label"] == "own"].set_index("key")["us"]
    picks: dict[str, list[TimedConfig]] = {}
    for row in rows[rows["label"] != "own"].itertuples():
        if row.key in own.index and row.us > own[row.key]:
            picks.setdefault(row.key, []).append(TimedConfig(ast.literal_eval(row.config), float(row.us)))
    return picks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path, help="a probe_model_cap.py run's variants.csv")
    ap.add_argument("database", type=Path, help="the database file to record into")
    args = ap.parse_args(argv)
    db = open_file(args.database)
    entries = db.entries()
    recorded = 0
    for key, picks in sorted(picks_of(args.csv).items()):
        entry = entries.get(key)
        if entry is None or not entry.measured:
            continue
        db.put(dataclasses.replace(entry, model_picks=kept_model_picks([*entry.model_picks, *picks])), key)
        recorded += len(picks)
    db.save()
    print(f"record_model_picks.py: {recorded} picks recorded into {args.database}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
