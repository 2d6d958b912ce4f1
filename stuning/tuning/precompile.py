"""Compile many configs of one problem in parallel worker processes before they are timed.

Triton keeps compiled kernels in its on-disk cache, keyed by the kernel, its constexprs and the
specialization of its arguments. Workers that run the same problem (same case, same seed) with a
share of the configs each fill that cache, and the timing process then loads instead of compiling.
Threads would serialise on the GIL through most of the compiler; processes do not.

Run as a module by the workers: ``python -m stuning.tuning.precompile CASE_JSON CONFIGS_JSON``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

from stuning.suite import SDDMMCase, Semi24Case, SpMMCase

CASES = {"spmm": SpMMCase, "sddmm": SDDMMCase, "semi24": Semi24Case}


def precompile(case, configs: list, *, workers: int | None = None, seed: int = 0, timeout_s: float = 600) -> int:
    """Compile ``configs`` for ``case`` in ``workers`` processes; returns how many workers failed."""
    if not configs:
        return 0
    workers = max(1, min(workers or (os.cpu_count() or 2) - 1, len(configs)))
    case_json = json.dumps({"op": case.op, **{k: v for k, v in case.as_dict().items() if k not in ("op", "name")},
                            "seed": seed})
    shares = [configs[i::workers] for i in range(workers)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "stuning.tuning.precompile", case_json,
             json.dumps([c.as_dict() for c in share])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for share in shares
    ]
    failed = 0
    for p in procs:
        try:
            failed += p.wait(timeout=timeout_s) != 0
        except subprocess.TimeoutExpired:
            p.kill()
            failed += 1
    return failed


def _worker(case_json: str, configs_json: str) -> int:
    from stuning.tuning.problems import build_problem
    from stuning.tuning.registry import family

    spec = json.loads(case_json)
    seed = spec.pop("seed")
    case = CASES[spec.pop("op")](**spec)
    problem = build_problem(case, seed=seed)
    fam = family(case.op)
    for d in json.loads(configs_json):
        # A failure is recorded by the timing process; here it only costs the compile.
        with contextlib.suppress(Exception):
            problem.run(fam.config_from_dict(d))
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1], sys.argv[2]))
