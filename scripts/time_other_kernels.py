"""Time, for each measured SpMM entry of a database file, the cost model's favourite config of every
kernel the entry holds no timed config of, and store them in the entry's ``other_kernels``.

A search times each kernel's favourite (the seeded head of ``tuner.seeded_ranking``), and entries
now keep the fastest of each kernel outside their top five. Entries tuned before that hold one
kernel's near-best configs only, so a refit never saw how slow the others ran on them: the capped
model's worst whole-space picks were CSR configs 2.2-2.6x slower than the tuned one (BENCHMARKS.md
8p). This times what those searches timed and did not keep, on the GPU, in the tuner's way:
``stuning.tuning.driver.entry_problem`` rebuilds the problem on random inputs with the entry's key,
and ``KernelObjective`` checks each config against the reference before timing it (the search's
screen timing). Configs that fail are reported and skipped.

    python3 scripts/time_other_kernels.py DB_FILE [--seconds 400] [--dtypes float16,bfloat16,float32]

``DB_FILE`` is updated in place (saved every ``SAVE_EVERY`` entries, and at the end); merge it
into the shipped file with ``stuning db merge`` and refit with ``stuning db refit``. ``--smoke N``
runs the N smallest entries on the CPU under ``TRITON_INTERPRET=1`` untimed (every time 1 us) to
check the script, into a copy of the file it writes under ``--out``.
"""

from __future__ import annotations

import argparse
import math
import shutil
from dataclasses import replace
from pathlib import Path

import torch
from bench_lookup import within_seconds

SAVE_EVERY = 20


def favourites(model, features, space, kinds) -> list:
    """The model's first-ranked config of each kernel in ``kinds``, of the problem's ``space``."""
    return [model.rank(features, [c for c in space if c.kernel == kind])[0][0] for kind in kinds]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db_file", type=Path)
    ap.add_argument("--seconds", type=float, default=400.0, help="stop starting entries after this")
    ap.add_argument("--dtypes", default="float16,bfloat16,float32")
    ap.add_argument("--smoke", type=int, default=0, help="this many of the smallest entries, CPU, untimed")
    ap.add_argument("--out", type=Path, default=None, help="--smoke: where the copy of DB_FILE goes")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() and not args.smoke:
        print("time_other_kernels.py: no CUDA device (it times configs)")
        return 0
    from stuning.db import TimedConfig
    from stuning.tuning.coverage import space_kernels
    from stuning.tuning.driver import entry_problem
    from stuning.tuning.features import ProblemFeatures
    from stuning.tuning.model_check import open_file
    from stuning.tuning.objective import KernelObjective
    from stuning.tuning.registry import family
    from stuning.tuning.search import TrialFailure
    from stuning.tuning.session import model_for, target_spec

    path = args.db_file
    if args.smoke:
        args.out.mkdir(parents=True, exist_ok=True)
        path = Path(shutil.copy(path, args.out / path.name))
    db = open_file(path)
    model = model_for(db, target_spec(db.device_name))
    fam = family("spmm")
    entries = {k: e for k, e in db.entries(include_stale=False).items()
               if e.measured and e.op == "spmm" and e.dtype in args.dtypes.split(",")}
    order = sorted(entries, key=lambda k: (math.prod(entries[k].features[f] for f in "mkn"), k))
    order = order[: args.smoke] if args.smoke else order
    timer = (lambda fn: (fn(), 1.0)[1]) if args.smoke else None
    added = 0
    for i, key in within_seconds(order, args.seconds):
        entry = entries[key]
        features = ProblemFeatures("spmm", entry.dtype, dict(entry.features))
        held = {t.config.get("kernel") for t in entry.timed_configs}
        space = fam.space(features)
        kinds = [k for k in space_kernels(space) if k not in held]
        if not kinds:
            continue
        problem, why = entry_problem(key, entry, seed=i)
        if problem is None:
            print(f"[{i + 1}/{len(order)}] {key}: skipped ({why})")
            continue
        objective = KernelObjective(problem, timer=timer)
        timed = []
        for config in favourites(model, features, space, kinds):
            try:
                timed.append((config, objective(config)))
            except TrialFailure as e:
                print(f"{key} {config.kernel}: {e.status}: {e.message}")
        if timed:
            db.put(replace(entry, other_kernels=[*entry.other_kernels, *(
                TimedConfig(c.as_dict(), us) for c, us in timed)]), key)
            added += len(timed)
        faster = [c.kernel for c, us in timed if us < entry.best.time_us and not args.smoke]
        print(f"[{i + 1}/{len(order)}] {key}: best {entry.best.time_us:.1f} us; "
              + ", ".join(f"{c.kernel} {us:.1f}" for c, us in timed)
              + (f"; FASTER than the entry's best: {', '.join(faster)} (re-tune it)" if faster else ""), flush=True)
        del problem, objective
        if (i + 1) % SAVE_EVERY == 0:
            db.save()
    db.save()
    print(f"{added} configs timed into {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
