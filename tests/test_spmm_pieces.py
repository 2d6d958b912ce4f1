"""N tiles cut into pieces (``SpMMConfig.pieces``) in both gather SpMM kernels: the same sums in
another thread layout, so every pieced config must match the float64 reference and its one-piece twin."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from naive import ALL_DTYPES, assert_close, dtype_tol_params, randn, skewed_sparse, spmm_ref
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_sell
from stuning.kernels.spmm import PIECES_MIN_N, SpMMConfig, SpMMProblem

import stuning
from stuning import CSRMatrix

M, K, MEAN_LEN = 37, 45, 9  # odd M: ragged last programs and slices
PIECED = [
    SpMMConfig(rows=4, nnz_step=8, block_n=32, vec=4, swizzle=True, num_warps=1, pieces=2),
    SpMMConfig(rows=2, nnz_step=8, block_n=64, vec=4, num_warps=2, pieces=4),
    SpMMConfig(rows=8, nnz_step=8, block_n=32, vec=2, swizzle=True, num_warps=2, kernel="sell", pieces=4),
    SpMMConfig(rows=4, nnz_step=16, block_n=64, vec=4, num_warps=2, kernel="sell", pieces=2),
]


def config_id(c: SpMMConfig) -> str:
    return f"{c.kernel}-{c.rows}x{c.nnz_step}x{c.block_n}-v{c.vec}-p{c.pieces}"


@pytest.mark.parametrize("n", [40, 64, 100])  # 40 and 100 end inside a piece; 64 fills the tiles
@pytest.mark.parametrize("config", PIECED, ids=config_id)
@pytest.mark.parametrize("dtype,tol", dtype_tol_params(ALL_DTYPES))
def test_pieced_configs_match_the_reference_and_one_piece(gen, device, dtype, tol, config, n):
    dense = skewed_sparse(M, K, MEAN_LEN, dtype, gen, cv=0.5, empty_rows=3).to(device)
    b = randn(K, n, dtype=dtype, gen=gen).to(device)
    bias = randn(M, dtype=dtype, gen=gen).to(device)
    a = CSRMatrix.from_dense(dense, pad_to=4)
    y = stuning.spmm(a, b, config=config, bias=bias)
    ref = spmm_ref(dense, b) + bias.double()[:, None]
    assert_close(y, ref, tol, f"pieced {config}")
    one = stuning.spmm(a, b, config=dataclasses.replace(config, pieces=1), bias=bias)
    assert_close(y, one.double(), tol, f"pieced {config} against its one-piece twin")


def test_pieced_configs_write_y_transposed(gen, device):
    # Y^T through a transposed view (the Linear layers' layout): pieces address Y by its strides.
    dense = skewed_sparse(M, K, MEAN_LEN, torch.float32, gen, cv=0.5, empty_rows=3).to(device)
    b = randn(K, 72, dtype=torch.float32, gen=gen).to(device)
    out = torch.full((72, M), float("nan"), device=device).t()
    for config in PIECED:
        y = stuning.spmm(CSRMatrix.from_dense(dense, pad_to=4), b, config=config, out=out)
        assert_close(y, spmm_ref(dense, b), 1e-5, f"pieced {config}, Y transposed")


@pytest.mark.parametrize("n", [16, 32, PIECES_MIN_N, 128, 2048])
def test_pieces_enter_the_space_from_pieces_min_n(n):
    problem = SpMMProblem(512, 512, n, 512 * 20, torch.float16)
    for space in (spmm_kernel.config_space(problem), spmm_sell.config_space(problem)):
        pieces = {c.pieces for c in space}
        assert pieces == ({1, 2, 4} if n >= PIECES_MIN_N else {1})
        # Every pieced config has its one-piece twin in the space, and no tile grows by pieces.
        assert all(dataclasses.replace(c, pieces=1) in space for c in space)
        assert all(c.vec * c.pieces <= c.block_n for c in space)


def test_repair_drops_pieces_below_pieces_min_n_and_keeps_them_valid():
    tuned = SpMMConfig(rows=2, nnz_step=8, block_n=128, vec=4, num_warps=2, kernel="sell", pieces=4)
    assert spmm_kernel.repair(tuned, SpMMProblem(4096, 4096, 16, 10**6, torch.float32)).pieces == 1
    assert spmm_kernel.repair(tuned, SpMMProblem(4096, 4096, 2048, 10**6, torch.float32)).pieces == 4
    # N = 66 allows only 2-wide vectors and a 128-wide tile: 4 pieces still fit; N = 96 keeps vec 4.
    assert spmm_kernel.repair(tuned, SpMMProblem(64, 64, 66, 500, torch.float32)).pieces == 4
    wide = dataclasses.replace(tuned, vec=8, block_n=32, pieces=4)
    assert spmm_kernel.repair(wide, SpMMProblem(64, 64, 64, 500, torch.float16)) == wide


@pytest.mark.parametrize("pieces,block_n,vec", [(3, 48, 4), (0, 32, 4), (4, 32, 16), (8, 16, 4)])
def test_error_pieces_that_do_not_cut_the_tile(pieces, block_n, vec):
    with pytest.raises(ValueError, match="pieces"):
        SpMMConfig(block_n=block_n, vec=vec, pieces=pieces)
