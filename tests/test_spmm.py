"""SpMM through Triton's interpreter (or the GPU) on small shapes, against a float64 reference."""

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
    skewed_sparse,
    sparse_from_lengths,
    spmm_ref,
)
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_sell
from stuning.kernels.spmm import SpMMConfig, SpMMProblem

import stuning
from stuning import CSRMatrix

DTYPES = ALL_DTYPES
DTYPE_TOL = dtype_tol_params(DTYPES)

# The shape of the config sweep: odd M and K, skewed rows of about MEAN_LEN nonzeros.
M, K, N, MEAN_LEN = 45, 67, 40, 12
PROBLEM = SpMMProblem(M, K, N, M * MEAN_LEN, torch.float32)
SPACE = spmm_kernel.config_space(PROBLEM)
SAMPLED = sample_configs(SPACE, 8, seed=1)

BASE = SpMMConfig(rows=4, nnz_step=8, block_n=16, vec=1, swizzle=False, num_warps=1)


def nan_out(m, n, dtype, device):
    return torch.full((m, n), float("nan"), dtype=dtype, device=device)


def run(dense, b, config=None, pad_to=1, device="cpu"):
    """spmm of the dense matrix (converted to CSR) into a NaN-filled output; checks it is the output."""
    a = CSRMatrix.from_dense(dense.to(device), pad_to=pad_to)
    b = b.to(device)
    out = nan_out(dense.shape[0], b.shape[1], b.dtype, device)
    y = stuning.spmm(a, b, config=config, out=out)
    assert y is out
    return y


# --------------------------------------------------------------------------------------- configs
def test_config_space_is_valid():
    assert len(SPACE) > 100
    for cfg in SPACE:
        assert N % cfg.vec == 0 and cfg.vec <= cfg.block_n
        assert cfg.rows <= 64 and cfg.block_n <= 64
    assert {c.swizzle for c in SAMPLED} == {False, True}


def test_rows_under_two_nonzeros_still_have_configs(gen, device):
    """A pointwise conv pruned to 95% has rows of about one nonzero: the shortest step still fits."""
    m, k, n = 64, 32, 24
    dense = sparse_from_lengths(torch.randint(0, 3, (m,), generator=gen), k, torch.float32, gen)
    space = spmm_kernel.config_space(SpMMProblem(m, k, n, int((dense != 0).sum()), torch.float32))
    assert space and min(c.nnz_step for c in space) == 8
    b = randn(k, n, dtype=torch.float32, gen=gen)
    config = sample_configs(space, 1, seed=3)[0]
    assert_close(run(dense, b, config, device=device), spmm_ref(dense, b), TOL[torch.float32], f"spmm {config}")


@pytest.mark.parametrize("pad_to", [1, 4], ids=["unpadded", "pad4"])
@pytest.mark.parametrize("config", config_params(SAMPLED, spmm_kernel.heuristic(PROBLEM)))
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_sampled_configs(gen, device, dtype, tol, config, pad_to):
    dense = skewed_sparse(M, K, MEAN_LEN, dtype, gen, cv=0.4, empty_rows=3)
    b = randn(K, N, dtype=dtype, gen=gen)
    y = run(dense, b, config, pad_to=pad_to, device=device)
    assert y.dtype == dtype and y.shape == (M, N)
    assert_close(y, spmm_ref(dense, b), tol, f"spmm {config}")


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
@pytest.mark.parametrize(
    "shape",
    [(1, 13, 7), (33, 1, 5), (17, 29, 1), (70, 50, 31), (3, 200, 2), (19, 8, 66)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_odd_shapes(gen, device, dtype, tol, shape):
    m, k, n = shape
    dense = random_sparse(m, k, 0.3, dtype, gen)
    b = randn(k, n, dtype=dtype, gen=gen)
    assert_close(run(dense, b, device=device), spmm_ref(dense, b), tol, f"spmm {shape}")


# ----------------------------------------------------------------------------------- edge cases
@pytest.mark.parametrize("swizzle", [False, True], ids=["inorder", "swizzle"])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_empty_rows(gen, device, dtype, tol, swizzle):
    dense = skewed_sparse(38, 30, 6, dtype, gen, empty_rows=12)
    assert int((dense != 0).sum(1).eq(0).sum()) >= 12
    b = randn(30, 20, dtype=dtype, gen=gen)
    cfg = dataclasses.replace(BASE, swizzle=swizzle)
    y = run(dense, b, cfg, device=device)
    assert_close(y, spmm_ref(dense, b), tol)
    assert (y[(dense != 0).sum(1) == 0] == 0).all()


@pytest.mark.parametrize("config", [None, BASE, dataclasses.replace(BASE, prefetch=True)], ids=config_id)
@pytest.mark.parametrize("pad_to", [1, 4])
def test_all_zero_matrix(device, config, pad_to):
    dense = torch.zeros(9, 11)
    b = torch.randn(11, 5)
    y = run(dense, b, config, pad_to=pad_to, device=device)
    assert torch.equal(y, torch.zeros(9, 5, device=device))


@pytest.mark.parametrize(
    "config", [None, dataclasses.replace(BASE, rows=1), dataclasses.replace(BASE, rows=8)], ids=config_id
)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_one_row(gen, device, dtype, tol, config):
    dense = random_sparse(1, 50, 0.5, dtype, gen)
    b = randn(50, 24, dtype=dtype, gen=gen)
    assert_close(run(dense, b, config, device=device), spmm_ref(dense, b), tol)


@pytest.mark.parametrize("config", [None, dataclasses.replace(BASE, swizzle=True)], ids=config_id)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_n_one(gen, device, dtype, tol, config):
    dense = random_sparse(21, 17, 0.3, dtype, gen)
    b = randn(17, 1, dtype=dtype, gen=gen)
    assert_close(run(dense, b, config, device=device), spmm_ref(dense, b), tol)


@pytest.mark.parametrize("n", [30, 31, 17, 66])
def test_n_not_multiple_of_vector_width(gen, device, n):
    # VEC only hints that the column offsets come in aligned runs; the loads stay masked by N, so
    # any vector width gives the right answer whatever N and B's strides are.
    dense = random_sparse(20, 25, 0.3, torch.float16, gen)
    b = randn(25, n, dtype=torch.float16, gen=gen)
    ref = spmm_ref(dense, b)
    assert_close(run(dense, b, device=device), ref, TOL[torch.float16], "default")
    for vec in (2, 4, 8):
        for block_n in (16, 32):
            cfg = dataclasses.replace(BASE, vec=vec, block_n=block_n)
            assert_close(run(dense, b, cfg, device=device), ref, TOL[torch.float16], f"vec {vec}")


def test_vec_with_row_stride_wider_than_n(gen, device):
    # B is the first 30 columns of a 32-wide matrix: rows aligned to 4 though N is not.
    dense = random_sparse(20, 25, 0.3, torch.float32, gen)
    wide = randn(25, 32, dtype=torch.float32, gen=gen)
    b = wide.to(device)[:, :30]
    cfg = dataclasses.replace(BASE, vec=4, block_n=16)
    y = stuning.spmm(CSRMatrix.from_dense(dense.to(device)), b, config=cfg)
    assert_close(y, spmm_ref(dense, wide[:, :30]), TOL[torch.float32])


@pytest.mark.parametrize("nnz_step", [4, 8, 16, 64, 128])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_rows_longer_and_shorter_than_nnz_step(gen, device, dtype, tol, nnz_step):
    # Row lengths from 0 to K = 70: several steps for short steps; one or two, mostly masked, for
    # the long ones.
    lengths = torch.randint(0, 71, (24,), generator=gen)
    lengths[3], lengths[10] = 70, 0
    dense = sparse_from_lengths(lengths, 70, dtype, gen)
    b = randn(70, 20, dtype=dtype, gen=gen)
    for swizzle, prefetch in ((False, False), (True, False), (False, True)):
        cfg = dataclasses.replace(BASE, nnz_step=nnz_step, swizzle=swizzle, prefetch=prefetch)
        assert_close(run(dense, b, cfg, device=device), spmm_ref(dense, b), tol,
                     f"swizzle {swizzle} prefetch {prefetch}")


@pytest.mark.parametrize("rows,nnz_step", [(1, 4), (4, 8), (8, 16)])
def test_prefetch_matches_the_plain_loop(gen, device, rows, nnz_step):
    # The same products summed in the same order, only loaded earlier: bit-identical outputs, also
    # with empty rows and rows that end mid-step.
    dense = skewed_sparse(41, 53, 11, torch.float32, gen, cv=0.6, empty_rows=6)
    b = randn(53, 20, dtype=torch.float32, gen=gen)
    cfg = dataclasses.replace(BASE, rows=rows, nnz_step=nnz_step)
    y0 = run(dense, b, cfg, device=device)
    y1 = run(dense, b, dataclasses.replace(cfg, prefetch=True), device=device)
    assert torch.equal(y0, y1)
    assert_close(y1, spmm_ref(dense, b), TOL[torch.float32])


@pytest.mark.parametrize("n", [1, 16, 32, 33, 128])
def test_long_steps_only_at_decode_widths_and_for_long_rows(n):
    long = SpMMProblem(768, 3072, n, 768 * 300, torch.float16)
    long_rows = {c.nnz_step for c in spmm_kernel.config_space(long)}
    short_rows = {c.nnz_step for c in spmm_kernel.config_space(SpMMProblem(768, 3072, n, 768 * 12, torch.float16))}
    decode = n <= spmm_kernel.LONG_STEP_MAX_N
    assert long_rows == ({8, 16, 32, 64, 128} if decode else {8, 16, 32})
    assert max(short_rows) <= 64  # no step more than 4x the mean row (12) rounded up to a power of two
    assert {c.nnz_step for c in spmm_sell.config_space(long)} == long_rows


@pytest.mark.parametrize("n", [1, 16, 32, 33, 128])
def test_csr_configs_prefetch_exactly_at_decode_widths(n):
    problem = SpMMProblem(512, 512, n, 512 * 20, torch.float16)
    wanted = n <= spmm_kernel.PREFETCH_MAX_N
    space = spmm_kernel.config_space(problem)
    assert space and {c.prefetch for c in space} == {wanted}
    assert spmm_kernel.heuristic(problem).prefetch == wanted
    # A stored config follows the rule of the problem it is used for, whichever it was tuned at.
    for stored in (BASE, dataclasses.replace(BASE, prefetch=True)):
        assert spmm_kernel.repair(stored, problem).prefetch == wanted
    sell = dataclasses.replace(BASE, kernel="sell")
    assert not spmm_kernel.repair(sell, problem).prefetch


def test_prefetch_is_a_csr_option():
    with pytest.raises(ValueError, match="prefetch"):
        SpMMConfig(kernel="sell", prefetch=True)


@pytest.mark.parametrize("rows", [1, 4, 16])
def test_swizzle_matches_in_order(gen, device, rows):
    # Each row is reduced in the same order whichever program owns it: bit-identical outputs.
    dense = skewed_sparse(50, 40, 10, torch.float32, gen, cv=0.5, empty_rows=5)
    b = randn(40, 24, dtype=torch.float32, gen=gen)
    cfg = dataclasses.replace(BASE, rows=rows)
    y0 = run(dense, b, dataclasses.replace(cfg, swizzle=False), device=device)
    y1 = run(dense, b, dataclasses.replace(cfg, swizzle=True), device=device)
    assert torch.equal(y0, y1)
    assert_close(y0, spmm_ref(dense, b), TOL[torch.float32])


@pytest.mark.parametrize(
    "pad_to,config",
    [
        (4, dataclasses.replace(BASE, vec=4, nnz_step=4)),
        (4, dataclasses.replace(BASE, vec=4, nnz_step=16, swizzle=True)),
        (8, dataclasses.replace(BASE, vec=2, nnz_step=4)),
        (16, dataclasses.replace(BASE, vec=8, nnz_step=32, block_n=32)),
        (4, dataclasses.replace(BASE, vec=4, nnz_step=8, prefetch=True)),
        (4, None),
    ],
    ids=lambda v: config_id(v) if not isinstance(v, int) else f"pad{v}",
)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_padded_csr(gen, device, dtype, tol, pad_to, config):
    dense = skewed_sparse(30, 45, 7, dtype, gen, empty_rows=4)
    b = randn(45, 32, dtype=dtype, gen=gen)
    y = run(dense, b, config, pad_to=pad_to, device=device)
    assert_close(y, spmm_ref(dense, b), tol)


@pytest.mark.parametrize("n", [20, 21])
def test_noncontiguous_b_transposed_view(gen, device, n):
    dense = random_sparse(26, 33, 0.25, torch.float32, gen)
    x = randn(n, 33, dtype=torch.float32, gen=gen)
    b = x.to(device).t()  # K x N with strides (1, K)
    assert not b.is_contiguous()
    ref = spmm_ref(dense, x.t())
    for cfg in (None, BASE, dataclasses.replace(BASE, swizzle=True), dataclasses.replace(BASE, vec=4)):
        assert_close(run(dense, b, cfg, device=device), ref, TOL[torch.float32], str(cfg))
    y = stuning.spmm(CSRMatrix.from_dense(dense.to(device)), b)
    assert_close(y, ref, TOL[torch.float32], "default config, fresh output")


@pytest.mark.parametrize("config", [BASE, dataclasses.replace(BASE, kernel="sell", rows=8)], ids=config_id)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_64_bit_offsets_of_b(gen, device, monkeypatch, dtype, tol, config):
    # B past 2**31 elements does not fit a test: the launchers are told it does not fit 32 bits,
    # and the kernels must then address the same B (a transposed view, so both strides count) in 64.
    dense = random_sparse(M, K, 0.2, dtype, gen)
    b = randn(N + 3, K, dtype=dtype, gen=gen)[:N].t()
    want = spmm_ref(dense, b)
    for module in (spmm_kernel, spmm_sell):
        monkeypatch.setattr(module, "offsets_fit_32_bits", lambda b: False)
    assert_close(run(dense, b, config, device=device), want, tol, f"64-bit offsets {config}")


def test_offsets_fit_32_bits_counts_every_stride():
    fits = spmm_kernel.offsets_fit_32_bits
    assert fits(torch.empty(2**16, 2**15 - 1, device="meta"))
    assert not fits(torch.empty(2**16, 2**15 + 1, device="meta"))
    # A column of a wide matrix: few elements, far apart.
    assert not fits(torch.empty(3, 2**30, device="meta")[:, :1])
    assert fits(torch.empty(2**31 - 1, 1, device="meta").t())
    assert not fits(torch.empty(2, 2**31, device="meta"))


@pytest.mark.parametrize("layout", ["csr", "coo"])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_torch_sparse_input(gen, device, dtype, tol, layout):
    dense = random_sparse(23, 31, 0.3, dtype, gen)
    b = randn(31, 18, dtype=dtype, gen=gen)
    d = dense.to(device)
    a = d.to_sparse_csr() if layout == "csr" else d.to_sparse()
    y = stuning.spmm(a, b.to(device), config={"rows": 2, "nnz_step": 4, "swizzle": True})
    assert_close(y, spmm_ref(dense, b), tol)


def test_config_as_dict(gen, device):
    dense = random_sparse(19, 23, 0.3, torch.float16, gen)
    b = randn(23, 40, dtype=torch.float16, gen=gen)
    cfg = {
        "rows": 8,
        "nnz_step": 4,
        "block_n": 32,
        "vec": 8,
        "swizzle": True,
        "num_warps": 2,
        "num_stages": 1,
    }
    y = run(dense, b, cfg, device=device)
    assert_close(y, spmm_ref(dense, b), TOL[torch.float16])
    assert torch.equal(y, run(dense, b, SpMMConfig(**cfg), device=device))


def test_noncontiguous_out(gen, device):
    dense = random_sparse(15, 12, 0.4, torch.float32, gen)
    b = randn(12, 9, dtype=torch.float32, gen=gen).to(device)
    out = torch.full((9, 15), float("nan"), device=device).t()
    y = stuning.spmm(CSRMatrix.from_dense(dense.to(device)), b, config=BASE, out=out)
    assert y is out
    assert_close(out, spmm_ref(dense, b), TOL[torch.float32])


def test_fp16_accumulates_in_fp32(device):
    # Partial sums of 120000 overflow fp16; the final 60000 does not.
    dense = torch.tensor([[200.0, 200.0, -200.0]], dtype=torch.float16)
    b = torch.full((3, 16), 300.0, dtype=torch.float16)
    y = run(dense, b, dataclasses.replace(BASE, nnz_step=4), device=device)
    assert torch.equal(y, torch.full((1, 16), 60000.0, dtype=torch.float16, device=device))


def test_deterministic(gen, device):
    dense = skewed_sparse(40, 30, 8, torch.bfloat16, gen)
    b = randn(30, 20, dtype=torch.bfloat16, gen=gen)
    assert torch.equal(run(dense, b, device=device), run(dense, b, device=device))


@pytest.mark.parametrize("shape", [(0, 5, 4), (6, 0, 4), (6, 5, 0)])
def test_empty_dimensions(device, shape):
    m, k, n = shape
    a = CSRMatrix.from_dense(torch.ones(m, k, device=device))
    y = stuning.spmm(a, torch.ones(k, n, device=device))
    assert y.shape == (m, n)
    assert torch.equal(y, torch.zeros(m, n, device=device))


# ---------------------------------------------------------------------------------------- errors
@pytest.fixture
def a16(device):
    return CSRMatrix.from_dense(torch.eye(8, dtype=torch.float16, device=device))


def test_error_wrong_inner_dimension(a16, device):
    with pytest.raises(ValueError, match="A is 8 x 8 but B has 7 rows"):
        stuning.spmm(a16, torch.ones(7, 4, dtype=torch.float16, device=device))


def test_error_b_not_2d(a16, device):
    with pytest.raises(ValueError, match="must be 2-D"):
        stuning.spmm(a16, torch.ones(8, dtype=torch.float16, device=device))


def test_error_dtype_mismatch(a16, device):
    with pytest.raises(TypeError, match="A is torch.float16 but B is torch.float32"):
        stuning.spmm(a16, torch.ones(8, 4, device=device))


def test_error_float64(device):
    a = CSRMatrix.from_dense(torch.eye(8, dtype=torch.float64, device=device))
    with pytest.raises(TypeError, match="float64 is not supported"):
        stuning.spmm(a, torch.ones(8, 4, dtype=torch.float64, device=device))


def test_error_dense_a(device):
    with pytest.raises(TypeError, match="got a dense tensor"):
        stuning.spmm(torch.eye(8, device=device), torch.ones(8, 4, device=device))
    with pytest.raises(TypeError, match="CSRMatrix"):
        stuning.spmm([[1.0]], torch.ones(1, 4, device=device))


def test_error_sparse_b(a16, device):
    with pytest.raises(TypeError, match="dense"):
        stuning.spmm(a16, torch.eye(8, dtype=torch.float16, device=device).to_sparse())


def test_error_unknown_config_field(a16, device):
    with pytest.raises(ValueError, match=r"unknown SpMMConfig fields \['block_m'\]"):
        stuning.spmm(a16, torch.ones(8, 4, dtype=torch.float16, device=device), config={"block_m": 32})


def test_error_config_type(a16, device):
    with pytest.raises(TypeError, match="config must be a SpMMConfig"):
        stuning.spmm(a16, torch.ones(8, 4, dtype=torch.float16, device=device), config=(4, 8))


def test_error_bad_out(a16, device):
    b = torch.ones(8, 4, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="out must be"):
        stuning.spmm(a16, b, out=torch.empty(8, 5, dtype=torch.float16, device=device))
    with pytest.raises(ValueError, match="out must be"):
        stuning.spmm(a16, b, out=torch.empty(8, 4, device=device))


def test_error_swizzle_without_row_order(a16, device):
    b = torch.ones(8, 4, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="swizzle needs row_order"):
        spmm_kernel.spmm(a16.crow, a16.col, a16.values, b, m=8, config=dataclasses.replace(BASE, swizzle=True))


def test_a_transposed_b_is_its_own_tuning_problem(gen, device, monkeypatch):
    from stuning.ops.selection import SELECTOR
    from stuning.tuning.features import spmm_features
    from stuning.tuning.session import key_for

    dense = random_sparse(24, 40, 0.3, torch.float32, gen)
    a = CSRMatrix.from_dense(dense.to(device))
    plain, transposed = key_for(spmm_features(a, 8)), key_for(spmm_features(a, 8, b_transposed=True))
    assert plain != transposed and "bt=1" in transposed
    keys = []
    real = SELECTOR.choose
    monkeypatch.setattr(SELECTOR, "choose", lambda features, key: keys.append(key) or real(features, key))
    x = randn(8, 40, dtype=torch.float32, gen=gen).to(device)
    for b in (x.t(), x.t().contiguous()):
        assert_close(stuning.spmm(a, b), spmm_ref(dense, x.t().cpu()), TOL[torch.float32])
    assert keys == [transposed, plain]
