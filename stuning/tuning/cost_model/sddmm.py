"""SDDMM on CUDA cores: a row of A and a column of B gathered per nonzero."""

from __future__ import annotations

import math

from stuning.kernels.sddmm import SDDMMConfig
from stuning.tuning.cost_model.base import CostTerms, cuda_core_terms, sector_efficiency
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
    threads = 32 * cfg.num_warps
    return cuda_core_terms(
        dram=dram, l2=l2, flops=2.0 * nnz * k_padded, imbalance=imbalance, programs=programs, threads=threads,
        regs=32 + 3 * cfg.nnz_block * cfg.block_k // threads, device=device,
    )
