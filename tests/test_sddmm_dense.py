"""The dense SDDMM kernel (cuBLAS's product, then the nonzeros sampled) through Triton's interpreter
(or the GPU), against a float64 reference; and where its config space holds it."""

from __future__ import annotations

import pytest
import torch
from naive import ALL_DTYPES, TOL, assert_close, dtype_tol_params, randn, random_sparse, sddmm_ref, skewed_sparse
from stuning.kernels import sddmm as sddmm_kernel
from stuning.kernels import sddmm_dense
from stuning.kernels.sddmm import SDDMMConfig, SDDMMProblem

import stuning
from stuning import CSRMatrix

DTYPE_TOL = dtype_tol_params(ALL_DTYPES)
DENSE = sddmm_kernel.dense_config()


def sampled(mask: CSRMatrix, ref_dense: torch.Tensor) -> torch.Tensor:
    return ref_dense.cpu()[mask.row_ids().long().cpu(), mask.col.long().cpu()]


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.75, 1.5), (-2.0, -0.5), (0.0, 1.0)])
@pytest.mark.parametrize("shape", [(37, 29, 40), (1, 13, 7), (70, 50, 33), (3, 5, 130)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("rows", [0, 8], ids=["flat", "by_rows"])
def test_dense_kernel_matches_the_reference(gen, device, dtype, tol, alpha, beta, shape, rows):
    m, n, k = shape
    mask_dense = skewed_sparse(m, n, max(1.0, 0.3 * n), dtype, gen, empty_rows=min(3, m - 1))
    a, b = randn(m, k, dtype=dtype, gen=gen), randn(k, n, dtype=dtype, gen=gen)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=alpha, beta=beta,
                        config=sddmm_kernel.dense_config(rows))
    assert torch.equal(out.crow, mask.crow) and torch.equal(out.col, mask.col)
    assert_close(out.values.cpu(), sampled(mask, sddmm_ref(mask_dense, a, b, alpha, beta)), tol, f"{shape}")


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_dense_kernel_walks_rows_far_longer_than_a_step(gen, device, dtype, tol):
    """The pass by rows sizes its step to the mean row: one full row among nearly empty ones takes
    many steps, and the rows sharing its program take none past their own ends."""
    m, n, k = 40, 300, 24
    mask_dense = random_sparse(m, n, 0.01, dtype, gen)
    mask_dense[5] = randn(n, dtype=dtype, gen=gen)
    mask_dense[6] = 0
    a, b = randn(m, k, dtype=dtype, gen=gen), randn(k, n, dtype=dtype, gen=gen)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    rows = sddmm_dense.rows_per_program(mask.nnz, m)
    assert sddmm_dense.NNZ_BLOCK // rows < n // 4 and rows < m
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=0.75, beta=1.5, config=sddmm_kernel.dense_config(rows))
    assert_close(out.values.cpu(), sampled(mask, sddmm_ref(mask_dense, a, b, 0.75, 1.5)), tol)


def test_rows_per_program_fill_the_block_with_steps_most_rows_take_once():
    assert sddmm_dense.rows_per_program(4096 * 82, 4096, 1024) == 8  # 98% of 4096: steps of 128
    assert sddmm_dense.rows_per_program(768 * 61, 768, 1024) == 8  # 61 a row: 64 would split most rows
    assert sddmm_dense.rows_per_program(4096 * 3302, 4096, 1024) == 1  # longer than a block
    assert sddmm_dense.rows_per_program(10, 4096, 1024) == 64  # nearly empty: steps of 16
    assert sddmm_dense.rows_per_program(0, 0, 1024) == 64


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_dense_kernel_on_transposed_views_and_nan_mask_values(gen, device, dtype, tol):
    """B as K^T (attention's Q @ K^T) and A as dY^T (a weight gradient) are views; with beta = 0 the
    mask's values are not read, NaN or not."""
    m, n, k = 45, 38, 24
    mask_dense = random_sparse(m, n, 0.2, dtype, gen)
    at, bt = randn(k, m, dtype=dtype, gen=gen), randn(n, k, dtype=dtype, gen=gen)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    poisoned = CSRMatrix(mask.crow, mask.col, torch.full_like(mask.values, float("nan")), mask.shape)
    out = stuning.sddmm(poisoned, at.to(device).t(), bt.to(device).t(), alpha=0.5, config=DENSE)
    assert_close(out.values.cpu(), sampled(mask, sddmm_ref(mask_dense, at.t(), bt.t(), 0.5)), tol)


def test_dense_kernel_writes_every_value_of_out(gen, device):
    mask_dense = random_sparse(33, 27, 0.3, torch.float16, gen)
    a, b = randn(33, 16, dtype=torch.float16, gen=gen), randn(16, 27, dtype=torch.float16, gen=gen)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = torch.full((mask.nnz,), float("nan"), dtype=torch.float16, device=device)
    by_rows = sddmm_kernel.dense_config(4)
    for config in (DENSE, by_rows):
        out.fill_(float("nan"))
        got = sddmm_kernel.sddmm(mask.row_ids(), mask.col, mask.values, a.to(device), b.to(device), alpha=1.0,
                                 beta=0.0, config=config, crow=mask.crow, out=out)
        assert got is out
        assert_close(out.cpu(), sampled(mask, sddmm_ref(mask_dense, a, b)), TOL[torch.float16], f"{config}")
    with pytest.raises(ValueError, match="pass by rows needs the mask's row starts"):
        sddmm_kernel.sddmm(mask.row_ids(), mask.col, mask.values, a.to(device), b.to(device), alpha=1.0,
                           beta=0.0, config=by_rows)


def test_the_space_holds_the_dense_kernel_only_where_its_scratch_product_fits():
    small = SDDMMProblem(4096, 4096, 64, 4096 * 205, torch.float16)
    side = int((sddmm_dense.SCRATCH_MAX_BYTES // 2) ** 0.5) + 1  # an fp16 product just over the limit
    large = SDDMMProblem(side, side, 64, side * 20, torch.float16)
    by_rows = sddmm_kernel.dense_config(sddmm_dense.rows_per_program(small.nnz, small.m))
    assert [c for c in sddmm_kernel.config_space(small) if c.kernel == "dense"] == [DENSE, by_rows]
    assert not [c for c in sddmm_kernel.config_space(large) if c.kernel == "dense"]
    # A dense entry keeps its pass (rows a program sized to the problem); looked up for a problem
    # too large for it, it falls back to the heuristic.
    assert sddmm_kernel.repair(DENSE, small) == DENSE
    assert sddmm_kernel.repair(sddmm_kernel.dense_config(64), small) == by_rows
    assert sddmm_kernel.repair(DENSE, large) == sddmm_kernel.heuristic(large)


def test_dense_config_holds_only_what_it_uses():
    cfg = SDDMMConfig(kernel="dense", nnz_block=512, block_k=64, vec=8, num_stages=3, block_m=64, chunk=32)
    assert (cfg.nnz_block, cfg.num_warps, cfg.block_m) == (512, 4, 64)
    assert cfg.block_k == cfg.vec == cfg.num_stages == cfg.block_n == cfg.chunk == cfg.tiles_per_program == 0
    assert SDDMMConfig(**cfg.as_dict()) == cfg
    for rows in (1024, 3, -2):
        with pytest.raises(ValueError, match="rows a program"):
            SDDMMConfig(kernel="dense", nnz_block=512, block_m=rows)


def test_cost_model_charges_the_dense_kernel_the_whole_product():
    """Its product's work grows with K and does not fall with sparsity (it computes every output);
    only the sampling pass grows with the nonzeros."""
    from stuning.tuning.device import spec_for
    from stuning.tuning.features import ProblemFeatures
    from stuning.tuning.registry import family

    device = spec_for("nvidia-h200")

    def predicted(k, density):
        f = ProblemFeatures("sddmm", "float16", {"m": 4096, "n": 4096, "k": k, "nnz": round(density * 4096**2),
                                                   "density": density, "row_cv": 0.0})
        return family("sddmm").terms(f, DENSE, device)

    assert predicted(2048, 0.05).bound_us > 4 * predicted(256, 0.05).bound_us
    assert predicted(256, 0.02).compute_us == predicted(256, 0.3).compute_us
    assert predicted(256, 0.02).mem_us < predicted(256, 0.3).mem_us


def test_cost_model_weighs_the_row_pass_bytes_against_its_extra_wait():
    """By rows the pass reads no row index a nonzero (less traffic, which tells on many nonzeros)
    and waits on one load more (a fixed cost, which tells on few)."""
    from stuning.tuning.device import spec_for
    from stuning.tuning.features import ProblemFeatures
    from stuning.tuning.registry import family

    device = spec_for("nvidia-h200")
    f = ProblemFeatures("sddmm", "float16", {"m": 4096, "n": 4096, "k": 2048, "nnz": round(0.3 * 4096**2),
                                               "density": 0.3, "row_cv": 0.0})
    flat, by_rows = (family("sddmm").terms(f, cfg, device) for cfg in (DENSE, sddmm_kernel.dense_config(8)))
    assert by_rows.mem_us < flat.mem_us and by_rows.overhead_us > flat.overhead_us
