"""Run every kernel path on small odd shapes, each config checked, for compute-sanitizer to watch.

The interpreter runs programs one at a time, so no race shows there, and a stray access shows only
if it is an unmasked load (which kills the process). This script gives ``compute-sanitizer`` (memcheck for accesses
outside any allocation, racecheck and synccheck for shared memory and barriers) one launch of each
kind of config each op can choose: every kernel, split-K or not, prefetch and swizzle or not, in
each dtype, writing Y contiguous and transposed where a layer does that. Each run goes through the
tuner's check (``KernelObjective.check``: a NaN-filled output against an fp32 reference), so a
config that passes the sanitizer but computes the wrong values fails here too.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py

(without the caching allocator every tensor is its own allocation, so memcheck sees an access past
its end). ``SANITIZE_PER_KIND`` (default 2) sets how many configs of each kind run.
"""

from __future__ import annotations

import os
import random
import sys
from collections import defaultdict

import torch

from stuning.suite import SDDMMCase, Semi24Case, SpMMCase
from stuning.tuning.objective import KernelObjective
from stuning.tuning.problems import build_problem
from stuning.tuning.registry import TORCH_DTYPES, family
from stuning.tuning.search import TrialFailure

CASES = [
    SpMMCase(70, 90, 33, 0.8, 0.5, "fp16"),
    SpMMCase(70, 90, 33, 0.8, 0.5, "fp32"),
    SpMMCase(45, 130, 17, 0.95, 0.0, "bf16"),
    SDDMMCase(70, 90, 40, 0.8, "fp16"),
    SDDMMCase(70, 90, 24, 0.9, "fp32"),
    SDDMMCase(45, 65, 64, 0.9, "bf16"),
    Semi24Case(96, 192, 32, "fp16"),  # N a multiple of 16: the Hopper kernel runs too
    Semi24Case(80, 256, 40, "bf16"),
]

KIND_FIELDS = {
    "spmm": ("kernel", "prefetch", "swizzle"),
    "sddmm": ("kernel",),
    "semi24": ("kernel",),
}


def kind(op: str, config) -> tuple:
    d = config.as_dict()
    extra = ("split",) if d.get("split_k", 1) > 1 else ()
    return tuple(d[f] for f in KIND_FIELDS[op]) + extra


def configs_by_kind(problem, per_kind: int, rng: random.Random) -> dict[tuple, list]:
    fam = family(problem.features.op)
    groups = defaultdict(list)
    for config in fam.space(problem.features):
        groups[kind(problem.features.op, config)].append(config)
    return {k: rng.sample(v, min(per_kind, len(v))) for k, v in sorted(groups.items(), key=repr)}


def layouts(problem):
    """The output as the reference lays it out, and transposed (as ``SparseLinear`` writes Y)."""
    yield "contiguous", None
    if problem.features.op != "sddmm":
        m, n = problem.reference.shape
        dtype, device = TORCH_DTYPES[problem.features.dtype], problem.reference.device
        yield "transposed", lambda: torch.empty(n, m, dtype=dtype, device=device).t()


def main() -> int:
    if not torch.cuda.is_available():
        print("sanitize_kernels.py: no CUDA device")
        return 0
    per_kind = int(os.environ.get("SANITIZE_PER_KIND", "2"))
    rng = random.Random(0)
    failures = runs = 0
    for case in CASES:
        problem = build_problem(case, seed=1)
        for layout, new_output in layouts(problem):
            problem.new_output = new_output
            objective = KernelObjective(problem)
            for k, configs in configs_by_kind(problem, per_kind, rng).items():
                for config in configs:
                    runs += 1
                    try:
                        objective.check(config)
                    except TrialFailure as e:
                        if e.status == "out_of_resources":
                            continue
                        failures += 1
                        print(f"FAIL {case.name} {layout} {k}: {config.as_dict()}: {e.status}: {e.message}")
    print(f"sanitize_kernels.py: {runs} runs, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
