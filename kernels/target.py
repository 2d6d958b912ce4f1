"""What a launch targets: Triton's CPU interpreter or a GPU, and that GPU's on-chip budgets.

Config spaces use the budgets to drop configs that could not launch (shared memory) or would spill
(registers) before anything is compiled.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch


@functools.cache
def interpreting() -> bool:
    """True when Triton runs kernels through its interpreter. Triton reads the variable once, when
    ``@triton.jit`` runs at import, so this reads it once too: a launch asks several times, and
    reading the environment showed in its host time (scripts/probe_host_time.py)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@dataclass(frozen=True)
class DeviceBudget:
    name: str
    sm_count: int
    shared_mem_per_block: int  # bytes a program may use, opt-in maximum
    registers_per_sm: int  # 32-bit registers
    max_threads_per_sm: int
    compute_capability: tuple = (0, 0)  # (9, 0): Hopper's warpgroup MMA, which semi24_hopper needs


# Hopper's limits; used for the interpreter and when no GPU is visible, so a config space computed
# offline is the one an H100 would see.
H100_BUDGET = DeviceBudget("NVIDIA H100 (assumed)", 132, 227 * 1024, 65536, 2048, (9, 0))


def is_sm90(device: torch.device) -> bool:
    """Whether ``device`` is an sm_90 GPU (Hopper's warpgroup MMA and TMA), asked of the driver once
    per device: asking at every launch cost the Hopper kernels' launchers ~10 us of host time each."""
    if device.type != "cuda":
        return False
    return _capability(torch.cuda.current_device() if device.index is None else device.index) == (9, 0)


@functools.cache
def _capability(device_index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device_index)


@functools.cache
def device_budget(device_index: int | None = None) -> DeviceBudget:
    if interpreting() or not torch.cuda.is_available():
        return H100_BUDGET
    idx = torch.cuda.current_device() if device_index is None else device_index
    props = torch.cuda.get_device_properties(idx)
    smem = getattr(props, "shared_memory_per_block_optin", 0) or 48 * 1024
    regs = getattr(props, "regs_per_multiprocessor", 65536)
    threads = getattr(props, "max_threads_per_multi_processor", 2048)
    return DeviceBudget(props.name, props.multi_processor_count, smem, regs, threads, (props.major, props.minor))


def check_device(device: torch.device, what: str) -> None:
    """Kernels run on CUDA tensors, or on CPU tensors under the interpreter."""
    if device.type == "cuda":
        return
    if device.type == "cpu" and interpreting():
        return
    if device.type == "cpu":
        raise ValueError(
            f"{what} is on the CPU: the Triton kernels need a CUDA device, or Triton's interpreter "
            "(set TRITON_INTERPRET=1 before importing stuning) to run on the CPU"
        )
    raise ValueError(f"{what} is on {device}: only CUDA devices (or the CPU interpreter) are supported")
