"""Where a database's measured best configs sit in the cost model's ranking of their whole space,
under the stored fit and under a fit on the other entries (the held-out split of ``stuning db
refit``). The search times the model's favourites first and prunes the rest, so a best config
ranked lower is found later or not at all.

    python3 scripts/eval_model_ranks.py tuning_db/nvidia-h200.json   # run with the GPU's Triton (3.6):
                                                                    # its spaces hold the Gluon kernels

Needs no GPU. Prints, per op, the median and 90th-percentile rank (1 = the model's favourite) of the
held-out entries' best configs, and how many ranked within the first 8 (the seeded head) and 30%.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from stuning.tuning.features import ProblemFeatures
from stuning.tuning.model_check import holdout_check, open_file
from stuning.tuning.registry import budget_of, family
from stuning.tuning.session import target_spec


def ranks(model, entries, budget) -> dict[str, list[tuple[int, int]]]:
    """Per op, (rank of the measured best in the model's ranking, size of the space) per entry."""
    out: dict[str, list] = {}
    for entry in entries.values():
        features = ProblemFeatures(entry.op, entry.dtype, dict(entry.features))
        fam = family(entry.op)
        space = fam.space(features, budget)
        best = fam.config_from_dict(entry.best.config)
        order = [c for c, _ in model.rank(features, space)]
        if best in order:
            out.setdefault(entry.op, []).append((order.index(best) + 1, len(order)))
    return out


def summary(found: list[tuple[int, int]]) -> dict:
    positions = sorted(r for r, _ in found)
    return {"entries": len(found), "median_rank": statistics.median(positions),
            "p90_rank": positions[int(0.9 * (len(positions) - 1))],
            "in_first_8": sum(r <= 8 for r in positions), "in_first_30pct": sum(r <= 0.3 * n for r, n in found)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    args = ap.parse_args()
    db = open_file(args.file)
    budget = budget_of(target_spec(db.device_name))
    test, stored, refit = holdout_check(db)
    report = {}
    for label, model in (("stored", stored), ("refit on the rest", refit)):
        report[label] = {op: summary(found) for op, found in sorted(ranks(model, test, budget).items())}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
