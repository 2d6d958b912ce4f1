"""2:4 SpMM through Triton's interpreter (or the GPU) on small shapes, against a float64 reference."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from naive import (
    HALF_DTYPES,
    TOL,
    assert_close,
    config_id,
    config_params,
    dtype_tol_params,
    randn,
    random_24,
    sample_configs,
    semi24_ref,
)
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels.semi24 import Semi24Config, Semi24Problem

import stuning
from stuning import Semi24Matrix

DTYPES = HALF_DTYPES
DTYPE_TOL = dtype_tol_params(DTYPES)

# M not a multiple of 16/32/64, K = 264 not a multiple of any BLOCK_K (and room for split-K).
M, K, N = 40, 264, 24
PROBLEM = Semi24Problem(M, K, N, torch.float16)
SPACE = semi24_kernel.config_space(PROBLEM)
CONFIGS = config_params(sample_configs(SPACE, 6, seed=3), semi24_kernel.heuristic(PROBLEM))

BASE = Semi24Config(block_m=16, block_n=16, block_k=64, group_m=1, split_k=1, num_warps=2, num_stages=2)


def run(dense, x, config=None, device="cpu", *, pad=False):
    w = Semi24Matrix.from_dense(dense.to(device), pad=pad)
    y = stuning.semi24_mm(w, x.to(device), config=config)
    assert y.shape == (dense.shape[0], x.shape[1]) and y.dtype == x.dtype
    return y


# --------------------------------------------------------------------------------------- configs
def test_config_space_is_valid():
    assert SPACE
    for cfg in SPACE:
        assert cfg.block_k >= 64 and cfg.block_m >= 16 and cfg.block_n >= 16  # tl.dot tiles >= 16
        assert cfg.split_k == 1 or cfg.split_k * cfg.block_k <= K
    assert any(c.split_k > 1 for c in SPACE)


def test_repair_keeps_the_space_and_refuses_what_it_dropped():
    problem = semi24_kernel.Semi24Problem(4096, 4096, 128, torch.float16)
    space = semi24_kernel.config_space(problem)
    assert all(semi24_kernel.repair(c, problem) == c for c in space)
    # Tuned for the kernel before its rewrite: Triton 3.6 cannot compile it now.
    with pytest.raises(ValueError, match="not in the kernel's config space: Triton 3.6"):
        semi24_kernel.repair(semi24_kernel.Semi24Config(128, 64, 64, 1, 1, 4, 2), problem)
    with pytest.raises(ValueError, match="registers"):
        semi24_kernel.repair(semi24_kernel.Semi24Config(256, 64, 256, 8, 1, 4, 2), problem)


def test_hopper_configs_only_where_that_kernel_runs(monkeypatch):
    from stuning.kernels import semi24_hopper
    from stuning.kernels.target import H100_BUDGET

    ampere = dataclasses.replace(H100_BUDGET, compute_capability=(8, 0))
    decode = Semi24Problem(4096, 4096, 16, torch.float16)
    # Offered only with the Triton release its Gluon code was checked on.
    monkeypatch.setattr(semi24_hopper, "available", lambda: False)
    assert not any(c.kernel == "hopper" for c in semi24_kernel.config_space(decode, H100_BUDGET))
    monkeypatch.setattr(semi24_hopper, "available", lambda: True)
    hopper = [c for c in semi24_kernel.config_space(decode, H100_BUDGET) if c.kernel == "hopper"]
    assert hopper
    for cfg in hopper:
        assert cfg.block_k == semi24_hopper.BLOCK_K and (cfg.block_m, cfg.num_warps) in semi24_hopper.TILES
        assert semi24_kernel.why_excluded(cfg, 2, H100_BUDGET) is None
        assert semi24_kernel.why_excluded(cfg, 2, ampere) is not None
    assert not any(c.kernel == "hopper" for c in semi24_kernel.config_space(decode, ampere))
    # N past its measured range, or not copied in 16-byte pieces: the Triton kernel's configs only.
    for n in (24, 128):
        problem = Semi24Problem(4096, 4096, n, torch.float16)
        assert not any(c.kernel == "hopper" for c in semi24_kernel.config_space(problem, H100_BUDGET))


def test_hopper_config_elsewhere_runs_the_triton_kernel_on_its_tiles(gen, device):
    from stuning.kernels import semi24_hopper

    dense = random_24(M, K, torch.float16, gen)
    x = randn(K, 16, dtype=torch.float16, gen=gen)
    cfg = Semi24Config(64, 16, 64, 1, 2, 4, 2, kernel="hopper")
    if device == "cpu":
        assert not semi24_hopper.takes(dense, x)
    assert_close(run(dense, x, cfg, device), semi24_ref(dense, x), TOL[torch.float16], config_id(cfg))
    # Tuned for a neighbour at N = 16, asked for at N = 24 (not 16-byte pieces): the Triton kernel.
    repaired = semi24_kernel.repair(cfg, Semi24Problem(M, K, 24, torch.float16))
    assert repaired == dataclasses.replace(cfg, kernel="triton")
    if device == "cpu":
        # Tiles the Triton kernel does not compile (Triton 3.6): refused with the reason, not run.
        with pytest.raises(ValueError, match="Hopper kernel cannot run this X here.*Triton 3.6"):
            run(dense, x, Semi24Config(128, 64, 64, 1, 1, 4, 2, kernel="hopper"), device)


def test_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="unknown kernel 'cusparselt'"):
        Semi24Config(kernel="cusparselt")


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_sampled_configs(gen, device, dtype, tol, config):
    dense = random_24(M, K, dtype, gen)
    x = randn(K, N, dtype=dtype, gen=gen)
    assert_close(run(dense, x, config, device), semi24_ref(dense, x), tol, f"semi24 {config}")


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
@pytest.mark.parametrize(
    "shape",
    [(1, 64, 7), (33, 4, 5), (17, 96, 1), (70, 132, 40), (5, 300, 3)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_odd_shapes(gen, device, dtype, tol, shape):
    m, k, n = shape
    dense = random_24(m, k, dtype, gen, partial=True)
    x = randn(k, n, dtype=dtype, gen=gen)
    assert_close(run(dense, x, None, device), semi24_ref(dense, x), tol, str(shape))


# ----------------------------------------------------------------------------------- edge cases
@pytest.mark.parametrize(
    "config",
    [
        dataclasses.replace(BASE, split_k=2),
        dataclasses.replace(BASE, split_k=4),  # 5 K tiles over 4 splits: uneven
        dataclasses.replace(BASE, split_k=8, block_k=128),  # more splits than K tiles: clamped to 3
        dataclasses.replace(BASE, split_k=2, block_m=32, block_n=32, block_k=256, group_m=8),
    ],
    ids=config_id,
)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_split_k(gen, device, dtype, tol, config):
    dense = random_24(M, K, dtype, gen)
    x = randn(K, N, dtype=dtype, gen=gen)
    assert_close(run(dense, x, config, device), semi24_ref(dense, x), tol)


@pytest.mark.parametrize(
    "config",
    [
        dataclasses.replace(BASE, block_n=16, block_k=64),  # the bank-spreading column order
        dataclasses.replace(BASE, block_n=16, block_k=256, split_k=2),  # its order over 64 groups
        dataclasses.replace(BASE, block_m=32, block_n=64, block_k=128),  # W's own order
    ],
    ids=config_id,
)
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_both_column_orders_of_the_rebuilt_tile(gen, device, dtype, tol, config):
    # The rebuilt tile's columns and X's rows are read in the same permuted order (or both in W's
    # own): a mismatch pairs values with the wrong rows of X. K = 264 leaves a ragged last step.
    assert semi24_kernel.spread_banks(config) == (config.block_n < 64)
    dense = random_24(M, K, dtype, gen)
    x = randn(K, N, dtype=dtype, gen=gen)
    assert_close(run(dense, x, config, device), semi24_ref(dense, x), tol, config_id(config))


def test_split_k_leaves_its_workspace_zero(gen, device):
    # The last split of each tile zeroes the buffer and counters the next launch relies on: launches
    # of other shapes in a row (a bias and a strided out among them) all come out right only if so.
    from stuning.kernels.split_k import split_k_workspace

    config = dataclasses.replace(BASE, split_k=4)
    for m, n, with_bias in ((40, 24, False), (57, 9, True), (40, 24, True), (16, 33, False)):
        dense = random_24(m, K, torch.float16, gen)
        x = randn(K, n, dtype=torch.float16, gen=gen)
        bias = randn(m, dtype=torch.float16, gen=gen) if with_bias else torch.zeros(m, dtype=torch.float16)
        w = Semi24Matrix.from_dense(dense.to(device))
        out_t = torch.empty((n, m), dtype=torch.float16, device=device)
        kwargs = {"bias": bias.to(device)} if with_bias else {}
        y = stuning.semi24_mm(w, x.to(device), config=config, out=out_t.t(), **kwargs)
        ref = semi24_ref(dense, x) + bias.double()[:, None]
        assert_close(y, ref, TOL[torch.float16], f"{m}x{n} bias={with_bias}")
        partial, counts = split_k_workspace(y.device, m * n, 1)  # the launches' own (device, stream)
        assert not partial.any() and not counts.any()


def test_split_k_zeroes_its_workspace_after_inf_and_nan(gen, device):
    # A non-finite sum must not stay in the workspace: the next launch would add into it.
    from stuning.kernels.split_k import split_k_workspace

    config = dataclasses.replace(BASE, split_k=4)
    dense = random_24(M, K, torch.float16, gen)
    w = Semi24Matrix.from_dense(dense.to(device))
    x = randn(K, N, dtype=torch.float16, gen=gen)
    x[3, 0], x[7, 1] = float("inf"), float("nan")
    y = stuning.semi24_mm(w, x.to(device), config=config)
    assert not torch.isfinite(y[:, :2]).all()
    partial, counts = split_k_workspace(y.device, M * N, 1)
    assert not partial.any() and not counts.any()
    x2 = randn(K, N, dtype=torch.float16, gen=gen)
    assert_close(stuning.semi24_mm(w, x2.to(device), config=config), semi24_ref(dense, x2), TOL[torch.float16])


def test_split_k_workspace_grows_and_frees_what_it_replaces(device):
    from stuning.kernels import split_k

    dev = torch.empty(0, device=device).device  # with its index, as launches key it
    small = split_k.split_k_workspace(dev, 100, 3)
    assert small[0].numel() >= 100 and small[1].numel() >= 3 and not small[0].any()
    assert split_k.split_k_workspace(dev, 50, 2)[0] is small[0]  # fits: the same one
    large = split_k.split_k_workspace(dev, 5000, 3)
    assert large[0].numel() >= 5000 and large[1].numel() >= small[1].numel()
    # Nothing captured it, so the smaller one is not kept alive beside the larger.
    assert [w.buffer for w in split_k._HELD[split_k.held_key(dev)]] == [large[0]]


@pytest.mark.parametrize("k", [70, 66, 3, 129])
@pytest.mark.parametrize("split_k", [1, 2])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_k_not_multiple_of_4_padded(gen, device, dtype, tol, k, split_k):
    dense = random_24(20, (k + 3) // 4 * 4, dtype, gen)[:, :k].contiguous()
    x = randn(k, 18, dtype=dtype, gen=gen)
    w = Semi24Matrix.from_dense(dense.to(device), pad=True)
    y = stuning.semi24_mm(w, x.to(device), config=dataclasses.replace(BASE, split_k=split_k))
    assert_close(y, semi24_ref(dense, x), tol)


@pytest.mark.parametrize(
    "config",
    [
        dataclasses.replace(BASE, block_m=16, block_n=16, group_m=8),  # 13 x 6 tiles: groups of 8 and 5
        dataclasses.replace(BASE, block_m=32, block_n=16, group_m=8),  # 7 x 6 tiles: one partial group
        dataclasses.replace(BASE, block_m=64, block_n=32, block_k=128, group_m=1),
    ],
    ids=config_id,
)
def test_grouped_ordering_many_tiles(gen, device, config):
    # M = 200 and N = 90 leave partial tiles on both edges, and the tile counts share factors with
    # GROUP_M, so a wrong program-to-tile map leaves tiles unwritten.
    dense = random_24(200, 136, torch.float16, gen, partial=True)
    x = randn(136, 90, dtype=torch.float16, gen=gen)
    assert_close(run(dense, x, config, device), semi24_ref(dense, x), TOL[torch.float16])


@pytest.mark.parametrize("n", [1, 17])
def test_one_row_and_skinny(gen, device, n):
    dense = random_24(1, 128, torch.bfloat16, gen)
    x = randn(128, n, dtype=torch.bfloat16, gen=gen)
    for cfg in (None, BASE, dataclasses.replace(BASE, split_k=2)):
        assert_close(run(dense, x, cfg, device), semi24_ref(dense, x), TOL[torch.bfloat16], str(cfg))


def test_all_zero_and_empty(device):
    w = Semi24Matrix.from_dense(torch.zeros(9, 16, dtype=torch.float16, device=device))
    x = torch.randn(16, 5, device=device).half()
    assert torch.equal(stuning.semi24_mm(w, x, config=BASE), torch.zeros(9, 5, dtype=torch.float16, device=device))
    w0 = Semi24Matrix.from_dense(torch.zeros(4, 0, dtype=torch.float16, device=device), pad=True)
    y = stuning.semi24_mm(w0, torch.zeros(0, 3, dtype=torch.float16, device=device))
    assert torch.equal(y, torch.zeros(4, 3, dtype=torch.float16, device=device))
    y = stuning.semi24_mm(w, torch.zeros(16, 0, dtype=torch.float16, device=device))
    assert y.shape == (9, 0)


def test_no_rows(device):
    w = Semi24Matrix.from_dense(torch.zeros(0, 16, dtype=torch.float16, device=device))
    assert w.values.shape == (0, 8) and w.to_dense().shape == (0, 16)
    y = stuning.semi24_mm(w, torch.ones(16, 3, dtype=torch.float16, device=device))
    assert y.shape == (0, 3)


def test_noncontiguous_x(gen, device):
    dense = random_24(30, 96, torch.float16, gen)
    xt = randn(20, 96, dtype=torch.float16, gen=gen)
    x = xt.to(device).t()
    assert not x.is_contiguous()
    for cfg in (None, BASE, dataclasses.replace(BASE, split_k=2)):
        assert_close(run(dense, x, cfg, device), semi24_ref(dense, xt.t()), TOL[torch.float16], str(cfg))


def test_a_transposed_x_is_its_own_tuning_problem(gen, device, monkeypatch):
    from stuning.ops.selection import SELECTOR
    from stuning.tuning.features import semi24_features
    from stuning.tuning.session import key_for

    plain, transposed = (key_for(semi24_features(20, 64, 8, torch.float16, b_transposed=bt)) for bt in (False, True))
    assert plain != transposed and "bt=1" in transposed
    keys = []
    real = SELECTOR.choose
    monkeypatch.setattr(SELECTOR, "choose", lambda features, key: keys.append(key) or real(features, key))
    dense = random_24(20, 64, torch.float16, gen)
    w = Semi24Matrix.from_dense(dense.to(device))
    xt = randn(8, 64, dtype=torch.float16, gen=gen)
    for x in (xt.to(device).t(), xt.t().contiguous().to(device)):
        assert_close(stuning.semi24_mm(w, x), semi24_ref(dense, xt.t()), TOL[torch.float16])
    assert keys == [transposed, plain]


def test_config_as_dict(gen, device):
    dense = random_24(20, 128, torch.float16, gen)
    x = randn(128, 24, dtype=torch.float16, gen=gen)
    cfg = {
        "block_m": 32,
        "block_n": 16,
        "block_k": 64,
        "group_m": 8,
        "split_k": 2,
        "num_warps": 4,
        "num_stages": 3,
    }
    y = run(dense, x, cfg, device)
    assert_close(y, semi24_ref(dense, x), TOL[torch.float16])
    assert torch.equal(y, run(dense, x, Semi24Config(**cfg), device))


def test_pruned_weights(gen, device):
    w_dense = randn(24, 64, dtype=torch.float16, gen=gen)
    w = Semi24Matrix.from_dense(w_dense.to(device), prune=True)
    x = randn(64, 16, dtype=torch.float16, gen=gen)
    y = stuning.semi24_mm(w, x.to(device), config=BASE)
    assert_close(y, semi24_ref(w.to_dense(), x), TOL[torch.float16])


def test_fp16_accumulates_in_fp32(device):
    dense = torch.zeros(16, 64, dtype=torch.float16)
    dense[:, 0], dense[:, 4], dense[:, 8] = 200.0, 200.0, -200.0
    x = torch.full((64, 16), 300.0, dtype=torch.float16)
    y = run(dense, x, BASE, device)
    assert torch.equal(y, torch.full((16, 16), 60000.0, dtype=torch.float16, device=device))


# ---------------------------------------------------------------------------------------- errors
@pytest.fixture
def w16(device):
    return Semi24Matrix.from_dense(torch.zeros(8, 32, dtype=torch.float16, device=device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_error_unsupported_dtype(device, dtype):
    w = Semi24Matrix.from_dense(torch.zeros(8, 32, dtype=dtype, device=device))
    with pytest.raises(TypeError, match=f"{dtype} is not supported"):
        stuning.semi24_mm(w, torch.ones(32, 4, dtype=dtype, device=device))


def test_error_dtype_mismatch(w16, device):
    with pytest.raises(TypeError, match="W is torch.float16 but X is torch.bfloat16"):
        stuning.semi24_mm(w16, torch.ones(32, 4, dtype=torch.bfloat16, device=device))


def test_error_dense_w(device):
    with pytest.raises(TypeError, match="W must be a Semi24Matrix, got Tensor"):
        stuning.semi24_mm(
            torch.zeros(8, 32, dtype=torch.float16, device=device),
            torch.ones(32, 4, dtype=torch.float16, device=device),
        )


def test_error_wrong_shapes(w16, device):
    with pytest.raises(ValueError, match="W is 8 x 32 but X has 31 rows"):
        stuning.semi24_mm(w16, torch.ones(31, 4, dtype=torch.float16, device=device))
    with pytest.raises(ValueError, match="must be 2-D"):
        stuning.semi24_mm(w16, torch.ones(32, dtype=torch.float16, device=device))


def test_error_sparse_x(w16, device):
    with pytest.raises(TypeError, match="dense"):
        stuning.semi24_mm(w16, torch.eye(32, dtype=torch.float16, device=device).to_sparse())


def test_error_unknown_config_field(w16, device):
    with pytest.raises(ValueError, match=r"unknown Semi24Config fields \['nnz_step'\]"):
        stuning.semi24_mm(w16, torch.ones(32, 4, dtype=torch.float16, device=device), config={"nnz_step": 4})
