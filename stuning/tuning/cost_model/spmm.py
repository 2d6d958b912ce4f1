"""SpMM on CUDA cores: gathered rows of B dominate the traffic, FMAs the arithmetic; and the scatter
kernel on tensor cores (``scatter_terms``).

Two gather kernels share the terms: CSR (masked steps, rows of a program wait for its longest: load
imbalance) and sliced ELL (no masks, no imbalance inside a program, but padded entries read and
multiplied, with narrower indices).
"""

from __future__ import annotations

import math

from stuning.formats.sell import SlicedELLMatrix, cut_share
from stuning.kernels import fp16_split
from stuning.kernels import spmm_scatter as scatter_kernel
from stuning.kernels.spmm import SpMMConfig
from stuning.tuning.cost_model.base import (
    LAUNCH_US,
    CostTerms,
    cuda_core_terms,
    launch_shape,
    memory_us,
    sector_efficiency,
)
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
    if cfg.kernel == "sell":
        return sell_terms(f, cfg, device)
    if cfg.kernel == "scatter":
        return scatter_terms(f, cfg, device)
    m, n = f["m"], f["n"]
    elt = DTYPE_BYTES[f.dtype]
    idx = f.values.get("idx_bytes", 4)
    nnz = f["nnz"]
    n_blocks = math.ceil(n / cfg.block_n)
    n_padded = n_blocks * cfg.block_n
    # Every row of a program runs as long as the program's longest, rounded up to whole steps.
    per_row_steps = padded_length(f, cfg)
    processed = m * per_row_steps
    imbalance = max(1.0, processed / max(nnz, 1))

    # DRAM: A once, B once when L2 holds it (else once per gathered use), Y once.
    a_bytes = nnz * (elt + idx)
    dram = a_bytes + b_dram_bytes(f, device) + m * n * elt
    # L2: A re-read by every column block, gathered B segments at sector granularity.
    l2 = (a_bytes * (n_blocks - 1) + nnz * n_padded * elt / gather_efficiency(cfg, n, elt)) * load_issue(cfg, elt)
    return _gather_terms(f, cfg, device, dram=dram, l2=l2, flops=2.0 * nnz * n_padded, imbalance=imbalance,
                         programs=math.ceil(m / cfg.rows) * n_blocks)


def sell_terms(f: ProblemFeatures, cfg: SpMMConfig, device: DeviceSpec) -> CostTerms:
    """The sliced-ELL kernel: no row-length imbalance inside a program (every row of a slice has
    the slice's padded length), but the padding is real work: its values and indices are read and
    its B rows gathered (they are the row's last column again, so the bytes are L1/L2 hits, not DRAM).
    Indices are 2 bytes when K fits int16."""
    m, k, n = f["m"], f["k"], f["n"]
    elt = DTYPE_BYTES[f.dtype]
    idx = 2 if k <= 32767 else 4
    n_blocks = math.ceil(n / cfg.block_n)
    n_padded = n_blocks * cfg.block_n
    n_slices = math.ceil(m / cfg.rows)
    # The last slice is padded to full height; every slice to its longest row in whole steps.
    processed = n_slices * cfg.rows * padded_length(f, cfg)
    a_bytes = processed * (elt + idx) + n_slices * cfg.rows * 4 + (n_slices + 1) * 4  # + row ids, offsets
    dram = a_bytes + b_dram_bytes(f, device) + m * n * elt
    gathered = processed * n_padded * elt / gather_efficiency(cfg, n, elt)
    l2 = (a_bytes * (n_blocks - 1) + gathered) * load_issue(cfg, elt)
    return _gather_terms(f, cfg, device, dram=dram, l2=l2, flops=2.0 * processed * n_padded, imbalance=1.0,
                         programs=n_slices * n_blocks)


# The scatter kernel's steps, from its probe on the H200 (BENCHMARKS.md 7r): an SM worked through
# its programs' steps one after another, whatever the number of programs on it (two programs took
# twice as long as one), at about SCATTER_STEP_US plus the step's MMA at SCATTER_MMA_EFFICIENCY of the
# tensor-core peak. A split's fp32 sums add at SCATTER_SPLIT_GBS through L2's atomics; splits run as a
# cluster of c CTAs hand c - 1 tiles of sums over (each rank all but its part) at about that rate
# (BENCHMARKS.md 8u: 0.8 us for 4096 x 128 on two splits in a dense analog, 1.9 us for 11008 x 128).
SCATTER_STEP_US = 0.1
SCATTER_TILE_US = 0.05  # per 64 x 64 of the tile: zeroing it and storing its entries, on CUDA cores
SCATTER_MMA_EFFICIENCY = 0.8
SCATTER_SPLIT_GBS = 3000.0


def scatter_terms(f: ProblemFeatures, cfg: SpMMConfig, device: DeviceSpec) -> CostTerms:
    """The scatter kernel (sm_90): A's tiles rebuilt in shared memory, then dense tensor-core work,
    one (rows x nnz_step x block_n) step after another on each SM (``chain_us``); the bytes (entries
    once per N tile, X once per band of rows) rarely bound it."""
    m, n = f["m"], f["n"]
    elt = DTYPE_BYTES[f.dtype]
    # fp32 runs as one fp16 product three K blocks deep, on X split per call (kernels.fp16_split):
    # three times the entries and the MMAs, X read twice and its fp16 stack written, two launches more.
    parts = fp16_split.PARTS if f.dtype == "float32" else 1
    k = f["k"] * parts
    bm, bk, bn = cfg.rows, cfg.nnz_step, cfg.block_n
    m_tiles, n_tiles, k_tiles = math.ceil(m / bm), math.ceil(n / bn), math.ceil(k / bk)
    split = max(1, min(cfg.split_k, k_tiles))
    a_bytes = (f["nnz"] * parts * 1.02 + 4 * m_tiles * k_tiles) * 4  # entries (padded to fours), tile offsets
    x_bytes = k * n * 2
    split_bytes = 2 * f["k"] * n * elt + x_bytes if parts > 1 else 0
    dram = a_bytes + x_bytes + m * n * elt + split_bytes
    l2 = a_bytes * (n_tiles - 1) + x_bytes * (m_tiles - 1)
    rate = device.tensor_rate("float16" if parts > 1 else f.dtype)
    mma_us = 2.0 * m_tiles * bm * k_tiles * bk * n_tiles * bn / (rate * 1e-6)
    threads = 32 * cfg.num_warps
    _, a_smem, x_smem = scatter_kernel.buffer_bytes(bm, bk, bn, cfg.num_stages)
    programs = m_tiles * n_tiles * split
    launch = launch_shape(programs, threads, 32 + bm * bn // threads, a_smem + x_smem, device)
    sm_tensor_rate = rate / device.sm_count * 1e-6  # flops a microsecond
    step_us = (SCATTER_STEP_US + SCATTER_TILE_US * bm * bk / 4096
               + 2.0 * bm * bk * bn / (sm_tensor_rate * SCATTER_MMA_EFFICIENCY))
    # Steps per SM: a program's steps run back to back, and an SM takes programs in turn.
    per_sm = math.ceil(programs / device.sm_count) * math.ceil(k_tiles / split)
    ctas = 1 if parts > 1 else scatter_kernel.cluster_ctas(split, bm, bk, bn, cfg.num_stages, m_tiles * n_tiles,
                                                           device.sm_count)
    tiles_moved = ctas - 1 if ctas > 1 else split + 1
    split_us = m * n * 4 * tiles_moved / (SCATTER_SPLIT_GBS * 1e3) if split > 1 else 0.0
    return CostTerms(
        mem_us=memory_us(dram, l2, device),
        compute_us=mma_us,
        wave_eff=launch.wave_eff,
        chain_us=per_sm * step_us + split_us,
        overhead_us=LAUNCH_US * (1 + (fp16_split.LAUNCHES if parts > 1 else 0)),
    )


def padded_length(f: ProblemFeatures, cfg: SpMMConfig) -> float:
    """What every row of a program costs: the longest of its ``rows`` rows, in whole steps."""
    per_row = group_max_length(f, cfg.rows, cfg.swizzle)
    return math.ceil(per_row / cfg.nnz_step) * cfg.nnz_step if per_row > 0 else 0


def b_dram_bytes(f: ProblemFeatures, device: DeviceSpec) -> float:
    """B from DRAM: once when half of L2 holds it, else once per gathered use."""
    elt = DTYPE_BYTES[f.dtype]
    b_bytes = f["k"] * f["n"] * elt
    return b_bytes if b_bytes <= device.l2_mb * 1e6 * 0.5 else f["nnz"] * f["n"] * elt


def gather_efficiency(cfg: SpMMConfig, n: int, elt: int) -> float:
    """Useful fraction of the bytes a gathered B segment fetches (sector granularity)."""
    return sector_efficiency(min(cfg.block_n, n) * elt)


def load_issue(cfg: SpMMConfig, elt: int) -> float:
    """Narrow (scalar 16-bit) loads issue more instructions per byte. 16-byte pieces (width 8) won
    or lost by 20-50% per config on the H200 with no rule found (kernels/spmm.py): this prior
    ranks them just behind width 4 (a model fitted to timings may learn otherwise), and a search's
    climb still tries them on its best config."""
    if cfg.vec == 1 and elt < 4:
        return 1.15
    return 1.02 if cfg.vec == 8 else 1.0


def _gather_terms(f: ProblemFeatures, cfg: SpMMConfig, device: DeviceSpec, *, dram: float, l2: float,
                  flops: float, imbalance: float, programs: int) -> CostTerms:
    threads = 32 * cfg.num_warps
    tile = cfg.rows * cfg.nnz_step * cfg.block_n
    return cuda_core_terms(
        dram=dram, l2=l2, flops=flops, imbalance=imbalance, programs=programs, threads=threads,
        regs=32 + 2 * tile // threads, device=device,  # the gathered tile and an accumulator of its shape
        # Each step gathers rows of B by the indices it has just loaded: with few programs (short
        # M, decode N) that chain, not bandwidth, sets the time, and longer steps shorten it.
        steps=padded_length(f, cfg) / cfg.nnz_step,
        longest_steps=longest_length(f, cfg) / cfg.nnz_step,
    )


def longest_length(f: ProblemFeatures, cfg: SpMMConfig) -> float:
    """What the longest program walks per row, in whole steps: the longest row, which one program
    holds whole (sorted, it starts first; unsorted, its program is as long), except where sorted
    slices cut it into pieces of a fair share (``SlicedELLMatrix.cuts_rows``). With skewed rows
    (cv 0.4, the longest 4.7x the mean) that program alone set the time of 16-row sorted slices in
    8-wide steps: 11008 x 4096 at N = 16, 79% zeros, fp32 ran 250 us, 482 steps at about one memory
    latency each, where 2-row cut slices in 32-wide steps ran 62 (BENCHMARKS.md 9h)."""
    longest = math.ceil(f["row_max"] / cfg.nnz_step) * cfg.nnz_step
    if cfg.kernel == "sell" and SlicedELLMatrix.cuts_rows(cfg.rows, cfg.swizzle):
        return min(longest, cut_share(f["row_mean"], f["row_max"], cfg.rows, cfg.nnz_step))
    return longest
