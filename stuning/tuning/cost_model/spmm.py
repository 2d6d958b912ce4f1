"""SpMM on CUDA cores: gathered rows of B dominate the traffic, FMAs the arithmetic."""

from __future__ import annotations

import math

from stuning.kernels.spmm import SpMMConfig
from stuning.tuning.cost_model.base import CostTerms, cuda_core_terms, sector_efficiency
from stuning.tuning.device import DeviceSpec
from stuning.tuning.features import DTYPE_BYTES, ProblemFeatures


def group_max_length(f: ProblemFeatures, rows: int, swizzle: bool) -> float:
    """Expected longest row among the ``rows`` rows that share a program."""
    mean, cv, longest = f["row_mean"], f["row_cv"], f["row_max"]
    if rows == 1 or mean == 0:
        return mean
    if swizzle:
        # Rows sorted by length: neighbours differ by about the spread over m / rows groups.
        spread = mean * cv * 2.0 * rows / max(1, f["m"])
        return min(longest, mean + spread)
    # Unsorted: Gaussian estimate of the maximum of `rows` draws.
    return min(longest, mean + mean * cv * math.sqrt(2 * math.log(rows)))


def terms(f: ProblemFeatures, cfg: SpMMConfig, device: DeviceSpec) -> CostTerms:
    m, k, n = f["m"], f["k"], f["n"]
    elt = DTYPE_BYTES[f.dtype]
    idx = f.values.get("idx_bytes", 4)
    nnz = f["nnz"]
    n_blocks = math.ceil(n / cfg.block_n)
    n_padded = n_blocks * cfg.block_n
    # Every row of a program runs as long as the program's longest, rounded up to whole steps.
    per_row = group_max_length(f, cfg.rows, cfg.swizzle)
    per_row_steps = math.ceil(per_row / cfg.nnz_step) * cfg.nnz_step if per_row > 0 else 0
    processed = m * per_row_steps
    imbalance = max(1.0, processed / max(nnz, 1))

    # DRAM: A once, B once when L2 holds it (else once per gathered use), Y once.
    a_bytes = nnz * (elt + idx)
    b_bytes = k * n * elt
    l2_bytes_cap = device.l2_mb * 1e6 * 0.5
    b_dram = b_bytes if b_bytes <= l2_bytes_cap else nnz * n * elt
    dram = a_bytes + b_dram + m * n * elt
    # L2: A re-read by every column block, gathered B segments at sector granularity.
    seg = min(cfg.block_n, n) * elt
    l2 = a_bytes * (n_blocks - 1) + nnz * n_padded * elt / sector_efficiency(seg)
    if cfg.vec == 1 and elt < 4:
        l2 *= 1.15  # narrow loads issue more instructions per byte
    threads = 32 * cfg.num_warps
    tile = cfg.rows * cfg.nnz_step * cfg.block_n
    return cuda_core_terms(
        dram=dram, l2=l2, flops=2.0 * nnz * n_padded, imbalance=imbalance,
        programs=math.ceil(m / cfg.rows) * n_blocks, threads=threads,
        regs=32 + (tile + cfg.rows * cfg.block_n) // threads, device=device,
    )
