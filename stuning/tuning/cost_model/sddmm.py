"""SDDMM on CUDA cores: a row of A and a column of B gathered per nonzero."""

from __future__ import annotations

import math

from stuning.kernels.sddmm import SDDMMConfig
from stuning.tuning.cost_model.base import CostTerms, latency_factor, launch_shape, sector_efficiency
from stuning.tuning.device import DeviceSpec
from stuning.tuning.features import DTYPE_BYTES, ProblemFeatures


def terms(f: ProblemFeatures, cfg: SDDMMConfig, device: DeviceSpec) -> CostTerms:
    m, n, k = f["m"], f["n"], f["k"]
    elt = DTYPE_BYTES[f.dtype]
    idx = f.values.get("idx_bytes", 4)
    nnz = max(1, f["nnz"])
    k_padded = math.ceil(k / cfg.block_k) * cfg.block_k
    # The last program runs partly empty; within a program all nonzeros cost the same.
    programs = math.ceil(nnz / cfg.nnz_block)
    imbalance = programs * cfg.nnz_block / nnz * k_padded / k

    dram = (m * k + k * n) * elt + nnz * (2 * idx + 2 * elt)
    seg = min(cfg.block_k, k) * elt
    l2 = 2.0 * nnz * k_padded * elt / sector_efficiency(seg)
    if cfg.vec == 1 and elt < 4:
        l2 *= 1.15
    mem_us = dram / (device.dram_gbs * 1e3) + l2 / (device.l2_gbs * 1e3)
    compute_us = 2.0 * nnz * k_padded / (device.fp32_tflops * 1e6)

    threads = 32 * cfg.num_warps
    regs = 32 + 3 * cfg.nnz_block * cfg.block_k // threads
    launch = launch_shape(programs, threads, regs, 0, device)
    return CostTerms(
        mem_us=mem_us,
        compute_us=compute_us,
        imbalance=imbalance,
        wave_eff=launch.wave_eff,
        latency=latency_factor(launch.occupancy, 0.5),
    )
