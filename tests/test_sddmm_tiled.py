"""The tiled SDDMM kernel against float64 through the interpreter on small odd shapes, the union
config space, dispatch and the cost model's choice (its mask preprocessing:
test_sddmm_output_tiles.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from naive import (
    ALL_DTYPES,
    TOL,
    assert_close,
    config_id,
    dtype_tol_params,
    randn,
    random_sparse,
    sample_configs,
    sddmm_ref,
)
from stuning.kernels import sddmm as sddmm_kernel
from stuning.kernels import sddmm_tiled
from stuning.kernels.sddmm import SDDMMConfig, SDDMMProblem

import stuning
from stuning import CSRMatrix
from stuning.formats import output_tiles
from stuning.suite import SDDMMCase
from stuning.tuning.cost_model import CostModel
from stuning.tuning.cost_model import sddmm as sddmm_cost
from stuning.tuning.cost_model.base import LAUNCH_US
from stuning.tuning.cost_model.sddmm import nonempty_tiles
from stuning.tuning.device import spec_for
from stuning.tuning.features import sddmm_features, synthetic_sddmm_features, tile_feature
from stuning.tuning.problems import build_problem
from stuning.tuning.registry import budget_of, family

DTYPES = ALL_DTYPES
DTYPE_TOL = dtype_tol_params(DTYPES)


def tiled(bm=32, bn=32, bk=16, chunk=32, warps=4, stages=2, run=1) -> SDDMMConfig:
    return SDDMMConfig(kernel="tiled", block_m=bm, block_n=bn, block_k=bk, chunk=chunk, num_warps=warps,
                       num_stages=stages, tiles_per_program=run)


def mask_of(dense: torch.Tensor, device) -> CSRMatrix:
    return CSRMatrix.from_dense(dense.to(device))


def values_ref(mask: CSRMatrix, ref_dense: torch.Tensor) -> torch.Tensor:
    return ref_dense.cpu()[mask.row_ids().long().cpu(), mask.col.long().cpu()]


# ------------------------------------------------------------------------------------ kernel
PROBLEM = SDDMMProblem(37, 45, 70, 400, torch.float32)
TILED_SPACE = [c for c in sddmm_kernel.config_space(PROBLEM) if c.kernel == "tiled"]
CONFIGS = [pytest.param(c, id=config_id(c)) for c in sample_configs(TILED_SPACE, 3, seed=5)] + [
    pytest.param(sddmm_kernel.tiled_heuristic(PROBLEM), id="tiled-heuristic")
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("k", [16, 24, 70])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_tiled_kernel_odd_shapes(gen, device, dtype, tol, k, config):
    m, n = 37, 45
    dense = random_sparse(m, n, 0.3, dtype, gen)
    dense[3] = 0
    a, b = randn(m, k, dtype=dtype, gen=gen), randn(k, n, dtype=dtype, gen=gen)
    mask = mask_of(dense, device)
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=0.75, beta=1.5, config=config)
    assert torch.equal(out.crow, mask.crow) and torch.equal(out.col, mask.col)
    assert any(key[0] == "output_tiles" for key in mask.cache), "the tiled kernel did not run"
    assert_close(out.values.cpu(), values_ref(mask, sddmm_ref(dense, a, b, 0.75, 1.5)), tol, str(config))


# Runs of tiles per program with A's band resident (one K step): chunks shorter than a tile's
# entries, ragged M and N, empty rows and tiles, a run longer than some bands.
RUN_CONFIGS = [tiled(32, 32, 32, 16, run=4), tiled(32, 64, 32, 128, run=16), tiled(64, 32, 64, 32, 8, run=2)]


@pytest.mark.parametrize("config", [pytest.param(c, id=config_id(c)) for c in RUN_CONFIGS])
@pytest.mark.parametrize("k", [16, 24])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_tiled_runs_of_tiles(gen, device, dtype, tol, k, config):
    m, n = 75, 163
    dense = random_sparse(m, n, 0.25, dtype, gen)
    dense[5] = 0
    dense[:, 64:96] = 0  # a column of empty tiles inside every band
    a, b = randn(m, k, dtype=dtype, gen=gen), randn(n, k, dtype=dtype, gen=gen).t()
    mask = mask_of(dense, device)
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=1.25, beta=-0.5, config=config)
    assert_close(out.values.cpu(), values_ref(mask, sddmm_ref(dense, a, b, 1.25, -0.5)), tol, str(config))


def test_tiled_runs_need_a_power_of_two(gen, device):
    mask = mask_of(random_sparse(40, 40, 0.3, torch.float16, gen), device)
    a, b = randn(40, 16, dtype=torch.float16, gen=gen), randn(16, 40, dtype=torch.float16, gen=gen)
    with pytest.raises(ValueError, match="tiles_per_program must be a power of two"):
        stuning.sddmm(mask, a.to(device), b.to(device), config=tiled(run=3))


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-2.0, 0.5), (0.0, 1.0)])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_tiled_alpha_beta_and_transposed_b(gen, device, dtype, tol, alpha, beta):
    dense = random_sparse(50, 70, 0.2, dtype, gen)
    a = randn(50, 32, dtype=dtype, gen=gen)
    b = randn(70, 32, dtype=dtype, gen=gen).t()  # K-contiguous columns, as attention's K^T
    mask = mask_of(dense, device)
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=alpha, beta=beta, config=tiled(64, 32, 32, 64))
    assert_close(out.values.cpu(), values_ref(mask, sddmm_ref(dense, a, b, alpha, beta)), tol)
    if alpha == 0.0:
        assert torch.equal(out.values.cpu(), (beta * mask.values.cpu().double()).to(dtype))


def test_tiled_beta_zero_does_not_read_mask_values(gen, device):
    dense = random_sparse(40, 33, 0.3, torch.float16, gen)
    a, b = randn(40, 16, dtype=torch.float16, gen=gen), randn(16, 33, dtype=torch.float16, gen=gen)
    mask = mask_of(dense, device)
    poisoned = CSRMatrix(mask.crow, mask.col, torch.full_like(mask.values, float("nan")), mask.shape)
    out = stuning.sddmm(poisoned, a.to(device), b.to(device), config=tiled())
    assert bool(torch.isfinite(out.values.float()).all())
    assert_close(out.values.cpu(), values_ref(mask, sddmm_ref(dense, a, b)), TOL[torch.float16])


def test_tiled_explicit_zeros_one_tile_and_empty_mask(gen, device):
    # A stored zero is sampled; every nonzero in one tile; an empty mask launches nothing.
    crow = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    col = torch.tensor([1, 3, 0, 2, 3], dtype=torch.int32)
    vals = torch.tensor([0.0, 2.0, 0.0, 0.0, -1.0])
    mask = CSRMatrix(crow, col, vals, (3, 4)).to(device)
    a, b = randn(3, 16, dtype=torch.float32, gen=gen), randn(16, 4, dtype=torch.float32, gen=gen)
    out = stuning.sddmm(mask, a.to(device), b.to(device), beta=1.0, config=tiled())
    expect = torch.sparse.sampled_addmm(
        torch.sparse_csr_tensor(crow.long(), col.long(), vals.double(), (3, 4)), a.double(), b.double(), beta=1.0
    )
    assert_close(out.values.cpu(), expect.values(), TOL[torch.float32])
    empty = CSRMatrix.from_dense(torch.zeros(7, 9, device=device))
    out = stuning.sddmm(empty, torch.randn(7, 5, device=device), torch.randn(5, 9, device=device), config=tiled())
    assert out.nnz == 0


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_tiled_matches_gather(gen, device, dtype, tol):
    dense = random_sparse(64, 96, 0.15, dtype, gen)
    a, b = randn(64, 48, dtype=dtype, gen=gen).to(device), randn(48, 96, dtype=dtype, gen=gen).to(device)
    mask = mask_of(dense, device)
    gathered = stuning.sddmm(mask, a, b, alpha=0.5, config=SDDMMConfig(nnz_block=32, block_k=16, vec=8))
    tiled_out = stuning.sddmm(mask, a, b, alpha=0.5, config=tiled(64, 32, 16, 32))
    assert_close(tiled_out.values.cpu(), gathered.values.cpu().double(), 2 * tol)


# ----------------------------------------------------------------------------- config, dispatch
def test_union_space_has_both_kernels_and_valid_tiles():
    problem = SDDMMProblem(4096, 4096, 64, 800_000, torch.float16)
    space = sddmm_kernel.config_space(problem)
    kinds = {c.kernel for c in space}
    assert kinds == {"gather", "tiled", "dense"}
    assert len(space) == len(set(space)) and len(space) < 500
    for c in space:
        if c.kernel == "tiled":
            assert c.nnz_block == 0 and c.vec == 0
            assert min(c.block_m, c.block_n, c.block_k) >= 16, "every tl.dot dimension >= 16 on the GPU"
            assert c.block_m % 32 == 0 and c.block_n % 32 == 0, "the occupancy features cover the size"
            assert sddmm_tiled.shared_memory_bytes(c.tiled_params(), 2) <= 227 * 1024
            assert c.tiles_per_program == 1 or c.block_k >= problem.k, "runs only where A's band stays resident"
        else:  # the dense kernel's block_m is its sampling pass's rows a program (0: flat)
            assert c.block_n == c.chunk == c.tiles_per_program == 0
            assert c.block_m == 0 or c.kernel == "dense"
    assert {c.tiles_per_program for c in space if c.kernel == "tiled"} == {1, 4}
    for c in space:
        if c.tiles_per_program > 1:  # every SM gets a run
            assert -(-4096 // c.block_m) * -(-4096 // c.block_n) >= c.tiles_per_program * 132, c
    small = SDDMMProblem(512, 512, 64, 20_000, torch.float16)  # 256 tiles of 32 x 32 at most
    assert {c.tiles_per_program for c in sddmm_kernel.config_space(small) if c.kernel == "tiled"} == {1}
    deep = [c for c in sddmm_kernel.config_space(dataclasses.replace(problem, k=256)) if c.kernel == "tiled"]
    assert {c.tiles_per_program for c in deep} == {1}


def test_config_fields_and_old_entries():
    fam = family("sddmm")
    old = {"block_k": 32, "nnz_block": 64, "num_stages": 2, "num_warps": 4, "vec": 8}  # a pre-tiled DB entry
    cfg = fam.config_from_dict(old)
    assert cfg == SDDMMConfig(nnz_block=64, block_k=32, vec=8) and cfg.kernel == "gather"
    assert fam.config_from_dict(tiled(64, 64, 32, 64).as_dict()) == tiled(64, 64, 32, 64)
    # A tiled entry from before runs existed runs one tile per program.
    before_runs = {k: v for k, v in tiled(64, 64, 32, 64).as_dict().items() if k != "tiles_per_program"}
    assert fam.config_from_dict(before_runs).tiles_per_program == 1
    assert tiled(run=4).as_dict()["tiles_per_program"] == 4 and SDDMMConfig().tiles_per_program == 0
    # A field the kernel does not use is held at 0: configs equal when they run the same thing.
    assert SDDMMConfig(kernel="tiled", nnz_block=128, vec=4, block_m=32, block_n=32, chunk=32) == tiled(bk=32)
    assert SDDMMConfig(block_m=64, block_n=64, chunk=32) == SDDMMConfig()
    with pytest.raises(ValueError, match="kernel must be one of"):
        SDDMMConfig(kernel="blocked")
    with pytest.raises(ValueError, match="needs block_m, block_n, chunk and tiles_per_program"):
        SDDMMConfig(kernel="tiled")


def test_repair_lands_in_the_space():
    small = SDDMMProblem(20, 40, 16, 100, torch.float16)
    space = set(sddmm_kernel.config_space(small))
    for c in (tiled(128, 128, 128, 128, 8, 3), tiled(64, 128, 64, 32, 8, 2), tiled(32, 32, 16, 32, 4, 2)):
        assert sddmm_kernel.repair(c, small) in space, c
    run4 = tiled(64, 64, 64, 128, 4, 2, run=4)
    assert sddmm_kernel.repair(run4, small).tiles_per_program == 1  # too few tiles to fill the SMs
    big = SDDMMProblem(4096, 4096, 64, 800_000, torch.float16)
    assert sddmm_kernel.repair(run4, big) == run4
    deep = dataclasses.replace(big, k=300)  # K takes several steps: no runs
    assert sddmm_kernel.repair(run4, deep).tiles_per_program == 1


def test_dispatch_by_dict_and_the_launcher_needs_tiles(gen, device):
    dense = random_sparse(30, 40, 0.3, torch.float16, gen)
    a, b = randn(30, 16, dtype=torch.float16, gen=gen), randn(16, 40, dtype=torch.float16, gen=gen)
    mask = mask_of(dense, device)
    out = stuning.sddmm(mask, a.to(device), b.to(device), config=tiled().as_dict())
    assert_close(out.values.cpu(), values_ref(mask, sddmm_ref(dense, a, b)), TOL[torch.float16])
    with pytest.raises(ValueError, match="needs the mask's output tiles"):
        sddmm_kernel.sddmm(mask.row_ids(), mask.col, mask.values, a.to(device), b.to(device), alpha=1.0, beta=0.0,
                           config=tiled())


def test_tuner_runner_runs_the_tiled_kernel(device):
    problem = build_problem(SDDMMCase(40, 50, 24, 0.8, "fp16"), device=device)
    out = problem.run(tiled(bk=32))
    assert_close(out.cpu(), problem.reference.double().cpu(), TOL[torch.float16])
    assert any(key[0] == "output_tiles" for key in problem.inputs["mask"].cache)


@pytest.mark.parametrize("k_strided", [False, True])
def test_tuner_problem_is_laid_out_as_its_case_says(device, k_strided):
    from stuning.tuning.driver import case_like
    from stuning.tuning.session import key_for

    case = SDDMMCase(40, 50, 24, 0.8, "fp32", k_strided=k_strided)
    problem = build_problem(case, device=device, seed=3)
    a, b = problem.inputs["a"], problem.inputs["b"]
    # K-strided: A = dY^T a transposed view, B = X row-major, as a weight gradient hands them.
    assert (a.stride(1) != 1, b.stride(0) != 1) == (k_strided, k_strided)
    assert ("at=1" in key_for(problem.features)) == k_strided and ("_kt_" in case.name) == k_strided
    assert case_like(problem.features) == case
    for cfg in (tiled(bk=16), sddmm_kernel.heuristic(SDDMMProblem(40, 50, 24, 400, torch.float32)),
                sddmm_kernel.dense_config()):
        assert_close(problem.run(cfg).cpu(), problem.reference.double().cpu(), TOL[torch.float32], cfg.kernel)


# ------------------------------------------------------------------------------- cost model
H200 = spec_for("NVIDIA H200")


def best(model, f, kernel):
    space = [c for c in family("sddmm").space(f, budget_of(H200)) if c.kernel == kernel]
    return model.rank(f, space)[0][1]


def test_model_prefers_tiles_when_they_fill_and_gather_when_they_do_not():
    model = CostModel(H200)
    dense_ish = synthetic_sddmm_features(4096, 4096, 64, 0.2, "float16")
    assert best(model, dense_ish, "tiled") < best(model, dense_ish, "gather") / 2
    very_sparse = synthetic_sddmm_features(4096, 4096, 64, 0.002, "float16")
    assert best(model, very_sparse, "gather") < best(model, very_sparse, "tiled")


def test_model_charges_a_run_one_read_of_a_band():
    f = synthetic_sddmm_features(4096, 4096, 64, 0.05, "float16")
    spec = spec_for("NVIDIA H200")
    single = sddmm_cost.terms(f, tiled(128, 64, 64, 512, 8, 2), spec)
    run = sddmm_cost.terms(f, tiled(128, 64, 64, 512, 8, 2, run=4), spec)
    assert run.mem_us < single.mem_us  # B per tile, A's band once per run instead of once per tile
    deep = synthetic_sddmm_features(4096, 4096, 256, 0.05, "float16")
    assert (sddmm_cost.terms(deep, tiled(128, 64, 64, 512, 8, 2, run=4), spec).mem_us
            == sddmm_cost.terms(deep, tiled(128, 64, 64, 512, 8, 2), spec).mem_us)  # several K steps: no saving


@pytest.mark.parametrize("m", [4096, 4000])  # whole 128-row tiles, ragged
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_model_charges_k_strided_operands_the_copies_the_launch_makes(dtype, m):
    # A weight gradient's dY^T and X: the gather kernel gets both copied, the tiled kernel A where M
    # is ragged unless a run reads its band in place, the dense kernel (cuBLAS) neither. fp32's B is
    # split into fp16 parts on the H200 (sm_90), in one pass whatever its layout: no copy either.
    spec = spec_for("NVIDIA H200")
    n, k = 2048, 256
    plain = synthetic_sddmm_features(m, n, k, 0.05, dtype)
    strided = plain.with_values(a_t=1)
    elt = 4 if dtype == "float32" else 2
    a_us, b_us = (2 * size * elt / (spec.dram_gbs * 1e3) + LAUNCH_US for size in (m * k, k * n))
    problem = SDDMMProblem(m, n, k, plain["nnz"], getattr(torch, dtype))
    configs = {"gather": (sddmm_kernel.heuristic(problem), a_us + b_us),
               "tiled": (tiled(128, 64, 64, 512, 8, 2),
                         a_us if m % 128 else 0.0),
               "tiled run": (tiled(128, 64, 256, 512, 8, 2, run=4), 0.0),
               "dense": (sddmm_kernel.dense_config(), 0.0)}
    model = CostModel(spec)
    for what, (cfg, copies_us) in configs.items():
        extra = sddmm_cost.terms(strided, cfg, spec).overhead_us - sddmm_cost.terms(plain, cfg, spec).overhead_us
        assert extra == pytest.approx(copies_us, rel=1e-9), what
        assert model.predict_us(strided, cfg) == pytest.approx(model.predict_us(plain, cfg) + copies_us), what


def test_model_counts_the_tiles_of_a_structured_mask(gen):
    # Local attention: a band of width 64 around the diagonal. Most tiles are empty, which the
    # uniform estimate of the same density would not know.
    n = 1024
    idx = torch.arange(n)
    dense = ((idx[:, None] - idx[None, :]).abs() < 32).float()
    mask = CSRMatrix.from_dense(dense)
    f = sddmm_features(mask, 64, torch.float16)
    assert f[tile_feature(64, 64)] == output_tiles(mask, 64, 64, 64).count
    uniform = f.with_values(**{tile_feature(bm, bn): None for bm in (32, 64, 128) for bn in (32, 64, 128)})
    assert nonempty_tiles(f, 64, 64) < nonempty_tiles(uniform, 64, 64) / 4
    model = CostModel(H200)
    cfg = tiled(64, 64, 64, 64)
    assert model.predict_us(f, cfg) < model.predict_us(uniform, cfg)


def test_uniform_estimate_matches_a_uniform_mask(gen):
    mask = CSRMatrix.from_dense(random_sparse(512, 512, 0.002, torch.float32, gen))
    f = sddmm_features(mask, 64, torch.float32)
    estimate = dataclasses.replace(f, values={k: v for k, v in f.values.items() if not k.startswith("tiles_")})
    for bm, bn in ((32, 32), (64, 64), (128, 128)):
        assert nonempty_tiles(estimate, bm, bn) == pytest.approx(f[tile_feature(bm, bn)], rel=0.15)


def test_int64_indices(gen, device):
    dense = random_sparse(40, 50, 0.3, torch.float32, gen)
    m32 = CSRMatrix.from_dense(dense)
    mask = CSRMatrix(m32.crow.long(), m32.col.long(), m32.values, m32.shape).to(device)
    a, b = randn(40, 16, dtype=torch.float32, gen=gen), randn(16, 50, dtype=torch.float32, gen=gen)
    out = stuning.sddmm(mask, a.to(device), b.to(device), beta=1.0, config=tiled(32, 64, 16, 32))
    assert output_tiles(mask, 32, 64, 32).dest.dtype == torch.int64
    assert_close(out.values.cpu(), values_ref(mask, sddmm_ref(dense, a, b, 1.0, 1.0)), TOL[torch.float32])


# ------------------------------------------------------------------------------ fp32 as fp16 parts
@pytest.mark.parametrize("k,bk", [(300, 64), (16, 64)], ids=["flushed", "one-step"])
@pytest.mark.parametrize("a_mcontig", [False, True], ids=["a", "dy^T"])
def test_fp32_tiles_multiply_as_fp16_parts(gen, device, monkeypatch, k, bk, a_mcontig):
    """fp32 tiles are one fp16 product of A's and B's parts, 3K deep (900 here: flushed every
    FLUSH_K; 48: one step, A resident), scaled back per row of A and column of B: to fp32's accuracy
    on rows and columns of any range, with alpha and beta."""
    m, n = 37, 45
    dense = random_sparse(m, n, 0.3, torch.float32, gen)
    a = randn(m, k, dtype=torch.float32, gen=gen)
    a[1] *= 1e-20
    a[2] *= 3e4
    b = randn(k, n, dtype=torch.float32, gen=gen)
    b[:, 1] *= 1e5
    b[:, 2] *= 1e-7
    if a_mcontig:
        a = a.t().contiguous().t()
    splits = []
    split_x = sddmm_tiled.fp16_split.split_x
    monkeypatch.setattr(sddmm_tiled.fp16_split, "split_x", lambda x, *args, **kw: splits.append(kw) or split_x(
        x, *args, **kw))
    mask = mask_of(dense, device)
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=0.5, beta=1.0, config=tiled(32, 64, bk, 64))
    assert splits == ([{"lhs": True}, {}] if sddmm_tiled.fp16_parts(torch.float32, torch.device(device)) else [])
    ref = values_ref(mask, sddmm_ref(dense, a, b, 0.5, 1.0))
    bound = values_ref(mask, 0.5 * (a.double().abs() @ b.double().abs()) + dense.double().abs())
    err = (out.values.cpu().double() - ref).abs() / bound.clamp_min(1e-300)
    assert float(err.max()) < 1e-6, float(err.max())
    assert_close(out.values.cpu(), ref, TOL[torch.float32])


def test_fp32_tiles_without_parts_keep_the_plain_product(gen, device):
    """``parts=False``: the TF32 products (the exact dot here), which the probe compares against."""
    dense = random_sparse(40, 50, 0.3, torch.float32, gen)
    a, b = randn(40, 300, dtype=torch.float32, gen=gen), randn(300, 50, dtype=torch.float32, gen=gen)
    mask = mask_of(dense, device)
    tiles = output_tiles(mask, 32, 32, 32)
    ref = values_ref(mask, sddmm_ref(dense, a, b))
    for parts in (False, True):
        out = sddmm_tiled.sddmm_tiled(tiles, mask.values, a.to(device), b.to(device), alpha=1.0, beta=0.0,
                                      block_k=64, num_warps=4, num_stages=2, parts=parts)
        assert_close(out.cpu(), ref, TOL[torch.float32], f"parts={parts}")


def test_the_op_chooses_tiles_for_a_dense_mask(gen, device):
    # Half the positions sampled: every tile full, so the cost model picks the tiled kernel by itself.
    dense = random_sparse(128, 128, 0.5, torch.float16, gen)
    a, b = randn(128, 64, dtype=torch.float16, gen=gen), randn(64, 128, dtype=torch.float16, gen=gen)
    mask = mask_of(dense, device)
    out = stuning.sddmm(mask, a.to(device), b.to(device))
    chosen = [v for key, v in mask.cache.items() if key[0] == "sddmm"]
    assert len(chosen) == 1 and chosen[0].kernel == "tiled", chosen
    assert_close(out.values.cpu(), values_ref(mask, sddmm_ref(dense, a, b)), TOL[torch.float16])


def test_fp32_tiles_keep_16_rows_a_warp():
    """fp32 tiles with 8 rows a warp ran 2x slower on the H200 (BENCHMARKS.md 7n): an fp16 entry
    with them, borrowed for fp32, is repaired to 4 warps; fp16 keeps its 8."""
    entry = SDDMMConfig(kernel="tiled", block_m=64, block_n=128, block_k=32, chunk=256, num_warps=8, num_stages=3)
    for dtype, warps in ((torch.float16, 8), (torch.float32, 4)):
        problem = SDDMMProblem(4096, 4096, 256, 4096 * 400, dtype)
        assert sddmm_kernel.repair(entry, problem).num_warps == warps
        space = sddmm_kernel.config_space(problem)
        assert any(c.kernel == "tiled" and c.block_m // c.num_warps < 16 for c in space) == (dtype != torch.float32)


@pytest.mark.parametrize("dtype,upcast,device,want", [
    (torch.float16, False, "cpu", "tf32"),  # ignored for 16-bit inputs
    (torch.bfloat16, True, "cpu", "ieee"),  # the interpreter's bf16, upcast to fp32
    (torch.float32, False, "cpu", "ieee"),  # the interpreter computes in fp32 anyway
])
def test_tile_product_precision(dtype, upcast, device, want):
    assert sddmm_tiled._precision(dtype, upcast, torch.device(device)) == want
