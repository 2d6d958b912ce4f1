"""Device specs for the cost model: datasheet ceilings, replaced by measured ones where calibrated."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    sm_count: int
    clock_ghz: float  # boost clock
    fp32_tflops: float  # CUDA-core FMA rate (2 flops per FMA)
    tensor_tflops: dict = field(default_factory=dict)  # dense tensor-core rate per dtype name
    dram_gbs: float = 0.0  # device memory bandwidth, GB/s
    l2_gbs: float = 0.0  # L2 bandwidth, GB/s
    l2_mb: float = 0.0
    smem_per_sm_kb: int = 228
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    max_programs_per_sm: int = 32
    compute_capability: tuple = (0, 0)
    # One step of a gather loop: an index load, then the loads it addresses. Fitted on the H200:
    # the CSR SpMM's time at 768 x 3072, N = 16 (one wave) grew 0.43 us per step of its loop,
    # at 90% and at 95% zeros alike (BENCHMARKS.md 7g).
    mem_latency_us: float = 0.45
    calibrated: bool = False  # True when the ceilings were measured on this device

    def tensor_rate(self, dtype: str) -> float:
        """Tensor-core FLOP/s for a dtype name ('float16', 'bfloat16', 'float32' = tf32)."""
        return self.tensor_tflops.get(dtype, self.tensor_tflops.get("float16", self.fp32_tflops)) * 1e12

    def with_calibration(self, ceilings: dict) -> DeviceSpec:
        """A copy whose ceilings are the measured ones (keys: dram_gbs, fp32_tflops, tensor_tflops)."""
        changes = {k: v for k, v in ceilings.items() if k in {"dram_gbs", "fp32_tflops", "l2_gbs"}}
        if "tensor_tflops" in ceilings:
            changes["tensor_tflops"] = {**self.tensor_tflops, **ceilings["tensor_tflops"]}
        return dataclasses.replace(self, calibrated=True, **changes)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


# Datasheet figures (dense, no sparsity) for the GPUs users tune on. L2 bandwidth is an estimate.
DEVICES: dict[str, DeviceSpec] = {
    spec.name: spec
    for spec in [
        DeviceSpec("NVIDIA H100 SXM", 132, 1.98, 67.0, {"float16": 989, "bfloat16": 989, "float32": 495},
                   3350, 10000, 50, 228, 65536, 2048, 32, compute_capability=(9, 0)),
        DeviceSpec("NVIDIA H100 PCIe", 114, 1.755, 51.0, {"float16": 756, "bfloat16": 756, "float32": 378},
                   2000, 7500, 50, 228, 65536, 2048, 32, compute_capability=(9, 0)),
        DeviceSpec("NVIDIA H200", 132, 1.98, 67.0, {"float16": 989, "bfloat16": 989, "float32": 495},
                   4800, 10000, 60, 228, 65536, 2048, 32, compute_capability=(9, 0)),
        DeviceSpec("NVIDIA A100 SXM", 108, 1.41, 19.5, {"float16": 312, "bfloat16": 312, "float32": 156},
                   2039, 5000, 40, 164, 65536, 2048, 32, compute_capability=(8, 0)),
        DeviceSpec("NVIDIA L4", 58, 2.04, 30.3, {"float16": 121, "bfloat16": 121, "float32": 60},
                   300, 1500, 48, 100, 65536, 1536, 24, compute_capability=(8, 9)),
        DeviceSpec("NVIDIA T4", 40, 1.59, 8.1, {"float16": 65, "float32": 8.1},
                   320, 1000, 4, 64, 65536, 1024, 16, compute_capability=(7, 5)),
        DeviceSpec("NVIDIA GeForce RTX 4090", 128, 2.52, 82.6, {"float16": 165, "bfloat16": 165, "float32": 82.6},
                   1008, 5000, 72, 100, 65536, 1536, 24, compute_capability=(8, 9)),
    ]
}

# How torch reports these GPUs, mapped to the table.
_ALIASES = [
    (r"h100.*(hbm3|sxm)", "NVIDIA H100 SXM"),
    (r"h100.*pcie", "NVIDIA H100 PCIe"),
    (r"h100", "NVIDIA H100 SXM"),
    (r"h200", "NVIDIA H200"),
    (r"a100", "NVIDIA A100 SXM"),
    (r"\bl4\b", "NVIDIA L4"),
    (r"\bt4\b", "NVIDIA T4"),
    (r"4090", "NVIDIA GeForce RTX 4090"),
]

DEFAULT_DEVICE = "NVIDIA H100 SXM"


def spec_for(name: str) -> DeviceSpec:
    """The table's spec for a device name as torch reports it or as a user types it ('h100')."""
    if name in DEVICES:
        return DEVICES[name]
    low = name.lower()
    for pattern, canonical in _ALIASES:
        if re.search(pattern, low):
            return DEVICES[canonical]
    known = ", ".join(sorted(DEVICES))
    raise ValueError(f"unknown device {name!r}; known devices: {known}")


def local_device_name() -> str | None:
    """The name torch reports for the current CUDA device, or None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name()


def local_spec() -> DeviceSpec:
    """The current GPU's spec (from the table, SM count read off the device), else the default target."""
    import torch

    name = local_device_name()
    if name is None:
        return DEVICES[DEFAULT_DEVICE]
    try:
        spec = spec_for(name)
    except ValueError:
        spec = DEVICES[DEFAULT_DEVICE]
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return dataclasses.replace(spec, name=name, sm_count=props.multi_processor_count)
