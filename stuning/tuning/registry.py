"""Op -> kernel family: config class, config space, heuristic, and the cost model's terms.

Adding a kernel variant means one file in kernels/, one cost-model module, and one line here. An op
may have several kernels: its family's config space is the union of theirs, a config field (SpMM's
``kernel``) says which kernel runs it, and the tuner picks among all of them per problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import torch

from stuning.kernels import sddmm as sddmm_kernel
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_scatter as spmm_scatter_kernel
from stuning.kernels import spmm_sell as spmm_sell_kernel
from stuning.kernels.target import DeviceBudget
from stuning.tuning.cost_model import sddmm as sddmm_cost
from stuning.tuning.cost_model import semi24 as semi24_cost
from stuning.tuning.cost_model import spmm as spmm_cost
from stuning.tuning.device import DeviceSpec
from stuning.tuning.features import ProblemFeatures

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class KernelFamily:
    op: str
    config_cls: type
    config_space: Callable
    heuristic: Callable
    terms: Callable
    problem: Callable[[ProblemFeatures], object]  # features -> the kernel module's problem
    repair_fn: Callable

    def repair(self, config, features: ProblemFeatures):
        return self.repair_fn(config, self.problem(features))

    def space(self, features: ProblemFeatures, budget: DeviceBudget | None = None) -> list:
        return self.config_space(self.problem(features), budget)

    def default(self, features: ProblemFeatures):
        return self.heuristic(self.problem(features))

    def param_keys(self) -> list[str]:
        return [f.name for f in fields(self.config_cls)]

    def config_from_dict(self, d: dict):
        return self.config_cls(**{k: v for k, v in d.items() if k in self.param_keys()})


def union(*spaces: Callable) -> Callable:
    """The config space of an op with several kernels: every kernel's configs, in order."""

    def config_space(problem, budget: DeviceBudget | None = None) -> list:
        return [c for space in spaces for c in space(problem, budget)]

    return config_space


def _spmm_problem(f: ProblemFeatures):
    v = f.values
    return spmm_kernel.SpMMProblem(v["m"], v["k"], v["n"], v["nnz"], TORCH_DTYPES[f.dtype], v.get("pad_to", 1))


def _sddmm_problem(f: ProblemFeatures):
    v = f.values
    return sddmm_kernel.SDDMMProblem(v["m"], v["n"], v["k"], v["nnz"], TORCH_DTYPES[f.dtype])


def _semi24_problem(f: ProblemFeatures):
    v = f.values
    return semi24_kernel.Semi24Problem(v["m"], v["k"], v["n"], TORCH_DTYPES[f.dtype])


# The revision of each op's kernels a timing belongs to (the database's ``env.kernel``). Bump it when a
# kernel change can change which config wins: the entries timed before become seeds, not answers.
KERNEL_REVISIONS: dict[str, str] = {
    # 2: sliced-ELL kernel added; partial sums reduced once after the loop. Not bumped for prefetch:
    # the plain loop is unchanged, and repair() turns prefetch on for stored configs at N <= 32. Nor
    # for the scatter kernel (sm_90): the gather kernels are unchanged, so a stored winner is still
    # the best of what it was timed against; re-tuning a problem lets the new kernel compete.
    "spmm": "2",
    # 2: tiled kernel (dense output tiles from tl.dot) added. 3: the tiled kernel's pick without bank
    # conflicts, staged in 16 bits: 20-45% faster, which moved where it beats the gather kernel.
    "sddmm": "3",
    # 2: 4-bit group masks, transposed product, sizes specialized. Not bumped for the split-K sum
    # taken in the kernel (no fill and copy around it): every config still computes the same way,
    # and a sweep of all 500 configs at N = 16 kept the stored winners first (BENCHMARKS.md 7i).
    # Nor for the rebuilt tile's column order (7k): the same sums in another order; the decode
    # entries it sped up were re-tuned.
    "semi24": "2",
}

_SPMM_SPACE = union(spmm_kernel.config_space, spmm_sell_kernel.config_space, spmm_scatter_kernel.config_space)

FAMILIES: dict[str, KernelFamily] = {
    "spmm": KernelFamily("spmm", spmm_kernel.SpMMConfig, _SPMM_SPACE,
                         spmm_kernel.heuristic, spmm_cost.terms, _spmm_problem, spmm_kernel.repair),
    "sddmm": KernelFamily("sddmm", sddmm_kernel.SDDMMConfig, sddmm_kernel.config_space, sddmm_kernel.heuristic,
                          sddmm_cost.terms, _sddmm_problem, sddmm_kernel.repair),
    "semi24": KernelFamily("semi24", semi24_kernel.Semi24Config, semi24_kernel.config_space,
                           semi24_kernel.heuristic, semi24_cost.terms, _semi24_problem, semi24_kernel.repair),
}


def family(op: str) -> KernelFamily:
    if op not in FAMILIES:
        raise ValueError(f"unknown op {op!r}; known ops: {', '.join(FAMILIES)}")
    return FAMILIES[op]


def budget_of(device: DeviceSpec) -> DeviceBudget:
    """The on-chip budgets a config space is filtered by, for a (possibly remote) target device."""
    return DeviceBudget(device.name, device.sm_count, device.smem_per_sm_kb * 1024 - 1024,
                        device.regs_per_sm, device.max_threads_per_sm, device.compute_capability)
