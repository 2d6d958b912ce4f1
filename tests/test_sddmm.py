"""SDDMM through Triton's interpreter (or the GPU) on small shapes, against a float64 reference."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from naive import (
    ALL_DTYPES,
    TOL,
    assert_close,
    config_id,
    config_params,
    dtype_tol_params,
    randn,
    random_sparse,
    sample_configs,
    sddmm_ref,
    skewed_sparse,
)
from stuning.kernels import sddmm as sddmm_kernel
from stuning.kernels.sddmm import SDDMMConfig, SDDMMProblem

import stuning
from stuning import CSRMatrix

DTYPES = ALL_DTYPES
DTYPE_TOL = dtype_tol_params(DTYPES)

# mask M x N, A M x K, B K x N
M, N, K, MEAN_LEN = 37, 29, 40, 8
PROBLEM = SDDMMProblem(M, N, K, M * MEAN_LEN, torch.float32)
# The gather kernel's part of the space (the tiled kernel has its own tests: test_sddmm_tiled.py).
SPACE = [c for c in sddmm_kernel.config_space(PROBLEM) if c.kernel == "gather"]
CONFIGS = config_params(sample_configs(SPACE, 8, seed=2), sddmm_kernel.heuristic(PROBLEM))
# K not a multiple of any BLOCK_K, nor of 2: only vec = 1 is valid.
K_ODD = 19
PROBLEM_ODD = SDDMMProblem(M, N, K_ODD, M * MEAN_LEN, torch.float32)
SPACE_ODD = [c for c in sddmm_kernel.config_space(PROBLEM_ODD) if c.kernel == "gather"]
CONFIGS_ODD = config_params(sample_configs(SPACE_ODD, 3, seed=3), sddmm_kernel.heuristic(PROBLEM_ODD))

BASE = SDDMMConfig(nnz_block=16, block_k=16, vec=1, num_warps=1)


def values_ref(mask: CSRMatrix, ref_dense: torch.Tensor) -> torch.Tensor:
    """The reference at the mask's stored entries, in its order."""
    rows, cols = mask.row_ids().long().cpu(), mask.col.long().cpu()
    return ref_dense.cpu()[rows, cols]


def check(out: CSRMatrix, mask: CSRMatrix, ref_dense: torch.Tensor, tol: float, what: str = ""):
    assert isinstance(out, CSRMatrix)
    assert out.shape == mask.shape
    assert torch.equal(out.crow, mask.crow) and torch.equal(out.col, mask.col)
    assert out.values.dtype == mask.values.dtype
    assert bool(torch.isfinite(out.values.float()).all()), f"{what}: non-finite output values"
    assert_close(out.values.cpu(), values_ref(mask, ref_dense), tol, what)


def inputs(gen, dtype, m, n, k, *, density=0.25, mask_dense=None):
    if mask_dense is None:
        mask_dense = random_sparse(m, n, density, dtype, gen)
    return mask_dense, randn(m, k, dtype=dtype, gen=gen), randn(k, n, dtype=dtype, gen=gen)


# --------------------------------------------------------------------------------------- configs
def test_config_space_is_valid():
    assert SPACE and SPACE_ODD
    assert all(K % c.vec == 0 for c in SPACE)
    assert all(c.vec == 1 for c in SPACE_ODD)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_sampled_configs(gen, device, dtype, tol, config):
    mask_dense = skewed_sparse(M, N, MEAN_LEN, dtype, gen, empty_rows=3)
    _, a, b = inputs(gen, dtype, M, N, K, mask_dense=mask_dense)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = stuning.sddmm(mask, a.to(device), b.to(device), config=config)
    check(out, mask, sddmm_ref(mask_dense, a, b), tol, f"sddmm {config}")


@pytest.mark.parametrize("config", CONFIGS_ODD)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_k_not_multiple_of_block_k(gen, device, dtype, tol, config):
    mask_dense, a, b = inputs(gen, dtype, M, N, K_ODD)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=0.75, beta=1.5, config=config)
    check(out, mask, sddmm_ref(mask_dense, a, b, 0.75, 1.5), tol, f"sddmm {config}")


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
@pytest.mark.parametrize(
    "shape",
    [(1, 13, 7), (21, 1, 5), (17, 29, 1), (70, 50, 33), (3, 5, 130)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_odd_shapes(gen, device, dtype, tol, shape):
    m, n, k = shape
    mask_dense, a, b = inputs(gen, dtype, m, n, k, density=0.4)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    check(stuning.sddmm(mask, a.to(device), b.to(device)), mask, sddmm_ref(mask_dense, a, b), tol, str(shape))


def test_reference_matches_torch_sampled_addmm(gen):
    mask_dense, a, b = inputs(gen, torch.float64, 12, 9, 7, density=0.4)
    mask_dense[3] = 0
    for alpha, beta in ((1.0, 0.0), (0.5, -2.0), (0.0, 1.0)):
        expect = torch.sparse.sampled_addmm(mask_dense.to_sparse_csr(), a, b, alpha=alpha, beta=beta)
        assert torch.allclose(sddmm_ref(mask_dense, a, b, alpha, beta), expect.to_dense())


# ----------------------------------------------------------------------------------- edge cases
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_matches_torch_sampled_addmm(gen, device, dtype, tol):
    mask_dense, a, b = inputs(gen, dtype, 20, 24, 16)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=2.0, beta=0.5, config=BASE)
    expect = torch.sparse.sampled_addmm(
        mask_dense.double().to_sparse_csr(), a.double(), b.double(), alpha=2.0, beta=0.5
    )
    assert_close(out.to_dense().cpu(), expect.to_dense(), tol)


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, -2.0), (-3.0, 1.0), (0.0, 1.0), (0.0, 0.0), (1.0, 1e-3)])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_alpha_beta(gen, device, dtype, tol, alpha, beta):
    mask_dense, a, b = inputs(gen, dtype, 23, 19, 24)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = stuning.sddmm(mask, a.to(device), b.to(device), alpha=alpha, beta=beta, config=BASE)
    check(out, mask, sddmm_ref(mask_dense, a, b, alpha, beta), tol, f"alpha {alpha} beta {beta}")
    if alpha == 0.0:
        assert torch.equal(out.values.cpu(), (beta * mask.values.cpu().double()).to(dtype))


@pytest.mark.parametrize("config", [BASE, None], ids=config_id)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_beta_zero_does_not_read_mask_values(gen, device, dtype, tol, config):
    mask_dense, a, b = inputs(gen, dtype, 25, 21, 16)
    pattern = mask_dense != 0
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    poisoned = CSRMatrix(mask.crow, mask.col, torch.full_like(mask.values, float("nan")), mask.shape)
    out = stuning.sddmm(poisoned, a.to(device), b.to(device), alpha=1.5, beta=0.0, config=config)
    assert bool(torch.isfinite(out.values.float()).all())
    check(out, mask, sddmm_ref(mask_dense, a, b, 1.5, 0.0, pattern=pattern), tol)


def test_explicit_zeros_are_part_of_the_pattern(gen, device):
    # A stored zero of the mask is sampled, as torch.sparse.sampled_addmm does.
    crow = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    col = torch.tensor([1, 3, 0, 2, 3], dtype=torch.int32)
    vals = torch.tensor([0.0, 2.0, 0.0, 0.0, -1.0])
    mask = CSRMatrix(crow, col, vals, (3, 4)).to(device)
    a, b = randn(3, 16, dtype=torch.float32, gen=gen), randn(16, 4, dtype=torch.float32, gen=gen)
    out = stuning.sddmm(mask, a.to(device), b.to(device), beta=1.0, config=BASE)
    expect = torch.sparse.sampled_addmm(
        torch.sparse_csr_tensor(crow.long(), col.long(), vals.double(), (3, 4)),
        a.double(),
        b.double(),
        beta=1.0,
    )
    assert_close(out.values.cpu(), expect.values(), TOL[torch.float32])


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_empty_rows(gen, device, dtype, tol):
    mask_dense = skewed_sparse(40, 30, 5, dtype, gen, empty_rows=15)
    _, a, b = inputs(gen, dtype, 40, 30, 20, mask_dense=mask_dense)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = stuning.sddmm(mask, a.to(device), b.to(device), beta=1.0, config=BASE)
    check(out, mask, sddmm_ref(mask_dense, a, b, 1.0, 1.0), tol)


def test_all_zero_mask(gen, device):
    mask = CSRMatrix.from_dense(torch.zeros(7, 9, device=device))
    out = stuning.sddmm(mask, torch.randn(7, 5, device=device), torch.randn(5, 9, device=device))
    assert out.nnz == 0 and out.shape == (7, 9)
    assert torch.equal(out.to_dense(), torch.zeros(7, 9, device=device))


@pytest.mark.parametrize(
    "shape",
    [(1, 30, 16), (30, 1, 16), (9, 11, 1), (0, 4, 3), (4, 0, 3), (6, 5, 0)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_small_and_empty_dimensions(gen, device, shape):
    m, n, k = shape
    mask_dense, a, b = inputs(gen, torch.float32, m, n, k, density=0.5)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = stuning.sddmm(mask, a.to(device), b.to(device), beta=2.0, config=BASE)
    assert out.shape == (m, n)
    check(out, mask, sddmm_ref(mask_dense, a, b, 1.0, 2.0), TOL[torch.float32], str(shape))


@pytest.mark.parametrize("which", ["a", "b", "both"])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_noncontiguous_inputs(gen, device, dtype, tol, which):
    mask_dense, a, b = inputs(gen, dtype, 26, 22, 32)
    a_in = a.t().contiguous().t() if which in ("a", "both") else a
    b_in = b.t().contiguous().t() if which in ("b", "both") else b  # the usual dY @ X^T
    assert not (a_in.is_contiguous() and b_in.is_contiguous())
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    for cfg in (dataclasses.replace(BASE, vec=4), None):
        out = stuning.sddmm(mask, a_in.to(device), b_in.to(device), config=cfg)
        check(out, mask, sddmm_ref(mask_dense, a, b), tol, f"{which} {cfg}")


def _weight_gradient_operands(gen, dtype, m, n, k):
    """A = dY^T (a transposed view: K strided) and B = X (row-major: N contiguous), as a weight
    gradient ``(dY^T @ X) * spy(W)`` hands them."""
    return randn(k, m, dtype=dtype, gen=gen).t(), randn(k, n, dtype=dtype, gen=gen)


class _LaunchSpy:
    """Stands in for ``_sddmm_kernel``: records the strides of A and B at each launch, then launches."""

    def __init__(self, kernel):
        self.kernel, self.strides = kernel, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.strides.append((args[3].stride(), args[4].stride()))
            return self.kernel[grid](*args, **kwargs)
        return launch


@pytest.mark.parametrize("m", [40, 64])  # the tiled heuristic's 64-row tiles: M ragged, M whole tiles
@pytest.mark.parametrize("kernel", ["gather", "tiled", "dense"])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_weight_gradient_layouts_are_read_k_contiguous(gen, device, monkeypatch, dtype, tol, kernel, m):
    n, k = 36, 32
    mask_dense = random_sparse(m, n, 0.3, dtype, gen)
    a, b = _weight_gradient_operands(gen, dtype, m, n, k)
    problem = SDDMMProblem(m, n, k, int((mask_dense != 0).sum()), dtype)
    cfg = {"gather": sddmm_kernel.heuristic(problem), "tiled": sddmm_kernel.tiled_heuristic(problem),
           "dense": sddmm_kernel.dense_config()}[kernel]
    spy = _LaunchSpy(sddmm_kernel._sddmm_kernel)
    monkeypatch.setattr(sddmm_kernel, "_sddmm_kernel", spy)
    tiled_strides = []
    tiled = sddmm_kernel.sddmm_tiled.sddmm_tiled
    monkeypatch.setattr(sddmm_kernel.sddmm_tiled, "sddmm_tiled",
                        lambda tiles, mv, a, b, **kw: tiled_strides.append((a.stride(), b.stride()))
                        or tiled(tiles, mv, a, b, **kw))
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    out = stuning.sddmm(mask, a.to(device), b.to(device), config=cfg)
    check(out, mask, sddmm_ref(mask_dense, a, b), tol, kernel)
    # What each kernel was handed: the gather kernel K-contiguous rows of A and columns of B; the
    # tiled kernel A's rows where M is ragged (A as given where M is whole tiles), and B's columns
    # where fp32 multiplies as TF32 products, not fp16 parts; the dense kernel (cuBLAS) the views as
    # given. fp32's fp16 parts are stacks the split writes in A's and B's orientations.
    assert spy.strides == ([((k, 1), (1, k))] if kernel == "gather" else [])
    if kernel != "tiled":
        assert tiled_strides == []
        return
    assert (m % cfg.block_m == 0) == (m == 64)
    a_tiled = (k, 1) if m % cfg.block_m else (1, m)
    tf32x3 = dtype == torch.float32 and not sddmm_kernel.sddmm_tiled.fp16_parts(dtype, torch.device(device))
    b_tiled = (1, k) if tf32x3 else (n, 1)
    assert tiled_strides == [(a_tiled, b_tiled)]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_operands_are_copied_only_where_a_kernel_reads_them_slowly(dtype):
    a = torch.randn(12, 8).to(dtype)
    b = torch.randn(10, 8).to(dtype).t()  # K-contiguous columns, as attention's K^T
    problem = SDDMMProblem(12, 10, 8, 30, dtype)
    gather, tiled = sddmm_kernel.heuristic(problem), sddmm_kernel.tiled_heuristic(problem)
    for cfg in (gather, tiled, sddmm_kernel.dense_config()):
        a_out, b_out = sddmm_kernel.operands_for(cfg, a, b)
        assert a_out is a and b_out is b, cfg
    # A one-column A or one-row B has no stride to speak of along K.
    a1, b1 = torch.randn(12, 1).to(dtype).t().contiguous().t(), torch.randn(1, 10).to(dtype)
    a_out, b_out = sddmm_kernel.operands_for(gather, a1, b1)
    assert a_out is a1 and b_out is b1
    # The tiled kernel reads a transposed A in place where M (12) is whole tiles, or where a band of
    # A is read once for a run of tiles (one step covers K); otherwise it gets A copied.
    a_t = a.t().contiguous().t()
    assert tiled.block_k >= a.shape[1] and 12 % tiled.block_m
    run = dataclasses.replace(tiled, tiles_per_program=4)
    assert sddmm_kernel.operands_for(run, a_t, b)[0] is a_t
    assert sddmm_kernel.operands_for(tiled, a_t, b)[0].stride() == (8, 1)
    assert sddmm_kernel.operands_for(dataclasses.replace(run, block_k=4), a_t, b)[0].stride() == (8, 1)
    whole_tiles = dataclasses.replace(tiled, block_m=4)
    assert sddmm_kernel.operands_for(whole_tiles, a_t, b)[0] is a_t
    assert sddmm_kernel.operands_for(dataclasses.replace(whole_tiles, block_k=4), a_t, b)[0] is a_t


def test_a_transposed_is_its_own_tuning_problem(gen, device, monkeypatch):
    from stuning.ops.selection import SELECTOR
    from stuning.tuning.features import sddmm_features
    from stuning.tuning.session import key_for

    m, n, k = 24, 20, 32
    mask_dense = random_sparse(m, n, 0.3, torch.float32, gen)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    plain, strided = key_for(sddmm_features(mask, k)), key_for(sddmm_features(mask, k, a_transposed=True))
    assert plain != strided and "at=1" in strided
    keys = []
    real = SELECTOR.choose
    monkeypatch.setattr(SELECTOR, "choose", lambda features, key: keys.append(key) or real(features, key))
    a_t, b = _weight_gradient_operands(gen, torch.float32, m, n, k)
    # A's layout is keyed (it decides the tiled kernel's copy), B's is not.
    layouts = {
        "weight gradient": ((a_t, b), strided),
        "A transposed only": ((a_t, b.t().contiguous().t()), strided),
        "B row-major only": ((a_t.contiguous(), b), plain),
        "attention": ((a_t.contiguous(), b.t().contiguous().t()), plain),
    }
    for what, ((a, b_), wanted) in layouts.items():
        assert sddmm_kernel.is_k_strided(a, 1) == (wanted == strided), what
        keys.clear()
        mask.cache.clear()  # the op caches its choice on the mask, per layout of A
        check(stuning.sddmm(mask, a.to(device), b_.to(device)), mask, sddmm_ref(mask_dense, a, b_),
              TOL[torch.float32], what)
        assert keys == [wanted], what
    # A one-column A has no stride along K to speak of.
    assert not sddmm_kernel.is_k_strided(torch.randn(1, 5).t(), 1)


@pytest.mark.parametrize("layout", ["csr", "coo"])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_torch_sparse_mask(gen, device, dtype, tol, layout):
    mask_dense, a, b = inputs(gen, dtype, 18, 27, 24)
    d = mask_dense.to(device)
    sparse = d.to_sparse_csr() if layout == "csr" else d.to_sparse()
    out = stuning.sddmm(sparse, a.to(device), b.to(device), alpha=2.0, beta=1.0, config=BASE)
    check(out, CSRMatrix.from_dense(d), sddmm_ref(mask_dense, a, b, 2.0, 1.0), tol)


def test_config_as_dict(gen, device):
    mask_dense, a, b = inputs(gen, torch.float16, 20, 24, 48)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    cfg = {"nnz_block": 32, "block_k": 32, "vec": 8, "num_warps": 2, "num_stages": 1}
    out = stuning.sddmm(mask, a.to(device), b.to(device), config=cfg)
    check(out, mask, sddmm_ref(mask_dense, a, b), TOL[torch.float16])
    again = stuning.sddmm(mask, a.to(device), b.to(device), config=SDDMMConfig(**cfg))
    assert torch.equal(out.values, again.values)


def test_fp16_accumulates_in_fp32(device):
    mask = CSRMatrix.from_dense(torch.ones(1, 1, dtype=torch.float16, device=device))
    a = torch.tensor([[200.0, 200.0, -200.0]], dtype=torch.float16, device=device)
    b = torch.full((3, 1), 300.0, dtype=torch.float16, device=device)
    out = stuning.sddmm(mask, a, b, config=BASE)
    assert out.values.tolist() == [60000.0]


# ---------------------------------------------------------------------------------------- errors
@pytest.fixture
def mask16(device):
    return CSRMatrix.from_dense(torch.eye(6, 5, dtype=torch.float16, device=device))


def f16(*shape, device):
    return torch.ones(*shape, dtype=torch.float16, device=device)


def test_error_mask_shape(mask16, device):
    with pytest.raises(ValueError, match="mask is 6 x 5, so A must have 6 rows and B 5 columns"):
        stuning.sddmm(mask16, f16(5, 4, device=device), f16(4, 5, device=device))
    with pytest.raises(ValueError, match="mask is 6 x 5"):
        stuning.sddmm(mask16, f16(6, 4, device=device), f16(4, 6, device=device))


def test_error_inner_dimension(mask16, device):
    with pytest.raises(ValueError, match="inner dimensions differ"):
        stuning.sddmm(mask16, f16(6, 4, device=device), f16(3, 5, device=device))


def test_error_not_2d(mask16, device):
    with pytest.raises(ValueError, match="must be 2-D"):
        stuning.sddmm(mask16, f16(6, device=device), f16(4, 5, device=device))


def test_error_dtype_mismatch(mask16, device):
    with pytest.raises(TypeError, match="they must match"):
        stuning.sddmm(mask16, f16(6, 4, device=device), torch.ones(4, 5, device=device))
    with pytest.raises(TypeError, match="mask is torch.float32"):
        stuning.sddmm(mask16.to(dtype=torch.float32), f16(6, 4, device=device), f16(4, 5, device=device))


def test_error_float64(device):
    mask = CSRMatrix.from_dense(torch.eye(6, 5, dtype=torch.float64, device=device))
    a = torch.ones(6, 4, dtype=torch.float64, device=device)
    with pytest.raises(TypeError, match="float64 is not supported"):
        stuning.sddmm(mask, a, torch.ones(4, 5, dtype=torch.float64, device=device))


def test_error_dense_mask(device):
    with pytest.raises(TypeError, match="got a dense tensor"):
        stuning.sddmm(f16(6, 5, device=device), f16(6, 4, device=device), f16(4, 5, device=device))


def test_error_padded_mask(device):
    mask = CSRMatrix.from_dense(torch.eye(6, 5, dtype=torch.float16, device=device), pad_to=4)
    with pytest.raises(ValueError, match="mask is padded"):
        stuning.sddmm(mask, f16(6, 4, device=device), f16(4, 5, device=device))


@pytest.mark.parametrize("bad", [{"alpha": float("nan")}, {"beta": float("inf")}, {"alpha": -float("inf")}])
def test_error_non_finite_scalars(mask16, device, bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=f"{name} must be finite"):
        stuning.sddmm(mask16, f16(6, 4, device=device), f16(4, 5, device=device), **bad)


def test_error_unknown_config_field(mask16, device):
    with pytest.raises(ValueError, match=r"unknown SDDMMConfig fields \['rows'\]"):
        stuning.sddmm(mask16, f16(6, 4, device=device), f16(4, 5, device=device), config={"rows": 2})


@pytest.mark.parametrize("kernel", ["gather", "tiled", "dense"])
def test_kernel_launcher_writes_into_out(gen, device, kernel):
    """Every value of a NaN-filled ``out`` is written, by each kernel (the tuner's check relies on it)."""
    from stuning.formats import output_tiles

    mask_dense, a, b = inputs(gen, torch.float16, M, N, K)
    mask = CSRMatrix.from_dense(mask_dense.to(device))
    problem = SDDMMProblem(M, N, K, mask.nnz, torch.float16)
    config = {"gather": sddmm_kernel.heuristic, "tiled": sddmm_kernel.tiled_heuristic,
              "dense": lambda _: sddmm_kernel.dense_config()}[kernel](problem)
    out = torch.full((mask.nnz,), float("nan"), dtype=torch.float16, device=device)
    got = sddmm_kernel.sddmm(mask.row_ids(), mask.col, mask.values, a.to(device), b.to(device), alpha=1.0,
                             beta=0.0, config=config, tiles=lambda *t: output_tiles(mask, *t),
                             crow=mask.crow, out=out)
    assert got is out
    assert_close(out.cpu(), values_ref(mask, sddmm_ref(mask_dense, a, b)), TOL[torch.float16])


@pytest.mark.parametrize("bad", ["shape", "dtype", "strided"])
def test_error_kernel_launcher_out(mask16, device, bad):
    nnz = mask16.nnz
    out = {"shape": f16(nnz + 1, device=device), "dtype": torch.ones(nnz, device=device),
           "strided": f16(2 * nnz, device=device)[::2]}[bad]
    with pytest.raises(ValueError, match="out must be"):
        sddmm_kernel.sddmm(mask16.row_ids(), mask16.col, mask16.values, f16(6, 4, device=device),
                           f16(4, 5, device=device), alpha=1.0, beta=0.0, config=BASE, out=out)
