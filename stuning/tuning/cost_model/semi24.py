"""2:4 on tensor cores: W's compressed bytes and X, dense-equivalent MMA work, on-chip selects."""

from __future__ import annotations

import math

from stuning.kernels.semi24 import Semi24Config, shared_memory_bytes
from stuning.tuning.cost_model.base import (
    LAUNCH_US,
    CostTerms,
    latency_factor,
    launch_shape,
    memory_us,
    sm_balance,
)
from stuning.tuning.device import DeviceSpec
from stuning.tuning.features import DTYPE_BYTES, ProblemFeatures


def terms(f: ProblemFeatures, cfg: Semi24Config, device: DeviceSpec) -> CostTerms:
    m, k, n = f["m"], f["k"], f["n"]
    elt = DTYPE_BYTES[f.dtype]
    m_tiles, n_tiles = math.ceil(m / cfg.block_m), math.ceil(n / cfg.block_n)
    k_tiles = math.ceil(k / cfg.block_k)
    split = max(1, min(cfg.split_k, k_tiles))
    m_pad, n_pad, k_pad = m_tiles * cfg.block_m, n_tiles * cfg.block_n, k_tiles * cfg.block_k

    w_bytes = m * k // 2 * elt + m * k // 8
    x_bytes = k * n * elt
    # Split-K adds into an fp32 buffer in L2 (atomics), re-read and zeroed by the last split.
    out_bytes = m * n * elt
    l2_out = m * n * 4 * (split + 2) if split > 1 else 0
    dram = w_bytes + x_bytes + out_bytes
    l2 = w_bytes * (n_tiles - 1) + x_bytes * (m_tiles - 1) + l2_out
    mem_us = memory_us(dram, l2, device)
    # One dot per K step on the decompressed tile: dense-equivalent tensor work. The sparse MMA does
    # half of it, at mma.sync's rate (about two thirds of the warpgroup MMA's peak); the sparse
    # warpgroup MMA does half of it at the peak.
    mma_us = 2.0 * m_pad * k_pad * n_pad / (device.tensor_rate(f.dtype) * 1e-6)
    mma_us *= {"sparse_mma": 0.5 * 1.5, "wgmma_sp": 0.5}.get(cfg.kernel, 1.0)
    # Rebuilding the dense tile runs on CUDA cores, once per N tile: 7-8 instructions per dense
    # element in the K loop's sm_90a SASS (scripts/sass_stats.py), the limit at small N; the Hopper
    # kernel's byte permutes into the MMA's registers take 3.2-4.6 and no shared-memory round trip.
    # The sparse-MMA kernel rebuilds nothing: ~52 instructions per 64-column step of a 16-row warp
    # tile (its SASS at N = 16), 0.05 a dense element; the warpgroup one, fed by TMA, only spreads
    # each lane's metadata words over its accumulator's registers.
    per_element = {"hopper": 4.5, "sparse_mma": 0.05, "wgmma_sp": 0.02}.get(cfg.kernel, 8.0)
    select_us = per_element * m_pad * k_pad * n_tiles / (device.fp32_tflops * 1e6 / 2)
    compute_us = mma_us + select_us

    threads = 32 * cfg.num_warps
    # The Hopper tile is 32-bit words; the sparse-MMA kernel holds a step's pairs, half of them; the
    # warpgroup one reads W from shared memory and holds two steps' metadata words.
    tile = {"hopper": cfg.block_m * cfg.block_k // 2, "sparse_mma": cfg.block_m * cfg.block_k // 4,
            "wgmma_sp": 4 * cfg.block_m * cfg.block_n // 2}.get(cfg.kernel, cfg.block_m * cfg.block_k)
    regs = 32 + (cfg.block_m * cfg.block_n + tile) // threads  # accumulator, rebuilt tile
    smem = shared_memory_bytes(cfg, elt)
    launch = launch_shape(m_tiles * n_tiles * split, threads, regs, smem, device)
    # A deeper pipeline hides more latency; one stage hides none.
    pipelining = 1.0 + 0.5 / max(1, cfg.num_stages - 1)
    # The rebuild is bound by each SM's shared memory (BENCHMARKS.md 7i), so an uneven share of a
    # single wave costs what the busiest SM carries over the mean; over several waves wave_eff counts.
    balance = sm_balance(launch.programs, device) if launch.waves == 1 else 1.0
    return CostTerms(
        mem_us=mem_us,
        compute_us=compute_us,
        imbalance=pipelining * balance,
        wave_eff=launch.wave_eff,
        latency=latency_factor(launch.occupancy, 0.25),
        overhead_us=LAUNCH_US,
    )
