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
    if cfg.kernel == "wgmma_sp":
        return wgmma_sp_terms(f, cfg, device)
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
    # half of it, at mma.sync's rate (about two thirds of the warpgroup MMA's peak).
    mma_us = 2.0 * m_pad * k_pad * n_pad / (device.tensor_rate(f.dtype) * 1e-6)
    if cfg.kernel == "sparse_mma":
        mma_us *= 0.5 * 1.5
    # Rebuilding the dense tile runs on CUDA cores, once per N tile: 7-8 instructions per dense
    # element in the K loop's sm_90a SASS (scripts/sass_stats.py), the limit at small N; the Hopper
    # kernel's byte permutes into the MMA's registers take 3.2-4.6 and no shared-memory round trip.
    # The sparse-MMA kernel rebuilds nothing: ~52 instructions per 64-column step of a 16-row warp
    # tile (its SASS at N = 16), 0.05 a dense element.
    per_element = {"hopper": 4.5, "sparse_mma": 0.05}.get(cfg.kernel, 8.0)
    select_us = per_element * m_pad * k_pad * n_tiles / (device.fp32_tflops * 1e6 / 2)
    compute_us = mma_us + select_us

    threads = 32 * cfg.num_warps
    # The Hopper tile is 32-bit words; the sparse-MMA kernel holds a step's pairs, half of them.
    tile = cfg.block_m * cfg.block_k // {"hopper": 2, "sparse_mma": 4}.get(cfg.kernel, 1)
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


# The sparse warpgroup-MMA kernel streams every stage through TMA, and on the H200 its times followed
# what the busiest SM streams (its programs' steps times a stage's bytes, mostly re-read from L2) at
# about L2's bandwidth shared by the SMs, while enough stages were in flight to cover
# WGMMA_LATENCY_US (24 configs at N = 128 on the Llama-7B shapes,
# benchmarks/h200-semi24-wgmma-tma/library-vs-probe-n128.txt). A split's fp32 sums add through L2's
# atomics at about WGMMA_SPLIT_GBS.
WGMMA_LATENCY_US = 2.0
WGMMA_SPLIT_GBS = 1000.0


def wgmma_sp_terms(f: ProblemFeatures, cfg: Semi24Config, device: DeviceSpec) -> CostTerms:
    """The sparse warpgroup-MMA kernel: a TMA pipeline per program, bound by what each SM streams
    (``chain_us``) or by the sparse MMA's work (half the dense product's, at the peak)."""
    m, k, n = f["m"], f["k"], f["n"]
    elt = DTYPE_BYTES[f.dtype]
    m_tiles, n_tiles = math.ceil(m / cfg.block_m), math.ceil(n / cfg.block_n)
    k_tiles = math.ceil(k / cfg.block_k)
    split = max(1, min(cfg.split_k, k_tiles))
    programs = m_tiles * n_tiles * split
    w_bytes = m * k // 2 * elt + m * k // 8
    dram = w_bytes + k * n * elt + m * n * elt
    smem = shared_memory_bytes(cfg, elt)
    stage = smem / cfg.num_stages
    threads = 32 * cfg.num_warps
    launch = launch_shape(programs, threads, 32 + 2 * cfg.block_m * cfg.block_n // threads, smem, device)
    # Bytes a microsecond an SM's TMA loads bring: its share of L2's bandwidth, or what the stages
    # in flight (all but the one the MMAs read) carry over the latency, whichever is less.
    resident = min(launch.programs_per_sm, math.ceil(programs / device.sm_count))
    in_flight = (cfg.num_stages - 1) * stage * resident
    sm_rate = min(device.l2_gbs * 1e3 / device.sm_count, in_flight / WGMMA_LATENCY_US)
    per_sm = math.ceil(programs / device.sm_count) * math.ceil(k_tiles / split) * stage
    split_us = m * n * 4 * (split + 1) / (WGMMA_SPLIT_GBS * 1e3) if split > 1 else 0.0
    mma_us = m_tiles * cfg.block_m * k_tiles * cfg.block_k * n_tiles * cfg.block_n / (
        device.tensor_rate(f.dtype) * 1e-6)
    return CostTerms(
        mem_us=memory_us(dram, 0.0, device),
        compute_us=mma_us,
        wave_eff=launch.wave_eff,
        chain_us=per_sm / sm_rate + split_us,
        overhead_us=LAUNCH_US,
    )
