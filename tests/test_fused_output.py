"""The kernels' epilogue: ``out`` of any strides (Y^T written through a transposed view) and the bias
added in the kernel, for the CSR, sliced-ELL and 2:4 kernels, against a float64 reference."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from naive import ALL_DTYPES, HALF_DTYPES, assert_close, dtype_tol_params, randn, random_24, random_sparse
from stuning.kernels.semi24 import Semi24Config
from stuning.kernels.spmm import SpMMConfig

import stuning
from stuning import CSRMatrix, Semi24Matrix

CSR = SpMMConfig(rows=4, nnz_step=8, block_n=16, vec=1, swizzle=True, num_warps=1, num_stages=1)
CSR_PREFETCH = dataclasses.replace(CSR, swizzle=False, prefetch=True)
SELL = dataclasses.replace(CSR, kernel="sell")
SEMI24 = Semi24Config(block_m=16, block_n=16, block_k=64, group_m=1, split_k=1, num_warps=2, num_stages=2)


def reference(dense: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    y = dense.double() @ x.double()
    return y if bias is None else y + bias.double()[:, None]


def transposed_out(m: int, n: int, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """An N x M tensor full of NaN and its M x N transposed view (what the kernel writes through)."""
    y = torch.full((n, m), float("nan"), dtype=dtype, device=device)
    return y, y.t()


@pytest.mark.parametrize("config", [CSR, CSR_PREFETCH, SELL], ids=["csr", "csr-prefetch", "sell"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("shape", [(37, 45, 17), (9, 130, 3), (1, 7, 1)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype,tol", dtype_tol_params(ALL_DTYPES))
def test_spmm_writes_y_transposed_with_bias(gen, device, dtype, tol, shape, with_bias, config):
    m, k, n = shape
    dense = random_sparse(m, k, 0.7, dtype=dtype, gen=gen)
    x = randn(k, n, dtype=dtype, gen=gen)
    bias = randn(m, dtype=dtype, gen=gen) if with_bias else None
    y, view = transposed_out(m, n, dtype, device)
    got = stuning.spmm(CSRMatrix.from_dense(dense.to(device)), x.to(device), config=config, out=view,
                       bias=None if bias is None else bias.to(device))
    assert got.data_ptr() == y.data_ptr() and got.stride() == view.stride()
    assert_close(y.t(), reference(dense, x, bias), tol, f"spmm {config.kernel} into Y^T")


@pytest.mark.parametrize("split_k", [1, 3], ids=["split1", "split3"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("shape", [(40, 264, 24), (17, 192, 5)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype,tol", dtype_tol_params(HALF_DTYPES))
def test_semi24_writes_y_transposed_with_bias(gen, device, dtype, tol, shape, with_bias, split_k):
    m, k, n = shape
    dense = random_24(m, k, dtype, gen)
    x = randn(k, n, dtype=dtype, gen=gen)
    bias = randn(m, dtype=dtype, gen=gen) if with_bias else None
    y, view = transposed_out(m, n, dtype, device)
    config = dataclasses.replace(SEMI24, split_k=split_k)
    got = stuning.semi24_mm(Semi24Matrix.from_dense(dense.to(device)), x.to(device), config=config, out=view,
                            bias=None if bias is None else bias.to(device))
    assert got.data_ptr() == y.data_ptr()
    assert_close(y.t(), reference(dense, x, bias), tol, f"semi24 split_k={split_k} into Y^T")


def test_a_matrix_without_nonzeros_gives_the_bias(gen, device):
    bias = randn(6, dtype=torch.float32, gen=gen).to(device)
    x = randn(5, 3, dtype=torch.float32, gen=gen).to(device)
    y, view = transposed_out(6, 3, torch.float32, device)
    stuning.spmm(CSRMatrix.from_dense(torch.zeros(6, 5, device=device)), x, config=CSR, out=view, bias=bias)
    assert torch.equal(y, bias.expand(3, 6))


@pytest.mark.parametrize(
    "bias,match",
    [
        (torch.zeros(5), r"bias must have shape \(6,\)"),
        (torch.zeros(6, 1), r"bias must have shape \(6,\)"),
        (torch.zeros(6, dtype=torch.float64), "bias is torch.float64"),
        (torch.zeros(12)[::2], "bias must be contiguous"),
    ],
    ids=["short", "2d", "dtype", "strided"],
)
def test_bad_bias_is_refused_by_name(device, bias, match):
    a = CSRMatrix.from_dense(torch.eye(6, 5, device=device))
    with pytest.raises((ValueError, TypeError), match=match):
        stuning.spmm(a, torch.ones(5, 3, device=device), config=CSR, bias=bias.to(device))


def test_overlapping_out_is_refused(device):
    a = CSRMatrix.from_dense(torch.eye(6, 5, device=device))
    out = torch.zeros(6, 1, device=device).expand(6, 3)
    with pytest.raises(ValueError, match="zero stride"):
        stuning.spmm(a, torch.ones(5, 3, device=device), config=CSR, out=out)
