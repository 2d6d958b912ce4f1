"""SDDMM, every kernel: per nonzero on CUDA cores (gather), per nonempty output tile on tensor cores
(tiled), or cuBLAS's dense product sampled (dense). One family, one set of fitted coefficients; the
config's ``kernel`` picks the terms, and a fitted ``kernel=...`` effect absorbs what the terms miss
about each."""

from __future__ import annotations

import dataclasses
import math

from stuning.kernels import fp16_split
from stuning.kernels.sddmm import SDDMMConfig, copies_for
from stuning.kernels.sddmm_tiled import PARTS_MIN_CAPABILITY, registers_per_thread, shared_memory_bytes
from stuning.tuning.cost_model.base import (
    LAUNCH_US,
    CostTerms,
    cuda_core_terms,
    latency_factor,
    launch_shape,
    memory_us,
    sector_efficiency,
)
from stuning.tuning.device import DeviceSpec
from stuning.tuning.features import DTYPE_BYTES, ProblemFeatures, tile_feature

# Shared-memory bandwidth per SM per clock (bytes): what the tiled kernel's pick runs at.
_SMEM_BYTES_PER_CLOCK = 128
# A picked nonzero: one 4-byte shared read, replayed on bank conflicts (random positions in the tile).
_PICK_SMEM_BYTES = 32
# Instructions per picked entry on CUDA cores: two index loads, a compare, the gather's address,
# scale (and beta), convert, store.
_PICK_OPS = 16
# Triton's exact fp32 tl.dot (input_precision="ieee") ran at 6.6-7.1 TFLOP/s on the H200 against a
# 67 TFLOP/s FMA peak, on every shape of the first table (32x32x32 tiles, 4 warps; BENCHMARKS 7d):
# a tenth of the peak. GPUs without TF32 (before sm_80) still take it.
_IEEE_DOT_FRACTION = 0.1
# Elsewhere fp32 tiles multiply as fp16 parts (kernels/sddmm_tiled.py): one fp16 product of A's and
# B's stacks, PARTS times K deep, after splitting both per call.


def terms(f: ProblemFeatures, cfg: SDDMMConfig, device: DeviceSpec) -> CostTerms:
    if cfg.kernel == "tiled":
        t = _tiled_terms(f, cfg, device)
    elif cfg.kernel == "dense":
        t = _dense_terms(f, cfg, device)
    else:
        t = _gather_terms(f, cfg, device)
    copy_us = _copies_us(f, cfg, device)
    return dataclasses.replace(t, overhead_us=t.overhead_us + copy_us) if copy_us else t


def _copies_us(f: ProblemFeatures, cfg: SDDMMConfig, device: DeviceSpec) -> float:
    """The launch's copies of operands with K strided to K-contiguous ones, where the kernel reads
    them so (kernels/sddmm.operands_for): each a launch that reads and writes the operand once. A
    fixed cost, like a launch's, outside the fitted part. ``a_t``: a weight gradient's layout, A =
    dY^T a transposed view and B = X row-major."""
    if not f.values.get("a_t"):
        return 0.0
    m, n, k = f["m"], f["n"], f["k"]
    copy_a, copy_b = copies_for(cfg, m, k, tf32x3=f.dtype == "float32" and not fp16_parts(f, device))
    sizes = [size for size, copy in ((m * k, copy_a), (k * n, copy_b)) if copy]
    return sum(memory_us(2 * size * DTYPE_BYTES[f.dtype], 0.0, device) + LAUNCH_US for size in sizes)


def _dense_terms(f: ProblemFeatures, cfg: SDDMMConfig, device: DeviceSpec) -> CostTerms:
    """The whole product at cuBLAS's rate (fp32 on CUDA cores: TF32 is off), its M x N output
    written to and read back by sector from memory with each nonzero's column, the values written;
    two launches. The flat pass reads each nonzero's row too; the pass by rows (``block_m``) reads
    none, but waits on one load more (the rows' starts) before it can address the product."""
    m, n, k = f["m"], f["n"], f["k"]
    elt = DTYPE_BYTES[f.dtype]
    idx = f.values.get("idx_bytes", 4)
    nnz = max(1, f["nnz"])
    rate = device.fp32_tflops * 1e12 if f.dtype == "float32" else device.tensor_rate(f.dtype)
    product = m * n * elt
    sampled = min(product, nnz * 32)  # one sector a nonzero, at most the whole product
    by_rows = cfg.block_m > 0
    dram = (m * k + k * n) * elt + product + sampled + nnz * ((1 if by_rows else 2) * idx + elt)
    return CostTerms(mem_us=memory_us(dram, 0.0, device), compute_us=2.0 * m * n * k / rate * 1e6,
                     overhead_us=2 * LAUNCH_US + (device.mem_latency_us if by_rows else 0.0))


def _gather_terms(f: ProblemFeatures, cfg: SDDMMConfig, device: DeviceSpec) -> CostTerms:
    """A row of A and a column of B gathered per nonzero."""
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


def nonempty_tiles(f: ProblemFeatures, block_m: int, block_n: int) -> float:
    """Tiles holding a nonzero: counted on the mask when the features have it, else what a uniform
    random mask of this density would give (each of a tile's cells nonzero with probability d)."""
    counted = f.values.get(tile_feature(block_m, block_n))
    if counted is not None:
        return float(counted)
    m, n = f["m"], f["n"]
    density = min(1.0, max(0.0, f["density"]))
    tiles = math.ceil(m / block_m) * math.ceil(n / block_n)
    cells = min(block_m, m) * min(block_n, n)
    return min(tiles * -math.expm1(cells * math.log1p(-density)) if density < 1 else tiles, f["nnz"])


def fp16_parts(f: ProblemFeatures, device: DeviceSpec) -> bool:
    """Whether the tiled kernel multiplies this problem as fp16 parts (``sddmm_tiled.fp16_parts``)."""
    return f.dtype == "float32" and tuple(device.compute_capability) >= PARTS_MIN_CAPABILITY


def _tiled_terms(f: ProblemFeatures, cfg: SDDMMConfig, device: DeviceSpec) -> CostTerms:
    """Dense tiles of A @ B on tensor cores for every nonempty tile; only the nonzeros are written."""
    m, n, k = f["m"], f["n"], max(1, f["k"])
    out_elt = elt = DTYPE_BYTES[f.dtype]
    parts = fp16_parts(f, device)
    split_bytes = 0
    if parts:
        # The split reads A and B twice (their maxima, then the parts) and writes stacks of PARTS x K
        # fp16 columns, which the tiles then read as an fp16 problem that deep.
        split_bytes = (m + n) * k * (2 * elt + fp16_split.PARTS * 2)
        elt, k = 2, fp16_split.PARTS * k
    idx = f.values.get("idx_bytes", 4)
    nnz = max(1, f["nnz"])
    bm, bn, chunk = cfg.block_m, cfg.block_n, cfg.chunk
    tiles = max(1.0, nonempty_tiles(f, bm, bn))
    k_steps = math.ceil(k / cfg.block_k)
    k_padded = k_steps * cfg.block_k
    per_tile = nnz / tiles
    # Each tile's entries are padded to whole chunks; the padding is read (and skipped) too.
    entries = tiles * math.ceil(per_tile / chunk) * chunk
    meta = entries * ((2 if bm * bn <= 2**15 else 4) + idx) + tiles * 12

    # A and B come from DRAM once (consecutive tiles share A's rows; B is re-read from L2), each
    # tile reads its BLOCK_N x K slice of B from L2, and its BLOCK_M x K band of A unless a run of
    # tiles shares it (one K step: the band is read once per run). A tile's nonzeros of one row are
    # one run of the CSR values: short runs write partial sectors.
    bands = max(1.0, min(math.ceil(m / bm), tiles))
    programs = bands * math.ceil(tiles / bands / cfg.tiles_per_program)
    a_reads = programs if cfg.reads_band_once_a_run(k) else tiles
    run_bytes = max(1.0, per_tile / min(bm, m)) * out_elt
    out_l2 = nnz * out_elt / sector_efficiency(run_bytes)
    dram = (m * k + k * n) * elt + nnz * out_elt + meta + split_bytes
    l2 = (tiles * bn + a_reads * bm) * k_padded * elt + out_l2 + meta
    if parts:
        rate = device.tensor_rate("float16")
    elif f.dtype == "float32":
        rate = device.fp32_tflops * 1e12 * _IEEE_DOT_FRACTION
    else:
        rate = device.tensor_rate(f.dtype)
    mma_us = 2.0 * tiles * bm * bn * k_padded / rate * 1e6
    smem_bw = device.sm_count * _SMEM_BYTES_PER_CLOCK * device.clock_ghz * 1e9
    # Every pick step writes the tile (in the output's dtype) to shared memory again (the gather's
    # source), then reads one element per entry.
    steps = tiles * math.ceil(per_tile / chunk)
    pick_us = (steps * bm * bn * out_elt + entries * _PICK_SMEM_BYTES) / smem_bw * 1e6
    pick_us += entries * _PICK_OPS / (device.fp32_tflops * 1e12 / 2) * 1e6

    p = cfg.tiled_params()
    threads = 32 * cfg.num_warps
    launch = launch_shape(math.ceil(programs), threads, registers_per_thread(p), shared_memory_bytes(p, elt), device)
    # A deeper pipeline hides more load latency (as in the 2:4 model: independent of K, so that
    # more K never predicts faster).
    pipelining = 1.0 + 0.5 / max(1, cfg.num_stages - 1)
    return CostTerms(
        mem_us=memory_us(dram, l2, device),
        compute_us=mma_us + pick_us,
        imbalance=pipelining,
        wave_eff=launch.wave_eff,
        latency=latency_factor(launch.occupancy, 0.25),
        overhead_us=LAUNCH_US * (1 + (2 * fp16_split.LAUNCHES if parts else 0)),
    )
