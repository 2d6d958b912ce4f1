"""The kernels at realistic sizes on a CUDA GPU (skipped without one).

Every dtype x a deterministic sample of each kernel's config space (plus the default heuristic),
against a float64 reference computed on the GPU, with the same tolerances as the CPU tests. Also
checks that only a change of dtype or config compiles a kernel again, not a change of sizes.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from naive import (
    ALL_DTYPES,
    HALF_DTYPES,
    TOL,
    assert_close,
    config_id,
    config_params,
    dtype_tol_params,
    randn,
    random_24,
    random_sparse,
    rel_err,
    sample_configs,
    sddmm_ref,
    semi24_ref,
    skewed_sparse,
    spmm_ref,
)
from stuning.kernels import sddmm as sddmm_kernel
from stuning.kernels import sddmm_dense, sddmm_tiled
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_sell as sell_kernel

import stuning
from stuning import CSRMatrix, Semi24Matrix, SlicedELLMatrix
from stuning.formats import capacity as capacity_format
from stuning.formats import output_tiles

pytestmark = pytest.mark.gpu

DTYPES = ALL_DTYPES
DTYPE_TOL = dtype_tol_params(DTYPES)
DTYPE_TOL_24 = dtype_tol_params(HALF_DTYPES)
SAMPLES = 8

# --------------------------------------------------------------------------------------- SpMM
SPMM_M = SPMM_K = 4096
SPMM_DENSITY = 0.1  # 90% unstructured sparsity
SPMM_NNZ = round(SPMM_DENSITY * SPMM_M * SPMM_K)


def spmm_params():
    params = []
    for n in (16, 128, 1024):
        problem = spmm_kernel.SpMMProblem(SPMM_M, SPMM_K, n, SPMM_NNZ, torch.float16)
        sampled = sample_configs(spmm_kernel.config_space(problem), SAMPLES, seed=100 + n)
        for p in config_params(sampled, spmm_kernel.heuristic(problem), prefix=f"n{n}-"):
            params.append(pytest.param(n, *p.values, id=p.id))
    return params


@pytest.mark.parametrize("n,config", spmm_params())
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_spmm_uniform(device_gen, dtype, tol, n, config):
    dense = random_sparse(SPMM_M, SPMM_K, SPMM_DENSITY, dtype, device_gen)
    a = CSRMatrix.from_dense(dense, pad_to=4)
    b = randn(SPMM_K, n, dtype=dtype, gen=device_gen)
    out = torch.full((SPMM_M, n), float("nan"), dtype=dtype, device=b.device)
    y = stuning.spmm(a, b, config=config, out=out)
    assert y is out
    assert_close(y, spmm_ref(dense, b), tol, f"spmm n={n} {config}")


SKEW_N = 128
SKEW_PROBLEM = spmm_kernel.SpMMProblem(SPMM_M, SPMM_K, SKEW_N, SPMM_NNZ, torch.float16)
SKEW_CONFIGS = config_params(
    sample_configs(spmm_kernel.config_space(SKEW_PROBLEM), SAMPLES, seed=7), spmm_kernel.heuristic(SKEW_PROBLEM)
)


PREFETCH_CONFIGS = [
    spmm_kernel.SpMMConfig(rows=1, nnz_step=32, block_n=16, vec=4, num_warps=2, num_stages=1),
    spmm_kernel.SpMMConfig(rows=2, nnz_step=64, block_n=32, vec=4, num_warps=4, num_stages=1),
    spmm_kernel.SpMMConfig(rows=4, nnz_step=128, block_n=16, vec=4, swizzle=True, num_warps=4, num_stages=1),
]


# 16-byte pieces of B's rows (vec 8), for both kernels, with N filling its tiles and not.
WIDE_VEC_CONFIGS = [
    spmm_kernel.SpMMConfig(rows=1, nnz_step=16, block_n=32, vec=8, num_warps=2, num_stages=1),
    spmm_kernel.SpMMConfig(rows=8, nnz_step=16, block_n=128, vec=8, swizzle=True, num_warps=8, num_stages=1),
    spmm_kernel.SpMMConfig(rows=4, nnz_step=8, block_n=128, vec=8, swizzle=True, num_warps=2, num_stages=1,
                           kernel="sell"),
]


@pytest.mark.parametrize("n", [128, 200])
@pytest.mark.parametrize("config", WIDE_VEC_CONFIGS, ids=config_id)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_spmm_16_byte_pieces_of_b(device_gen, dtype, tol, config, n):
    dense = skewed_sparse(SPMM_M, SPMM_K, SPMM_DENSITY * SPMM_K, dtype, device_gen, cv=0.45, empty_rows=64)
    b = randn(SPMM_K, n, dtype=dtype, gen=device_gen)
    y = stuning.spmm(CSRMatrix.from_dense(dense, pad_to=4), b, config=config)
    assert_close(y, spmm_ref(dense, b), tol, f"spmm vec 8 n={n} {config}")


@pytest.mark.parametrize("n", [16, 100])
@pytest.mark.parametrize("config", PREFETCH_CONFIGS, ids=config_id)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_spmm_prefetch_matches_the_plain_loop(device_gen, dtype, tol, config, n):
    # Skewed rows with empty ones: steps end mid-row and programs run different step counts. The
    # prefetching loop sums the same products in the same order, so the outputs are bit-identical.
    dense = skewed_sparse(SPMM_M, SPMM_K, SPMM_DENSITY * SPMM_K, dtype, device_gen, cv=0.45, empty_rows=64)
    a = CSRMatrix.from_dense(dense, pad_to=4)
    b = randn(SPMM_K, n, dtype=dtype, gen=device_gen)
    plain = stuning.spmm(a, b, config=config)
    prefetched = stuning.spmm(a, b, config=dataclasses.replace(config, prefetch=True))
    assert torch.equal(plain, prefetched)
    assert_close(prefetched, spmm_ref(dense, b), tol, f"spmm prefetch n={n} {config}")


@pytest.mark.parametrize("config", SKEW_CONFIGS)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_spmm_skewed_rows(device_gen, dtype, tol, config):
    dense = skewed_sparse(SPMM_M, SPMM_K, SPMM_DENSITY * SPMM_K, dtype, device_gen, cv=0.45, empty_rows=64)
    a = CSRMatrix.from_dense(dense)
    assert 0.3 < a.stats().cv < 0.6 and a.stats().empty >= 64
    b = randn(SPMM_K, SKEW_N, dtype=dtype, gen=device_gen)
    y = stuning.spmm(a, b, config=config)
    assert_close(y, spmm_ref(dense, b), tol, f"spmm skewed {config}")


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_spmm_transposed_b_and_torch_sparse(device_gen, dtype, tol):
    dense = random_sparse(SPMM_M, SPMM_K, SPMM_DENSITY, dtype, device_gen)
    x = randn(100, SPMM_K, dtype=dtype, gen=device_gen)
    cfg = spmm_kernel.SpMMConfig(rows=4, nnz_step=16, block_n=32, vec=1, swizzle=True)
    y = stuning.spmm(dense.to_sparse_csr(), x.t(), config=cfg)
    assert_close(y, spmm_ref(dense, x.t()), tol)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("n", [30, 100, 129])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_spmm_vec_with_unaligned_b(device_gen, dtype, tol, n, layout):
    # VEC is only a hint about the column offsets: it must stay right when B's rows are not
    # aligned to it (N not a multiple, column-major B, a column slice starting off alignment).
    dense = random_sparse(1024, 2048, SPMM_DENSITY, dtype, device_gen)
    a = CSRMatrix.from_dense(dense)
    if layout == "contiguous":
        b = randn(2048, n, dtype=dtype, gen=device_gen)
    elif layout == "transposed":
        b = randn(n, 2048, dtype=dtype, gen=device_gen).t()
    else:
        b = randn(2048, n + 3, dtype=dtype, gen=device_gen)[:, 1 : n + 1]
    ref = spmm_ref(dense, b)
    for vec, block_n in ((2, 32), (4, 64), (8, 128)):
        cfg = spmm_kernel.SpMMConfig(rows=2, nnz_step=16, block_n=block_n, vec=vec, swizzle=True, num_warps=4)
        assert_close(stuning.spmm(a, b, config=cfg), ref, tol, f"vec {vec}")


# ----------------------------------------------------------------------------- SpMM, sliced ELL
def sell_params():
    params = []
    for n in (16, 128, 1024):
        problem = spmm_kernel.SpMMProblem(SPMM_M, SPMM_K, n, SPMM_NNZ, torch.float16)
        for c in sample_configs(sell_kernel.config_space(problem), SAMPLES, seed=300 + n):
            params.append(pytest.param(n, c, id=f"n{n}-{config_id(c)}"))
    return params


@pytest.mark.parametrize("n,config", sell_params())
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_spmm_sell_uniform(device_gen, dtype, tol, n, config):
    dense = random_sparse(SPMM_M, SPMM_K, SPMM_DENSITY, dtype, device_gen)
    a = CSRMatrix.from_dense(dense)
    b = randn(SPMM_K, n, dtype=dtype, gen=device_gen)
    out = torch.full((SPMM_M, n), float("nan"), dtype=dtype, device=b.device)
    y = stuning.spmm(a, b, config=config, out=out)
    assert y is out
    assert SlicedELLMatrix.cache_key(config.rows, config.swizzle, config.nnz_step) in a.cache  # it ran as SELL
    assert_close(y, spmm_ref(dense, b), tol, f"spmm sell n={n} {config}")


SELL_SKEW_CONFIGS = [
    pytest.param(c, id=config_id(c)) for c in sample_configs(sell_kernel.config_space(SKEW_PROBLEM), SAMPLES, seed=9)
]


@pytest.mark.parametrize("config", SELL_SKEW_CONFIGS)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_spmm_sell_skewed_rows(device_gen, dtype, tol, config):
    # Rows from 0 to ~3x the mean: unsorted slices are mostly padding, sorted ones hardly any.
    dense = skewed_sparse(SPMM_M, SPMM_K, SPMM_DENSITY * SPMM_K, dtype, device_gen, cv=0.45, empty_rows=64)
    b = randn(SPMM_K, SKEW_N, dtype=dtype, gen=device_gen)
    y = stuning.spmm(CSRMatrix.from_dense(dense), b, config=config)
    assert_close(y, spmm_ref(dense, b), tol, f"spmm sell skewed {config}")


@pytest.mark.parametrize("sparsity", [0.9, 0.95, 0.98])
@pytest.mark.parametrize("n", [16, 100])
def test_spmm_sell_decode_sparsities_and_odd_n(device_gen, sparsity, n):
    # The decode regime SELL is for; N = 100 leaves the last N tile partial (the masked path).
    dense = random_sparse(SPMM_M, SPMM_K, 1.0 - sparsity, torch.float16, device_gen)
    a = CSRMatrix.from_dense(dense)
    b = randn(SPMM_K, n, dtype=torch.float16, gen=device_gen)
    ref = spmm_ref(dense, b)
    for rows, step, block_n in ((8, 8, 16), (32, 8, 16), (16, 16, 32), (4, 64, 16), (1, 128, 16)):
        cfg = spmm_kernel.SpMMConfig(rows, step, block_n, 4, True, 4, 1, kernel="sell")
        assert_close(stuning.spmm(a, b, config=cfg), ref, TOL[torch.float16], f"sparsity {sparsity} {cfg}")


# -------------------------------------------------------------------------------------- SDDMM
SDDMM_L, SDDMM_K, SDDMM_DENSITY = 1024, 64, 0.1
SDDMM_PROBLEM = sddmm_kernel.SDDMMProblem(SDDMM_L, SDDMM_L, SDDMM_K, round(SDDMM_DENSITY * SDDMM_L**2), torch.float16)
SDDMM_SPACE = sddmm_kernel.config_space(SDDMM_PROBLEM)
SDDMM_CONFIGS = config_params(
    sample_configs([c for c in SDDMM_SPACE if c.kernel == "gather"], SAMPLES, seed=11),
    sddmm_kernel.heuristic(SDDMM_PROBLEM),
)
SDDMM_TILED_CONFIGS = [
    p
    for p in config_params(
        sample_configs([c for c in SDDMM_SPACE if c.kernel == "tiled"], SAMPLES, seed=12),
        sddmm_kernel.tiled_heuristic(SDDMM_PROBLEM),
    )
    if p.values[0] is not None  # the op's own choice is in SDDMM_CONFIGS already
]
SDDMM_DENSE = [pytest.param(sddmm_kernel.dense_config(), id="dense"),
               pytest.param(sddmm_kernel.dense_config(8), id="dense-by-rows")]


@pytest.mark.parametrize("config", [*SDDMM_CONFIGS, *SDDMM_TILED_CONFIGS, *SDDMM_DENSE])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_sddmm_attention_shape(device_gen, dtype, tol, config):
    # Q K^T sampled at a sparse attention pattern: mask L x L, A = Q (L x K), B = K^T (a view).
    mask_dense = skewed_sparse(SDDMM_L, SDDMM_L, SDDMM_DENSITY * SDDMM_L, dtype, device_gen, empty_rows=8)
    q = randn(SDDMM_L, SDDMM_K, dtype=dtype, gen=device_gen)
    k = randn(SDDMM_L, SDDMM_K, dtype=dtype, gen=device_gen)
    mask = CSRMatrix.from_dense(mask_dense)
    out = stuning.sddmm(mask, q, k.t(), alpha=0.125, beta=1.0, config=config)
    ref = sddmm_ref(mask_dense, q, k.t(), 0.125, 1.0)
    rows, cols = mask.row_ids().long(), mask.col.long()
    assert torch.equal(out.crow, mask.crow) and torch.equal(out.col, mask.col)
    assert_close(out.values, ref[rows, cols], tol, f"sddmm {config}")


@pytest.mark.parametrize("n,config", [(256, None), pytest.param(2048, sddmm_kernel.dense_config(), id="2048-dense"),
                                      pytest.param(2048, sddmm_kernel.dense_config(16), id="2048-dense-by-rows")])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_sddmm_pruned_weight_gradient(device_gen, dtype, tol, n, config):
    # The weight gradient of a pruned 4096 x 4096 layer: dY^T X at the weight's pattern.
    m = k = 4096
    mask_dense = random_sparse(m, k, SPMM_DENSITY, dtype, device_gen)
    dy = randn(n, m, dtype=dtype, gen=device_gen)
    x = randn(n, k, dtype=dtype, gen=device_gen)
    mask = CSRMatrix.from_dense(mask_dense)
    poisoned = CSRMatrix(mask.crow, mask.col, torch.full_like(mask.values, float("nan")), mask.shape)
    out = stuning.sddmm(poisoned, dy.t(), x, config=config)  # beta = 0: the NaN mask values are never read
    ref = sddmm_ref(mask_dense, dy.t(), x)
    assert_close(out.values, ref[mask.row_ids().long(), mask.col.long()], tol)


def sddmm_tiled_params():
    """The issue's attention-like target: a 4096 x 4096 mask, K = 64 and 128, 95% sparse."""
    params = []
    for k in (64, 128):
        problem = sddmm_kernel.SDDMMProblem(4096, 4096, k, round(0.05 * 4096**2), torch.float16)
        tiled = [c for c in sddmm_kernel.config_space(problem) if c.kernel == "tiled"]
        for p in config_params(sample_configs(tiled, 4, seed=300 + k), sddmm_kernel.tiled_heuristic(problem),
                               prefix=f"k{k}-"):
            params.append(pytest.param(k, *p.values, id=p.id))
    return params


@pytest.mark.parametrize("k,config", sddmm_tiled_params())
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_sddmm_tiled_4096(device_gen, dtype, tol, k, config):
    mask_dense = random_sparse(4096, 4096, 0.05, dtype, device_gen)
    q = randn(4096, k, dtype=dtype, gen=device_gen)
    kk = randn(4096, k, dtype=dtype, gen=device_gen)
    mask = CSRMatrix.from_dense(mask_dense)
    out = stuning.sddmm(mask, q, kk.t(), alpha=0.125, config=config)
    ref = sddmm_ref(mask_dense, q, kk.t(), 0.125)
    assert_close(out.values, ref[mask.row_ids().long(), mask.col.long()], tol, f"sddmm k={k} {config}")


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_sddmm_tiled_ragged_shape_and_k_tail(device_gen, dtype, tol):
    # M, N not multiples of any tile, K = 70 not a multiple of any BLOCK_K, a block of dense rows.
    m, n, k = 1000, 3001, 70
    mask_dense = random_sparse(m, n, 0.03, dtype, device_gen)
    mask_dense[100:164, 2900:] = 1.0
    a = randn(m, k, dtype=dtype, gen=device_gen)
    b = randn(k, n, dtype=dtype, gen=device_gen)
    mask = CSRMatrix.from_dense(mask_dense)
    problem = sddmm_kernel.SDDMMProblem(m, n, k, mask.nnz, dtype)
    tiled = [c for c in sddmm_kernel.config_space(problem) if c.kernel == "tiled"]
    ref = sddmm_ref(mask_dense, a, b, -0.5, 2.0)[mask.row_ids().long(), mask.col.long()]
    for cfg in sample_configs(tiled, 6, seed=41):
        out = stuning.sddmm(mask, a, b, alpha=-0.5, beta=2.0, config=cfg)
        assert_close(out.values, ref, tol, str(cfg))


@pytest.mark.parametrize("k", [256, 2048])
@pytest.mark.parametrize("bm,bn,bk,warps", [(128, 128, 64, 8), (128, 64, 32, 4)])
def test_sddmm_tiled_fp32_as_fp16_parts(device_gen, k, bm, bn, bk, warps):
    # fp32 tiles multiply as one fp16 product of the operands' parts, 3K deep, its sums flushed every
    # FLUSH_K: as accurate as SGEMM (TF32 off), and as the tf32x3 tiles it replaced.
    m, n = 1024, 1024
    mask_dense = random_sparse(m, n, 0.1, torch.float32, device_gen)
    a = randn(m, k, dtype=torch.float32, gen=device_gen)
    b = randn(k, n, dtype=torch.float32, gen=device_gen)
    mask = CSRMatrix.from_dense(mask_dense)
    rows, cols = mask.row_ids().long(), mask.col.long()
    ref = sddmm_ref(mask_dense, a, b, 0.5)[rows, cols]
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        sgemm = rel_err((0.5 * (a @ b))[rows, cols], ref)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    tiles = output_tiles(mask, bm, bn, 64)
    assert sddmm_tiled.fp16_parts(torch.float32, a.device)
    errors = {}
    for parts in (True, False):
        out = sddmm_tiled.sddmm_tiled(tiles, mask.values, a, b, alpha=0.5, beta=0.0, block_k=bk,
                                      num_warps=warps, num_stages=3, parts=parts)
        errors[parts] = rel_err(out, ref)
    assert errors[True] <= max(4 * sgemm, 1e-6), (errors, sgemm)
    assert errors[False] <= max(4 * sgemm, 1e-6), (errors, sgemm)


# ---------------------------------------------------------------------------------------- 2:4
SEMI_M = SEMI_K = 4096


def semi24_params():
    params = []
    for n in (16, 2048):
        problem = semi24_kernel.Semi24Problem(SEMI_M, SEMI_K, n, torch.float16)
        sampled = sample_configs(semi24_kernel.config_space(problem), SAMPLES, seed=200 + n)
        for p in config_params(sampled, semi24_kernel.heuristic(problem), prefix=f"n{n}-"):
            params.append(pytest.param(n, *p.values, id=p.id))
    return params


@pytest.mark.parametrize("n,config", semi24_params())
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL_24)
def test_semi24(device_gen, dtype, tol, n, config):
    dense = random_24(SEMI_M, SEMI_K, dtype, device_gen)
    w = Semi24Matrix.from_dense(dense)
    x = randn(SEMI_K, n, dtype=dtype, gen=device_gen)
    ref = semi24_ref(dense, x)
    y = stuning.semi24_mm(w, x, config=config)
    assert_close(y, ref, tol, f"semi24 n={n} {config}")
    # Y^T, as SparseLinear writes it: another store layout, in which split-K once raced (7p).
    y_t = stuning.semi24_mm(w, x, config=config, out=torch.empty(n, SEMI_M, dtype=dtype, device=x.device).t())
    assert_close(y_t, ref, tol, f"semi24 n={n} {config}, Y^T")


# (M, K, N): ragged M and K, N tiles wider than N, split-K with uneven shares.
HOPPER_SHAPES = ((4096, 4096, 16), (100, 200, 32), (192, 4096, 48), (11008, 640, 16))
HOPPER_CONFIGS = [semi24_kernel.Semi24Config(bm, bn, 64, 1, split, warps, stages, kernel="hopper")
                  for bm, bn, split, warps, stages in ((64, 16, 1, 4, 2), (128, 16, 3, 4, 3), (128, 32, 8, 8, 4),
                                                       (64, 64, 2, 4, 3), (128, 128, 6, 4, 2))]


SPARSE_MMA_CONFIGS = [semi24_kernel.Semi24Config(bm, bn, 64, 1, split, warps, stages, kernel="sparse_mma")
                      for bm, bn, split, warps, stages in ((16, 16, 1, 1, 2), (32, 16, 3, 2, 3), (64, 16, 16, 4, 3),
                                                           (128, 32, 8, 8, 2), (128, 16, 6, 4, 3))]


# (block_m, block_n, block_k, split_k, num_warps, num_stages): both step widths and N tiles, 1-4
# warpgroups, uneven splits, the deepest pipelines that fit.
WGMMA_SP_CONFIGS = [semi24_kernel.Semi24Config(bm, bn, bk, 1, split, warps, stages, kernel="wgmma_sp")
                    for bm, bn, bk, split, warps, stages in ((64, 64, 64, 1, 4, 3), (128, 128, 128, 3, 8, 4),
                                                             (256, 64, 128, 2, 16, 3), (64, 128, 64, 8, 4, 8),
                                                             (128, 64, 64, 6, 8, 6), (256, 128, 128, 1, 16, 3))]
# TMA reads rows in 16-byte pieces (K % 16, N % 8): ragged M and K steps, N under, across and past
# the tiles (a 16-column X in a 64-column tile: TMA fills the rest with zeros).
WGMMA_SP_SHAPES = ((4096, 4096, 16), (100, 208, 24), (192, 4096, 48), (11008, 640, 16), (200, 1008, 144),
                   (320, 4096, 128))


@pytest.mark.parametrize("config", HOPPER_CONFIGS + SPARSE_MMA_CONFIGS + WGMMA_SP_CONFIGS, ids=config_id)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL_24)
def test_semi24_gluon_kernels(device_gen, dtype, tol, config):
    """The Gluon 2:4 kernels (Hopper rebuild, sparse MMA, sparse warpgroup MMA): ragged shapes,
    splits, bias, Y^T."""
    from stuning.kernels.split_k import split_k_workspace

    kernel = semi24_kernel.GLUON_KERNELS[config.kernel]
    if torch.cuda.get_device_capability() != (9, 0) or not kernel.available():
        pytest.skip(f"the {config.kernel} 2:4 kernel needs an sm_90 GPU and Triton's Gluon")
    for m, k, n in WGMMA_SP_SHAPES if config.kernel == "wgmma_sp" else HOPPER_SHAPES:
        dense = random_24(m, k, dtype, device_gen)
        w = Semi24Matrix.from_dense(dense, pad=True)
        x = randn(k, n, dtype=dtype, gen=device_gen)
        assert kernel.takes(w.values, x)
        bias = randn(m, dtype=dtype, gen=device_gen)
        ref = semi24_ref(dense, x)
        assert_close(stuning.semi24_mm(w, x, config=config), ref, tol, f"{m}x{k}x{n} {config}")
        out_t = torch.empty((n, m), dtype=dtype, device=x.device)
        y = stuning.semi24_mm(w, x, config=config, out=out_t.t(), bias=bias)
        assert_close(y, ref + bias.double()[:, None], tol, f"{m}x{k}x{n} {config}, bias, Y^T")
        if config.kernel == "wgmma_sp":
            # X as a linear layer holds it, (N x K) row-major, read through a transposed view in place.
            x_view = x.t().contiguous().t()
            assert x_view.stride(1) != 1 and kernel.takes(w.values, x_view)
            y = stuning.semi24_mm(w, x_view, config=config, out=out_t.t(), bias=bias)
            assert_close(y, ref + bias.double()[:, None], tol, f"{m}x{k}x{n} {config}, X^T view, bias, Y^T")
        partial, counts = split_k_workspace(x.device, m * n, 1)
        assert not partial.any() and not counts.any(), "split-K left its workspace dirty"


@pytest.mark.parametrize("config", [SPARSE_MMA_CONFIGS[0], WGMMA_SP_CONFIGS[0]], ids=config_id)
def test_semi24_sparse_mma_launchers_need_the_metadata(device_gen, config):
    kernel = semi24_kernel.GLUON_KERNELS[config.kernel]
    if torch.cuda.get_device_capability() != (9, 0) or not kernel.available():
        pytest.skip(f"the {config.kernel} 2:4 kernel needs an sm_90 GPU and Triton's Gluon")
    w = Semi24Matrix.from_dense(random_24(64, 128, torch.float16, device_gen))
    x = randn(128, 16, dtype=torch.float16, gen=device_gen)
    name = "mma_metadata" if config.kernel == "sparse_mma" else "wgmma_metadata"
    with pytest.raises(ValueError, match=f"needs the matrix's {name}"):
        semi24_kernel.semi24_mm(w.values, w.masks, x, k=128, config=config)
    with pytest.raises(ValueError, match=f"{name} must be a contiguous int32"):
        semi24_kernel.semi24_mm(w.values, w.masks, x, k=128, config=config, mma_metadata=w.masks)


# The Triton 2:4 kernel's split-K configs the H200 database picks for the Llama-7B and BERT layers,
# writing Y^T as SparseLinear does. The split that finished a tile zeroed the workspace in another
# thread layout than it read it in: until a barrier went between them, it lost whole splits' sums at
# random here (relative errors 3e-2 to 1.3e-1), while every contiguous-Y test passed.
SPLIT_K_YT_CASES = [
    ((4096, 11008, 16), semi24_kernel.Semi24Config(64, 16, 64, 8, 8, 4, 3)),
    ((11008, 4096, 128), semi24_kernel.Semi24Config(64, 128, 64, 8, 2, 4, 3)),
    ((4096, 11008, 128), semi24_kernel.Semi24Config(64, 128, 64, 8, 4, 4, 4)),
    ((3072, 768, 128), semi24_kernel.Semi24Config(32, 128, 64, 8, 4, 4, 3)),
]


@pytest.mark.parametrize("shape,config", SPLIT_K_YT_CASES, ids=lambda v: "x".join(map(str, v))
                         if isinstance(v, tuple) else config_id(v))
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL_24)
def test_semi24_split_k_writing_y_transposed(device_gen, dtype, tol, shape, config):
    from stuning.kernels.split_k import split_k_workspace

    m, k, n = shape
    dense = random_24(m, k, dtype, device_gen)
    w = Semi24Matrix.from_dense(dense)
    x = randn(k, n, dtype=dtype, gen=device_gen)
    bias = randn(m, dtype=dtype, gen=device_gen)
    ref = semi24_ref(dense, x) + bias.double()[:, None]
    for call in range(3):  # the race struck some calls and not others
        out_t = torch.full((n, m), float("nan"), dtype=dtype, device=x.device)
        y = stuning.semi24_mm(w, x, config=config, out=out_t.t(), bias=bias)
        assert_close(y, ref, tol, f"{m}x{k}x{n} {config}, Y^T, call {call + 1}")
    partial, counts = split_k_workspace(x.device, m * n, 1)
    assert not partial.any() and not counts.any(), "split-K left its workspace dirty"


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL_24)
def test_semi24_pruned_odd_shape(device_gen, dtype, tol):
    w_dense = randn(3000, 4094, dtype=dtype, gen=device_gen)
    w = Semi24Matrix.from_dense(w_dense, prune=True, pad=True)
    x = randn(4094, 100, dtype=dtype, gen=device_gen)
    for cfg in (None, semi24_kernel.Semi24Config(64, 64, 128, 8, 4, 4, 3)):
        assert_close(stuning.semi24_mm(w, x, config=cfg), semi24_ref(w.to_dense(), x), tol, str(cfg))


# --------------------------------------------------------------------------------- recompiles
def variant_counter(kernel):
    """Empty a ``@triton.jit`` function's in-memory compile cache and return a function counting the
    binaries it holds from then on (over every device). Recompiling is cheap: Triton's disk cache."""
    caches = getattr(kernel, "device_caches", None)
    if caches is None:
        pytest.skip("the kernel is not a compiled JITFunction (TRITON_INTERPRET is on?)")
    for entry in caches.values():
        entry[0].clear()  # (kernel_cache, kernel_key_cache, target, backend, binder)
    return lambda: sum(len(entry[0]) for entry in caches.values())


# Sizes are chosen so that the strides keep their divisibility by 16 (Triton specializes strides on
# it): then only the sizes change between launches, which SpMM and SDDMM do not specialize on.


def test_spmm_no_recompile_on_size_change(device_gen):
    cfg = spmm_kernel.SpMMConfig(rows=2, nnz_step=16, block_n=64, vec=4, swizzle=True, num_warps=2, num_stages=1)

    def launch(m, k, n, dtype):
        dense = random_sparse(m, k, 0.05, dtype, device_gen)
        b = randn(k, n, dtype=dtype, gen=device_gen)
        y = stuning.spmm(CSRMatrix.from_dense(dense), b, config=cfg)
        assert_close(y, spmm_ref(dense, b), TOL[dtype])

    variants = variant_counter(spmm_kernel._spmm_kernel)
    launch(3000, 2048, 256, torch.float16)
    assert variants() == 1
    launch(1000, 1024, 128, torch.float16)
    launch(517, 4096, 1024, torch.float16)
    assert variants() == 1, "spmm compiled again when only M, K or N changed"
    launch(1000, 1024, 128, torch.bfloat16)  # a new dtype is a new variant: the count sees it
    assert variants() == 2


def test_spmm_sell_recompiles_only_per_divisibility_class_of_n(device_gen, monkeypatch):
    # M and K are not kernel arguments at all. N is specialized on purpose (the N-tail mask is along
    # the contiguous axis, and vector loads need N's divisibility): a new N compiles again only when
    # it leaves its class (multiple of 16 or not, filling its tiles or not). Slices of one capacity
    # and of their own lengths are two forms; the capacity's value compiles nothing.
    monkeypatch.setattr(capacity_format, "FIXED_CAPACITY_SLACK", float("inf"))
    cfg = spmm_kernel.SpMMConfig(rows=8, nnz_step=16, block_n=64, vec=4, swizzle=True, num_warps=4, num_stages=1,
                                 kernel="sell")

    def launch(m, k, n, dtype):
        dense = random_sparse(m, k, 0.05, dtype, device_gen)
        b = randn(k, n, dtype=dtype, gen=device_gen)
        y = stuning.spmm(CSRMatrix.from_dense(dense), b, config=cfg)
        assert_close(y, spmm_ref(dense, b), TOL[dtype])

    variants = variant_counter(sell_kernel._spmm_sell_kernel)
    launch(3000, 2048, 256, torch.float16)
    assert variants() == 1
    launch(1000, 1024, 128, torch.float16)
    launch(517, 4096, 1024, torch.float16)
    assert variants() == 1, "spmm_sell compiled again when only M, K or N (within its class) changed"
    launch(1000, 1024, 100, torch.float16)  # N not a multiple of 16 nor of BLOCK_N: a new class
    assert variants() == 2
    launch(333, 2048, 36, torch.float16)  # the same class as 100
    assert variants() == 2, "spmm_sell compiled again for an N of the same divisibility class"
    launch(1000, 1024, 128, torch.bfloat16)
    assert variants() == 3
    monkeypatch.setattr(capacity_format, "FIXED_CAPACITY_SLACK", 0.0)
    launch(1000, 1024, 128, torch.bfloat16)
    assert variants() == 4, "slices of their own lengths are the other form"


@pytest.mark.parametrize(
    "cfg, kernel",
    [
        (sddmm_kernel.SDDMMConfig(nnz_block=64, block_k=32, vec=8, num_warps=4, num_stages=1),
         sddmm_kernel._sddmm_kernel),
        # The tiling is a template parameter; the sizes, nnz and the number of tiles are not.
        (sddmm_kernel.SDDMMConfig(kernel="tiled", block_m=64, block_n=64, block_k=32, chunk=64, num_warps=4),
         sddmm_tiled._sddmm_tiled_kernel),
        (sddmm_kernel.dense_config(8), sddmm_dense._sddmm_sample_rows_kernel),
    ],
    ids=["gather", "tiled", "dense-by-rows"],
)
def test_sddmm_no_recompile_on_size_change(device_gen, cfg, kernel):
    def launch(m, n, k, dtype):
        mask_dense = random_sparse(m, n, 0.05, dtype, device_gen)
        a = randn(m, k, dtype=dtype, gen=device_gen)
        b = randn(k, n, dtype=dtype, gen=device_gen)
        mask = CSRMatrix.from_dense(mask_dense)
        out = stuning.sddmm(mask, a, b, config=cfg)
        ref = sddmm_ref(mask_dense, a, b)
        assert_close(out.values, ref[mask.row_ids().long(), mask.col.long()], TOL[dtype])

    variants = variant_counter(kernel)
    launch(1024, 1024, 64, torch.float16)
    assert variants() == 1
    launch(2048, 512, 128, torch.float16)
    launch(320, 4096, 96, torch.float16)
    assert variants() == 1, f"{cfg.kernel} sddmm compiled again when only M, N, K, nnz or the tiles changed"
    # The tiled kernel has one other form, for M not a whole number of tiles (EVEN_M: unmasked
    # along M, a transposed A loads in 16-byte pieces); the others take any M as it comes.
    tiled = cfg.kernel == "tiled"
    launch(333, 4096, 96, torch.float16)
    launch(2000, 4096, 96, torch.float16)
    assert variants() == 1 + tiled
    launch(333, 4096, 96, torch.float32)
    assert variants() == 2 + tiled


def test_semi24_recompiles_per_divisibility_class_only(device_gen):
    # The 2:4 kernel lets Triton specialize M, N and K (whether each is a multiple of 16): unspecialized
    # bounds masked the contiguous axis and stopped vector loads (2.5-5x, BENCHMARKS section 7). So a
    # new size compiles again only when its class changes, and then once.
    cfg = semi24_kernel.Semi24Config(64, 64, 128, 8, 1, 4, 3)

    def launch(m, k, n, config=cfg):
        dense = random_24(m, k, torch.float16, device_gen)
        x = randn(k, n, dtype=torch.float16, gen=device_gen)
        y = stuning.semi24_mm(Semi24Matrix.from_dense(dense), x, config=config)
        assert_close(y, semi24_ref(dense, x), TOL[torch.float16])

    variants = variant_counter(semi24_kernel._semi24_kernel)
    launch(4096, 4096, 128)
    assert variants() == 1
    launch(2048, 2048, 256)
    launch(1024, 8192, 64)
    assert variants() == 1, "semi24 compiled again when M, K or N changed within their class"
    launch(1000, 4096, 100)  # M and N no longer multiples of 16: one new variant
    assert variants() == 2
    launch(520, 2048, 36)
    assert variants() == 2, "semi24 compiled again for a size of a class it had compiled"
    launch(1024, 8192, 64, dataclasses.replace(cfg, split_k=2))  # SPLIT_K is a template parameter
    assert variants() == 3


# ------------------------------------------------------------------- fused epilogue (Y^T, bias)
def epilogue_params():
    params = []
    for n in (16, 37):
        problem = spmm_kernel.SpMMProblem(3001, 4096, n, round(0.05 * 3001 * 4096), torch.float16)
        sell = sample_configs(sell_kernel.config_space(problem), 1, seed=300 + n)[0]
        params += [pytest.param("csr", n, spmm_kernel.heuristic(problem), id=f"csr-n{n}"),
                   pytest.param("sell", n, sell, id=f"sell-n{n}")]
        s24 = semi24_kernel.heuristic(semi24_kernel.Semi24Problem(3001, 4096, n, torch.float16))
        params.append(pytest.param("2:4", n, s24, id=f"semi24-n{n}"))
        # Splits that do not divide K's 32 or 64 steps evenly (3, 6) as well as one that does.
        params += [pytest.param("2:4", n, dataclasses.replace(s24, split_k=split), id=f"semi24-split{split}-n{n}")
                   for split in (3, 4, 6)]
    return params


@pytest.mark.parametrize("fmt,n,config", epilogue_params())
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL_24)
def test_epilogue_writes_y_transposed_with_bias(device_gen, dtype, tol, fmt, n, config):
    """What SparseLinear runs: Y (N x M) written through the transposed view, the bias fused."""
    m, k = 3001, 4096
    dense = random_24(m, k, dtype, device_gen) if fmt == "2:4" else random_sparse(m, k, 0.05, dtype, device_gen)
    x = randn(k, n, dtype=dtype, gen=device_gen)
    bias = randn(m, dtype=dtype, gen=device_gen)
    y = torch.full((n, m), float("nan"), dtype=dtype, device=x.device)
    if fmt == "2:4":
        stuning.semi24_mm(Semi24Matrix.from_dense(dense), x, config=config, out=y.t(), bias=bias)
    else:
        stuning.spmm(CSRMatrix.from_dense(dense), x, config=config, out=y.t(), bias=bias)
    ref = dense.double() @ x.double() + bias.double()[:, None]
    assert_close(y.t(), ref, tol, f"{fmt} n={n} {config} into Y^T with bias")
