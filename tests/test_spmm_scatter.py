"""The scatter SpMM kernel (``stuning.kernels.spmm_scatter``) and its format (``stuning.formats.scatter``).

The kernel is Gluon for sm_90 and has no interpreter: on the CPU these tests check the format (every
entry decodes back to its element; offsets in the swizzled tile image, distinct, in range), the
config space and its rules, the cost model's terms, and that a scatter config runs correctly through
the CSR kernel where the scatter kernel cannot. The ``gpu``-marked tests run the kernel itself against
float64 references: ragged M and K, N narrower than its tile, X read as X^T, split-K, Y^T with a bias.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from naive import ALL_DTYPES, DTYPE_NAMES, HALF_DTYPES, assert_close, dtype_tol_params, randn, random_sparse, spmm_ref
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_scatter
from stuning.kernels.target import H100_BUDGET, DeviceBudget

import stuning
from stuning import CSRMatrix
from stuning.formats import capacity as capacity_format
from stuning.formats.scatter import PADDING, ScatterTiles, slot_offsets
from stuning.tuning.cost_model.spmm import scatter_terms
from stuning.tuning.device import spec_for
from stuning.tuning.features import ProblemFeatures

HALF_TOL = dtype_tol_params(HALF_DTYPES)
ALL_TOL = dtype_tol_params(ALL_DTYPES)  # fp32 as fp16 parts (test_fp16_split.py)


def scatter_config(bm=64, bk=64, bn=16, split=1, stages=2) -> spmm_kernel.SpMMConfig:
    return spmm_kernel.SpMMConfig(bm, bk, bn, 1, False, 4 * bm // 64, stages, "scatter", split_k=split)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=DTYPE_NAMES.get)
@pytest.mark.parametrize("m,k,bm,bk", [(100, 200, 64, 64), (130, 300, 128, 128), (7, 70, 64, 128), (64, 64, 64, 64)])
@pytest.mark.parametrize("slack", [0.0, float("inf")], ids=["listed", "fixed"])
def test_tiles_decode_to_the_matrix(gen, dtype, m, k, bm, bk, slack, monkeypatch):
    monkeypatch.setattr(capacity_format, "FIXED_CAPACITY_SLACK", slack)
    dense = random_sparse(m, k, 0.2, dtype, gen)
    a = CSRMatrix.from_dense(dense, pad_to=4)
    tiles = ScatterTiles.from_csr(a, bm, bk)
    assert torch.equal(tiles.to_dense(), dense)
    assert tiles.nnz == int((dense != 0).sum())
    k_tiles = -(-k // bk)
    assert tiles.tile_ptr.numel() == -(-m // bm) * k_tiles + 1
    counts = (tiles.tile_ptr[1:] - tiles.tile_ptr[:-1]) * 4
    assert int(counts.sum()) == tiles.padded_entries
    fixed = slack == float("inf")
    assert (tiles.capacity > 0) == fixed and tiles.capacity % 4 == 0
    if fixed:
        # Tile t's list at t * capacity: the kernel computes it without reading tile_ptr.
        assert bool((counts == tiles.capacity).all())
    # Per tile: offsets of real entries distinct, even, inside the tile's image; padding under four
    # entries in a list of its own length, and in the longest list of one capacity.
    offsets = (tiles.entries.to(torch.int64) & 0xFFFFFFFF) >> 16
    start, longest = 0, 0
    for count in counts.tolist():
        off = offsets[start:start + count]
        real = off != PADDING
        longest = max(longest, int(real.sum()))
        assert fixed or real.sum() > count - 4
        assert off[real].unique().numel() == int(real.sum())
        assert bool((off[real] % 2 == 0).all() and (off[real] < bm * bk * 2).all())
        start += count
    assert longest > int(counts.max()) - 4
    assert ScatterTiles.from_csr(a, bm, bk) is tiles, "built once per tile shape"


def test_lists_take_one_capacity_only_where_they_are_even(gen):
    """Uniform sparsity pads every list to the longest; a band of empty tiles (or dense ones) keeps
    each list its own length, where one capacity would multiply the memory."""
    dense = random_sparse(512, 1024, 0.1, torch.float16, gen)
    tiles = ScatterTiles.from_csr(CSRMatrix.from_dense(dense, pad_to=4), 64, 128)
    rows, cols = (dense != 0).nonzero().unbind(1)
    counts = torch.bincount((rows // 64) * 8 + cols // 128)
    assert tiles.capacity == int((counts + 3).max()) // 4 * 4, "the longest list, padded to fours"
    assert tiles.padded_entries <= capacity_format.FIXED_CAPACITY_SLACK * tiles.nnz + 4 * counts.numel()
    dense[64:192] = 0
    blocky = ScatterTiles.from_csr(CSRMatrix.from_dense(dense, pad_to=4), 64, 128)
    assert blocky.capacity == 0 and blocky.padded_entries < tiles.padded_entries
    assert torch.equal(blocky.to_dense(), dense)
    assert capacity_format.fixed_capacity(torch.tensor([12, 12, 8])) == 12, "12 <= 1.25 x the mean of 10.7"
    assert capacity_format.fixed_capacity(torch.tensor([8, 8, 16])) == 0, "16 > 1.25 x the mean of 10.7 (8, 8, 16)"
    assert capacity_format.fixed_capacity(torch.zeros(3, dtype=torch.int64)) == 0


def store_wavefronts(tiles: ScatterTiles) -> tuple[int, int]:
    """(shared-memory wavefronts the kernel's warp stores take over all tiles, the least any order
    could take): a store of 32 entries (positions 128 b + 4 t + v of a tile) takes as many as the
    most words it writes in one bank; no order beats a tile's fullest bank."""
    words = (tiles.entries.to(torch.int64) & 0xFFFFFFFF) >> 18  # the offset's four-byte word
    bounds = (tiles.tile_ptr.to(torch.int64) * 4).tolist()
    taken = least = 0
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        tile = words[start:end]
        real = tile[tile != PADDING >> 2]
        if real.numel():
            least += int(torch.bincount(real.unique() % 32).max())
        for block in range(0, end - start, 128):
            for v in range(4):
                store = tile[block:block + 128][v::4]
                store = store[store != PADDING >> 2].unique()
                if store.numel():
                    taken += int(torch.bincount(store % 32).max())
    return taken, least


@pytest.mark.parametrize("bm,bk,density", [(64, 128, 0.1), (64, 64, 0.05), (128, 128, 0.1)])
def test_entries_are_ordered_for_stores_without_bank_conflicts(gen, bm, bk, density):
    dense = random_sparse(256, 512, density, torch.float16, gen)
    tiles = ScatterTiles.from_csr(CSRMatrix.from_dense(dense, pad_to=4), bm, bk)
    assert torch.equal(tiles.to_dense(), dense)
    taken, least = store_wavefronts(tiles)
    # Row-major order took 2.1-2.9x the least here; the round robin by bank takes 1.2-1.3x.
    assert taken <= 1.4 * least, (taken, least)


@pytest.mark.parametrize("bm,bk", [(64, 64), (64, 128), (128, 64), (128, 128)])
@pytest.mark.parametrize("density", [0.005, 0.02, 0.1, 0.3, 1.0])
def test_entries_ring_fits_its_slot(gen, bm, bk, density):
    """What the kernel asserts and reinterprets: two or four entries a thread, and RING chunks of
    int32 entries within one A slot (a denser tile's rest loads when scattered)."""
    dense = random_sparse(256, 256, density, torch.float16, gen)
    tiles = ScatterTiles.from_csr(CSRMatrix.from_dense(dense, pad_to=4), bm, bk)
    warps = 4 * bm // 64
    chunk = spmm_scatter.chunk_size(tiles, warps)
    ring = spmm_scatter.ring_stages(bm, bk, chunk)
    assert chunk in (64 * warps, 128 * warps) or chunk % (128 * warps) == 0, chunk
    assert ring in spmm_scatter.RING_STAGES and ring * chunk * 4 <= bm * bk * 2, (chunk, ring)
    mean = tiles.padded_entries / (tiles.tile_ptr.numel() - 1)
    assert chunk >= min(mean, bm * bk // 4), "a tile of the mean length fits in one chunk where it can"


def test_slot_offsets_are_the_128_byte_swizzle():
    r, c = torch.meshgrid(torch.arange(64), torch.arange(128), indexing="ij")
    off = slot_offsets(r.reshape(-1), c.reshape(-1), 64)
    assert sorted(off.tolist()) == list(range(0, 64 * 128 * 2, 2)), "a permutation of the tile's bytes"
    # Row 0 is unswizzled; row 3's chunk 0 sits at chunk 3; column 64 starts the second block.
    assert slot_offsets(torch.tensor([0, 3, 0]), torch.tensor([9, 0, 64]), 64).tolist() == [18, 3 * 128 + 48, 64 * 128]


def test_format_rejects_what_the_kernel_cannot_hold(gen):
    a64 = CSRMatrix.from_dense(random_sparse(16, 64, 0.3, torch.float64, gen))
    with pytest.raises(TypeError, match="fp32, fp16 or bf16"):
        ScatterTiles.from_csr(a64, 64, 64)
    a = CSRMatrix.from_dense(random_sparse(16, 64, 0.3, torch.float16, gen))
    with pytest.raises(ValueError, match="multiple of 64"):
        ScatterTiles.from_csr(a, 64, 32)
    with pytest.raises(ValueError, match="16 bits"):
        ScatterTiles.from_csr(a, 512, 128)


def test_split_k_belongs_to_the_scatter_kernel():
    with pytest.raises(ValueError, match="split_k"):
        spmm_kernel.SpMMConfig(4, 16, 64, 4, False, 4, 1, "csr", split_k=2)
    assert scatter_config(split=4).split_k == 4


def test_config_space_only_on_hopper_with_its_triton(monkeypatch):
    problem = spmm_kernel.SpMMProblem(4096, 4096, 128, 1_700_000, torch.float16)
    ampere = DeviceBudget("A100", 108, 163 * 1024, 65536, 2048, (8, 0))
    assert spmm_scatter.config_space(problem, ampere) == []
    monkeypatch.setattr(spmm_scatter, "available", lambda: True)
    space = spmm_scatter.config_space(problem, H100_BUDGET)
    assert space and all(c.kernel == "scatter" for c in space)
    assert all(spmm_scatter.why_excluded(c, problem, H100_BUDGET) is None for c in space)
    assert {c.block_n for c in space} == {128, 64}  # N and half of it
    assert {c.split_k for c in space} == set(spmm_scatter.SPLIT_KS)
    for c in space:
        _, a_bytes, x_bytes = spmm_scatter.buffer_bytes(c.rows, c.nnz_step, c.block_n, c.num_stages)
        assert a_bytes != x_bytes and a_bytes + x_bytes + 1024 <= H100_BUDGET.shared_mem_per_block
    assert spmm_scatter.config_space(dataclasses.replace(problem, dtype=torch.float32), H100_BUDGET) == space
    assert spmm_scatter.config_space(dataclasses.replace(problem, n=8), H100_BUDGET) == []
    wide = spmm_scatter.config_space(dataclasses.replace(problem, n=2048), H100_BUDGET)
    assert {c.block_n for c in wide} == {128, 256}
    assert {c.block_n for c in spmm_scatter.config_space(dataclasses.replace(problem, n=64), H100_BUDGET)} == {64}


def test_repair_fits_n_and_k():
    problem = spmm_kernel.SpMMProblem(4096, 192, 48, 10_000, torch.float16)
    fixed = spmm_kernel.repair(scatter_config(bm=128, bk=64, bn=256, split=8, stages=3), problem)
    assert fixed.block_n == 64 and fixed.split_k == 2 and fixed.kernel == "scatter"


def test_cost_model_terms_follow_the_work():
    spec = spec_for("NVIDIA H200")

    def features(n, density):
        nnz = int(4096 * 4096 * density)
        v = {"m": 4096, "k": 4096, "n": n, "nnz": nnz, "density": density, "row_mean": nnz / 4096,
             "row_cv": 0.05, "row_max": nnz / 4096 * 1.2}
        return ProblemFeatures("spmm", "float16", v)

    small, large = scatter_terms(features(128, 0.1), scatter_config(bn=128, split=4), spec), \
        scatter_terms(features(2048, 0.1), scatter_config(bn=256, bm=128, stages=3), spec)
    assert large.work_us > 8 * small.work_us
    # The MMA does the dense tile whatever the sparsity: fewer nonzeros save bytes, not steps.
    sparse = scatter_terms(features(128, 0.02), scatter_config(bn=128, split=4), spec)
    assert sparse.chain_us == pytest.approx(small.chain_us) and sparse.mem_us < small.mem_us


@pytest.mark.parametrize("dtype,tol", ALL_TOL)
def test_scatter_config_runs_where_the_kernel_cannot(gen, dtype, tol):
    """In the interpreter (and off sm_90) a scatter config computes the product with the CSR kernel."""
    dense = random_sparse(70, 150, 0.2, dtype, gen)
    a = CSRMatrix.from_dense(dense, pad_to=4)
    b = randn(150, 24, dtype=dtype, gen=gen)
    assert not spmm_scatter.takes(b)
    y = stuning.spmm(a, b, config=scatter_config(bn=32, split=2))
    assert_close(y, spmm_ref(dense, b), tol, "scatter config, CSR kernel")


# ---------------------------------------------------------------------------------------- GPU
# (M, K, N): ragged M and K, N narrower than its tile and not a power of two, decode and wide N.
GPU_SHAPES = ((4096, 4096, 16), (100, 200, 24), (300, 1000, 128), (1000, 333, 64), (256, 512, 512))
GPU_CONFIGS = [scatter_config(*c) for c in ((64, 64, 16, 1, 2), (64, 128, 32, 3, 3), (128, 64, 128, 2, 3),
                                            (128, 128, 128, 8, 4), (64, 128, 256, 1, 2))]


def _gpu_kernel_or_skip():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0) \
            or not spmm_scatter.available():
        pytest.skip("the scatter kernel needs an sm_90 GPU and Triton's Gluon")


@pytest.mark.gpu
@pytest.mark.parametrize("config", GPU_CONFIGS,
                         ids=lambda c: f"{c.rows}x{c.nnz_step}x{c.block_n}:{c.split_k}:{c.num_stages}")
@pytest.mark.parametrize("dtype,tol", ALL_TOL)
# Each way of meeting splits through L2 with one layout of A's lists: one capacity (bounds computed)
# or each its own. Two splits meet in a cluster unless told not to (the test below).
@pytest.mark.parametrize("slices", [True, False], ids=["split-slices-fixed", "split-atomics-listed"])
def test_scatter_kernel(device_gen, dtype, tol, config, slices, monkeypatch):
    _gpu_kernel_or_skip()
    monkeypatch.setattr(spmm_scatter, "CLUSTER_SPLIT", False)
    monkeypatch.setattr(capacity_format, "FIXED_CAPACITY_SLACK", float("inf") if slices else 0.0)
    if not slices:
        monkeypatch.setattr(spmm_scatter, "SLICES_MAX_BYTES", 0)
    _check_gpu_shapes(config, dtype, tol, device_gen, fixed=slices, slices=slices)


# Two splits (halves), and four (quarters: a warp's 16 rows at BLOCK_M = 64, two warps' at 128).
# With the N tiles repaired to N = 16, the four-split configs also run the atomic adds (``cluster_ctas``).
CLUSTER_CONFIGS = [scatter_config(*c) for c in ((64, 128, 128, 2, 4), (128, 64, 128, 2, 3), (64, 64, 16, 2, 4),
                                                (64, 128, 256, 2, 2), (64, 64, 64, 4, 4), (64, 128, 128, 4, 2),
                                                (128, 128, 128, 4, 4))]


def test_cluster_configs_run_as_clusters():
    """Each config of the GPU test below runs its splits as one cluster (on the test's shapes); four
    splits on a tile whose X stages cannot take three quarters of it and the mbarrier, on a narrow
    tile, or where their clusters would take more waves than their CTAs alone, meet through L2."""
    for c in CLUSTER_CONFIGS:
        ctas = spmm_scatter.cluster_ctas(c.split_k, c.rows, c.nnz_step, c.block_n, c.num_stages, 20, 132)
        assert ctas == c.split_k, c
    assert spmm_scatter.cluster_ctas(4, 128, 64, 128, 3, 20, 132) == 1  # 48 KB of X for 48 KB of parts + 8
    assert spmm_scatter.cluster_ctas(4, 64, 64, 16, 4, 20, 132) == 1  # N = 16: the adds ran faster (8v)
    # Clusters of four where they take no more waves than the CTAs alone (8w): 28 of them a wave on
    # 132 SMs; 32 take two waves where 128 CTAs take one; 48 two waves either way; 64 three against two.
    for tiles, ctas in ((28, 4), (32, 1), (34, 4), (48, 4), (56, 4), (64, 1), (80, 4)):
        assert spmm_scatter.cluster_ctas(4, 64, 64, 64, 4, tiles, 132) == ctas, tiles
    assert spmm_scatter.cluster_ctas(2, 64, 64, 64, 4, 1000, 132) == 2
    assert spmm_scatter.cluster_ctas(2, 64, 64, 16, 4, 20, 132) == 2
    assert spmm_scatter.cluster_ctas(8, 64, 64, 64, 4, 20, 132) == 1
    assert spmm_scatter.cluster_ctas(1, 64, 64, 64, 4, 20, 132) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("config", CLUSTER_CONFIGS,
                         ids=lambda c: f"{c.rows}x{c.nnz_step}x{c.block_n}:{c.split_k}:{c.num_stages}")
@pytest.mark.parametrize("dtype,tol", HALF_TOL)
@pytest.mark.parametrize("fixed", [True, False], ids=["fixed", "listed"])
def test_scatter_kernel_splits_as_a_cluster(device_gen, dtype, tol, config, fixed, monkeypatch):
    """Two or four splits as a cluster of CTAs, each summing its part of the tile (``split_k_cluster``):
    Y written 32 bits at a time, and (Y^T) 16."""
    _gpu_kernel_or_skip()
    assert spmm_scatter.CLUSTER_SPLIT
    monkeypatch.setattr(capacity_format, "FIXED_CAPACITY_SLACK", float("inf") if fixed else 0.0)
    _check_gpu_shapes(config, dtype, tol, device_gen, fixed=fixed, slices=False)
    # Y a column slice of a wider buffer: odd N stored 16 bits at a time, the columns past it untouched.
    m, k, n = 300, 1000, 23
    dense = random_sparse(m, k, 0.1, dtype, device_gen)
    b = randn(k, n + 1, dtype=dtype, gen=device_gen)[:, :n]  # rows 16-byte aligned: TMA takes it
    assert spmm_scatter.takes(b)
    wide = torch.full((m, n + 1), float("nan"), dtype=dtype, device=b.device)
    cfg = spmm_kernel.repair(config, spmm_kernel.SpMMProblem(m, k, n, 0, dtype))
    assert not spmm_scatter.y_pairs(wide[:, :n]) and spmm_scatter.y_pairs(wide[:, :n - 1])
    stuning.spmm(CSRMatrix.from_dense(dense, pad_to=4), b, config=cfg, out=wide[:, :n])
    assert_close(wide[:, :n], spmm_ref(dense, b), tol, f"{cfg}, Y a column slice")
    assert wide[:, n].isnan().all(), f"{cfg} wrote past Y's last column"


def _check_gpu_shapes(config, dtype, tol, device_gen, *, fixed: bool, slices: bool):
    """``config`` (repaired to each shape) on GPU_SHAPES against float64: X, and X^T into Y^T with a bias."""
    from stuning.kernels.split_k import split_k_workspace

    for m, k, n in GPU_SHAPES:
        if slices:
            # The slices' buffer is never zeroed: what a launch reads must be what it wrote.
            split_k_workspace(device_gen.device, 8 * m * n, 64, zeroed=False)[0].fill_(float("nan"))
        cfg = spmm_kernel.repair(config, spmm_kernel.SpMMProblem(m, k, n, 0, dtype))
        dense = random_sparse(m, k, 0.1, dtype, device_gen)
        a = CSRMatrix.from_dense(dense, pad_to=4)
        b = randn(k, n, dtype=dtype, gen=device_gen)
        ref = spmm_ref(dense, b)
        what = f"{m}x{k}x{n} {cfg}"
        assert (ScatterTiles.from_csr(a, cfg.rows, cfg.nnz_step).capacity > 0) == fixed, what
        assert spmm_scatter.takes(b), what
        assert_close(stuning.spmm(a, b, config=cfg), ref, tol, what)
        # X read as X^T (SparseLinear's input), and Y^T with a bias written into a NaN-filled buffer.
        bt = randn(n, k, dtype=dtype, gen=device_gen).t()
        bias = randn(m, dtype=dtype, gen=device_gen)
        out_t = torch.full((n, m), float("nan"), dtype=dtype, device=b.device)
        if spmm_scatter.takes(bt):
            y = stuning.spmm(a, bt, config=cfg, out=out_t.t(), bias=bias)
            assert_close(y, spmm_ref(dense, bt) + bias.double()[:, None], tol, what + ", X^T, Y^T, bias")
        # Either pool: counters back at zero, and the adds' buffer zeroed again.
        for zeroed in (True, False):
            partial, counts = split_k_workspace(b.device, m * n, 1, zeroed=zeroed)
            assert not counts.any() and not (zeroed and partial.any()), f"split-K left a workspace dirty ({what})"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", HALF_TOL)
@pytest.mark.parametrize("clear_by_entries", [True, False], ids=["clear-entries", "clear-whole"])
def test_scatter_kernel_dense_and_empty_tiles(device_gen, dtype, tol, clear_by_entries, monkeypatch):
    """Dense tiles overflow a chunk (and their slots are then cleared whole), empty ones have none:
    lists of their own lengths; then all tiles dense, lists of one capacity longer than a chunk."""
    _gpu_kernel_or_skip()
    monkeypatch.setattr(spmm_scatter, "CLEAR_BY_ENTRIES", clear_by_entries)
    m, k, n = 192, 384, 64
    dense = randn(m, k, dtype=dtype, gen=device_gen)
    full = randn(256, k, dtype=dtype, gen=device_gen)  # whole bands of 128 rows: every list alike
    dense[64:128] = 0  # a band of empty tiles
    dense[:, 128:256] = 0
    b = randn(k, n, dtype=dtype, gen=device_gen)
    for matrix, fixed in ((dense, False), (full, True)):
        a = CSRMatrix.from_dense(matrix)
        for cfg in (scatter_config(bn=64), scatter_config(bm=128, bk=128, bn=64, split=2, stages=3)):
            capacity = ScatterTiles.from_csr(a, cfg.rows, cfg.nnz_step).capacity
            assert capacity == (cfg.rows * cfg.nnz_step if fixed else 0), (cfg, capacity)
            assert_close(stuning.spmm(a, b, config=cfg), spmm_ref(matrix, b), tol, f"{cfg}, capacity {capacity}")


@pytest.mark.gpu
def test_scatter_config_with_unaligned_x_runs_the_csr_kernel(device_gen):
    _gpu_kernel_or_skip()
    dense = random_sparse(128, 100, 0.2, torch.float16, device_gen)
    b = randn(100, 30, dtype=torch.float16, gen=device_gen)  # rows of 60 bytes: not TMA's 16
    assert not spmm_scatter.takes(b)
    y = stuning.spmm(CSRMatrix.from_dense(dense), b, config=scatter_config(bn=32))
    assert_close(y, spmm_ref(dense, b), 2e-3, "unaligned X")


def test_repair_keeps_shared_memory_within_the_device():
    # 64 x 128 tiles, 3 stages: at N = 512 the widest N tile (256) would need 245 KB.
    problem = spmm_kernel.SpMMProblem(256, 512, 512, 10_000, torch.float16)
    fixed = spmm_kernel.repair(scatter_config(bm=64, bk=128, bn=32, split=3, stages=3), problem)
    _, a_bytes, x_bytes = spmm_scatter.buffer_bytes(fixed.rows, fixed.nnz_step, fixed.block_n, fixed.num_stages)
    assert a_bytes + x_bytes + 1024 <= H100_BUDGET.shared_mem_per_block
    assert fixed.block_n in spmm_scatter.block_ns(512)
