"""The sliced-ELL SpMM kernel (Triton's interpreter or the GPU, small shapes) against a float64
reference, the dispatch of ``stuning.spmm`` on ``SpMMConfig.kernel``, and the union config space."""

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
    skewed_sparse,
    spmm_ref,
)
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels import spmm_sell as sell_kernel
from stuning.kernels.spmm import SpMMConfig, SpMMProblem

import stuning
from stuning import CSRMatrix, SlicedELLMatrix
from stuning.formats import capacity as capacity_format
from stuning.tuning.registry import family

DTYPES = ALL_DTYPES
DTYPE_TOL = dtype_tol_params(DTYPES)

M, K, MEAN_LEN = 37, 45, 9  # 37 rows: the last slice is ragged for every slice height
SELL = SpMMConfig(rows=4, nnz_step=8, block_n=16, vec=1, swizzle=True, num_warps=1, num_stages=1, kernel="sell")
SPACE = sell_kernel.config_space(SpMMProblem(M, K, 16, M * MEAN_LEN, torch.float32))
SAMPLED = sample_configs(SPACE, 3, seed=4)


def run(dense, b, config, device):
    a = CSRMatrix.from_dense(dense.to(device))
    b = b.to(device)
    out = torch.full((dense.shape[0], b.shape[1]), float("nan"), dtype=b.dtype, device=device)
    y = stuning.spmm(a, b, config=config, out=out)
    assert y is out
    return y


# --------------------------------------------------------------------------------------- kernel
@pytest.mark.parametrize("config", [pytest.param(c, id=config_id(c)) for c in [*SAMPLED, SELL]])
@pytest.mark.parametrize("n", [5, 16, 33])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_sampled_configs_odd_shapes(gen, device, dtype, tol, n, config):
    dense = skewed_sparse(M, K, MEAN_LEN, dtype, gen, cv=0.5, empty_rows=3)
    b = randn(K, n, dtype=dtype, gen=gen)
    config = spmm_kernel.repair(config, SpMMProblem(M, K, n, int((dense != 0).sum()), dtype))
    y = run(dense, b, config, device)
    assert y.dtype == dtype
    assert_close(y, spmm_ref(dense, b), tol, f"sell {config}")


@pytest.mark.parametrize("rows,step", [(2, 8), (8, 16), (32, 8), (4, 64), (1, 128)])
def test_slice_heights_and_steps(gen, device, rows, step):
    dense = skewed_sparse(M, 70, 20, torch.float32, gen, cv=0.7, empty_rows=4)  # rows of 0 to 70 entries
    b = randn(70, 24, dtype=torch.float32, gen=gen)
    for swizzle in (False, True):
        cfg = dataclasses.replace(SELL, rows=rows, nnz_step=step, block_n=16, swizzle=swizzle)
        assert_close(run(dense, b, cfg, device), spmm_ref(dense, b), TOL[torch.float32], str(cfg))


@pytest.mark.parametrize("rows,step", [(1, 8), (4, 8), (8, 16)])
@pytest.mark.parametrize("slack", [0.0, float("inf")], ids=["listed", "fixed"])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_slices_of_one_capacity_and_listed(gen, device, monkeypatch, dtype, tol, rows, step, slack):
    # Any slack pads every slice to the longest (capacity > 0; the kernel computes each slice's
    # start); none keeps each slice's own length (the kernel loads slice_ptr).
    monkeypatch.setattr(capacity_format, "FIXED_CAPACITY_SLACK", slack)
    dense = skewed_sparse(M, K, MEAN_LEN, dtype, gen, cv=0.5, empty_rows=3)
    b = randn(K, 19, dtype=dtype, gen=gen)
    for swizzle in (False, True):
        a = CSRMatrix.from_dense(dense.to(device))
        assert (SlicedELLMatrix.from_csr(a, rows, swizzle, step).capacity > 0) == (slack > 0)
        cfg = dataclasses.replace(SELL, rows=rows, nnz_step=step, block_n=16, swizzle=swizzle)
        out = torch.full((M, 19), float("nan"), dtype=dtype, device=device)
        assert_close(stuning.spmm(a, b.to(device), config=cfg, out=out), spmm_ref(dense, b), tol, str(cfg))


def test_sorted_matches_unsorted_and_csr(gen, device):
    # A whole row is reduced in the same steps whatever slice holds it (padding only adds zeros): the
    # sorted and unsorted slicings give identical bits where no row is cut (slices of 16); cut rows
    # (slices of 4) and the CSR kernel agree to rounding.
    dense = skewed_sparse(M, 40, 10, torch.float32, gen, cv=0.5, empty_rows=5)
    b = randn(40, 16, dtype=torch.float32, gen=gen)
    tall = dataclasses.replace(SELL, rows=16)
    y0 = run(dense, b, dataclasses.replace(tall, swizzle=False), device)
    y1 = run(dense, b, tall, device)
    assert torch.equal(y0, y1)
    assert SlicedELLMatrix.from_csr(CSRMatrix.from_dense(dense), SELL.rows, True, SELL.nnz_step).cut
    y_cut = run(dense, b, SELL, device)
    assert_close(y_cut, spmm_ref(dense, b), TOL[torch.float32])
    csr = dataclasses.replace(SELL, kernel="csr")
    assert_close(y1, run(dense, b, csr, device), TOL[torch.float32])
    assert (y_cut[(dense != 0).sum(1) == 0] == 0).all()  # empty rows are written, as zeros


@pytest.mark.parametrize("rows", [2, 4, 8])
@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_rows_cut_into_pieces_sum_once_with_bias(gen, device, dtype, tol, rows):
    # Lengths of cv 1.2: the longest rows hold several shares, cut into up to `rows` pieces whose
    # slots sum before the first stores (with the bias added once); N = 19 leaves a masked tail.
    dense = skewed_sparse(61, 300, 25, dtype, gen, cv=1.2, empty_rows=4)
    b = randn(300, 19, dtype=dtype, gen=gen)
    bias = randn(61, dtype=dtype, gen=gen)
    a = CSRMatrix.from_dense(dense.to(device))
    s = SlicedELLMatrix.from_csr(a, rows, True, 8)
    assert s.cut and int((s.row_ids[1:] == s.row_ids[:-1]).sum()) >= 3  # several rows in pieces
    cfg = dataclasses.replace(SELL, rows=rows, block_n=32)
    out = torch.full((61, 19), float("nan"), dtype=dtype, device=device)
    y = stuning.spmm(a, b.to(device), config=cfg, out=out, bias=bias.to(device))
    ref = spmm_ref(dense, b) + bias.double()[:, None]
    assert_close(y, ref, tol, str(cfg))


@pytest.mark.parametrize("dtype,tol", DTYPE_TOL)
def test_all_zero_one_row_and_n_one(gen, device, dtype, tol):
    zero = torch.zeros(9, 11, dtype=dtype)
    assert torch.equal(run(zero, randn(11, 5, dtype=dtype, gen=gen), SELL, device), torch.zeros(9, 5, dtype=dtype,
                                                                                               device=device))
    one = random_sparse(1, 50, 0.5, dtype, gen)
    b = randn(50, 16, dtype=dtype, gen=gen)
    assert_close(run(one, b, dataclasses.replace(SELL, rows=8), device), spmm_ref(one, b), tol)
    a = random_sparse(21, 17, 0.3, dtype, gen)
    b1 = randn(17, 1, dtype=dtype, gen=gen)
    assert_close(run(a, b1, SELL, device), spmm_ref(a, b1), tol)


def test_large_k_uses_int32_columns(gen, device):
    k = 40000
    dense = random_sparse(6, k, 0.002, torch.float32, gen)
    dense[2, k - 1] = 3.0
    b = randn(k, 16, dtype=torch.float32, gen=gen)
    a = CSRMatrix.from_dense(dense.to(device))
    y = stuning.spmm(a, b.to(device), config=SELL)
    assert SlicedELLMatrix.from_csr(a, 4, True, 8).cols.dtype == torch.int32
    assert_close(y, spmm_ref(dense, b), TOL[torch.float32])


def test_transposed_b_and_strided_out(gen, device):
    dense = random_sparse(26, 33, 0.25, torch.float32, gen)
    x = randn(20, 33, dtype=torch.float32, gen=gen)
    b = x.to(device).t()  # K x N with strides (1, K)
    out = torch.full((20, 26), float("nan"), device=device).t()
    for cfg in (SELL, dataclasses.replace(SELL, block_n=32, vec=4)):
        y = stuning.spmm(CSRMatrix.from_dense(dense.to(device)), b, config=cfg, out=out)
        assert y is out
        assert_close(out, spmm_ref(dense, x.t()), TOL[torch.float32], str(cfg))


def test_fp16_accumulates_in_fp32(device):
    dense = torch.tensor([[200.0, 200.0, -200.0]], dtype=torch.float16)
    b = torch.full((3, 16), 300.0, dtype=torch.float16)
    y = run(dense, b, SELL, device)
    assert torch.equal(y, torch.full((1, 16), 60000.0, dtype=torch.float16, device=device))


# ------------------------------------------------------------------------------------- dispatch
def test_dispatch_follows_the_config(gen, device, monkeypatch):
    dense = random_sparse(19, 23, 0.3, torch.float16, gen)
    b = randn(23, 16, dtype=torch.float16, gen=gen).to(device)
    a = CSRMatrix.from_dense(dense.to(device))
    launched = []
    for name, module in (("csr", spmm_kernel), ("sell", sell_kernel)):
        launcher = "spmm" if name == "csr" else "spmm_sell"
        real = getattr(module, launcher)
        monkeypatch.setattr(module, launcher, lambda *a, _n=name, _r=real, **kw: launched.append(_n) or _r(*a, **kw))
    ref = spmm_ref(dense, b)
    assert_close(stuning.spmm(a, b, config={**SELL.as_dict()}), ref, TOL[torch.float16])
    assert_close(stuning.spmm(a, b, config={k: v for k, v in SELL.as_dict().items() if k != "kernel"}), ref,
                 TOL[torch.float16])
    assert launched == ["sell", "csr"]  # a dict without `kernel` (an old database entry) is a CSR config
    assert SlicedELLMatrix.cache_key(4, True, 8) in a.cache  # built once, kept on the weight


def test_launchers_refuse_the_other_kernels_config(device):
    a = CSRMatrix.from_dense(torch.eye(8, device=device))
    b = torch.ones(8, 4, device=device)
    with pytest.raises(ValueError, match="this launcher runs 'csr' configs"):
        spmm_kernel.spmm(a.crow, a.col, a.values, b, m=8, config=SELL)
    s = SlicedELLMatrix.from_csr(a, 4, True, 8)
    args = (s.values, s.cols, s.slice_ptr, s.row_ids, b)
    with pytest.raises(ValueError, match="not 'sell'"):
        sell_kernel.spmm_sell(*args, m=8, slice_rows=4, step=8, config=dataclasses.replace(SELL, kernel="csr"))
    with pytest.raises(ValueError, match="does not match the format"):
        sell_kernel.spmm_sell(*args, m=8, slice_rows=4, step=8, config=dataclasses.replace(SELL, rows=8))
    with pytest.raises(ValueError, match="does not match the format"):
        sell_kernel.spmm_sell(*args, m=8, slice_rows=4, step=8, config=dataclasses.replace(SELL, nnz_step=16))
    with pytest.raises(ValueError, match="a capacity of 12 entries a slice does not fit"):
        sell_kernel.spmm_sell(*args, m=8, slice_rows=4, step=8, config=SELL, capacity=12)
    with pytest.raises(ValueError, match="unknown kernel 'ell'"):
        stuning.spmm(a, b, config={**SELL.as_dict(), "kernel": "ell"})


# ------------------------------------------------------------------------------- config space
def test_union_config_space():
    f_problem = SpMMProblem(4096, 4096, 16, 4096 * 410, torch.float16)
    csr, sell = spmm_kernel.config_space(f_problem), sell_kernel.config_space(f_problem)
    assert {c.kernel for c in csr} == {"csr"} and {c.kernel for c in sell} == {"sell"}
    assert {c.rows for c in sell} == {2, 4, 8, 16, 32} and {c.swizzle for c in sell} == {False, True}
    from stuning.tuning.features import synthetic_spmm_features

    features = synthetic_spmm_features(4096, 4096, 16, 0.1, "float16")
    space = family("spmm").space(features)
    # Both kernels, nothing else, no config twice; on a Hopper GPU the scatter kernel's configs too.
    from stuning.kernels import spmm_scatter

    assert space == csr + sell + spmm_scatter.config_space(f_problem)
    assert len(set(space)) == len(space)


def test_database_configs_load_with_and_without_kernel():
    fam = family("spmm")
    old = {"rows": 4, "nnz_step": 16, "block_n": 64, "vec": 4, "swizzle": True, "num_warps": 4, "num_stages": 1}
    assert fam.config_from_dict(old).kernel == "csr"
    assert fam.config_from_dict({**old, "kernel": "sell"}) == SpMMConfig(**old, kernel="sell")
    assert "kernel" in fam.param_keys()
    with pytest.raises(ValueError, match="unknown kernel"):
        fam.config_from_dict({**old, "kernel": "bsr"})


def test_repair_keeps_the_kernel():
    tuned = dataclasses.replace(SELL, rows=32, block_n=128, vec=4)
    fixed = spmm_kernel.repair(tuned, SpMMProblem(10, 64, 30, 100, torch.float16))
    assert fixed.kernel == "sell" and fixed.rows == 16 and fixed.block_n == 32 and fixed.vec == 2


# --------------------------------------------------------------------------------------- tuner
def faster_kernel_is(kernel: str):
    """A synthetic timer under which every config of ``kernel`` beats every config of the other."""
    from stuning.tuning.synthetic_timer import synthetic_time_us

    return lambda features, config: synthetic_time_us(features, config) + (0.0 if config.kernel == kernel else 200.0)


def sell_faster(features, config):  # STUNING_SYNTHETIC_TIMER=test_spmm_sell:sell_faster
    return faster_kernel_is("sell")(features, config)


def csr_faster(features, config):
    return faster_kernel_is("csr")(features, config)


@pytest.mark.parametrize("kernel", ["sell", "csr"])
def test_tuner_picks_the_faster_kernel_and_the_op_runs_it(tmp_path, monkeypatch, gen, kernel):
    """model+optuna times both kernels (the model keeps both among its survivors), stores the faster,
    and ``stuning.spmm`` with no config then runs that kernel on the same matrix."""
    from stuning.ops.selection import SELECTOR
    from stuning.suite import SpMMCase
    from stuning.tuning.driver import tune_case
    from stuning.tuning.problems import build_problem

    monkeypatch.setenv("STUNING_DB_DIR", str(tmp_path))
    monkeypatch.setenv("STUNING_SYNTHETIC_TIMER", f"test_spmm_sell:{kernel}_faster")
    SELECTOR.reset()
    try:
        case = SpMMCase(64, 96, 16, 0.9, 0.0, "fp16")
        outcome, key = tune_case(case, strategy="model+optuna")
        assert outcome.best_config.kernel == kernel
        assert {c["config"]["kernel"] for c in outcome.top_k} >= {kernel}
        # Every other kernel the search timed is kept at its fastest, for the cost model's refits.
        losers = set(outcome.kernels) - {c["config"]["kernel"] for c in outcome.top_k}
        assert losers and {c["config"]["kernel"] for c in outcome.other_kernels} == losers
        assert min(c["time_us"] for c in outcome.other_kernels) > max(c["time_us"] for c in outcome.top_k) + 100
        stored = SELECTOR.db().entries()[key]
        assert [t.time_us for t in stored.other_kernels] == sorted(c["time_us"] for c in outcome.other_kernels)
        problem = build_problem(case)  # the same seed: the matrix that was tuned
        a, b = problem.inputs["a"], problem.inputs["b"]
        y = stuning.spmm(a, b)
        assert (SlicedELLMatrix.cache_key(outcome.best_config.rows, outcome.best_config.swizzle,
                                          outcome.best_config.nnz_step) in a.cache) == (kernel == "sell")
        assert_close(y, problem.reference, TOL[torch.float16])
        assert_close(problem.run(outcome.best_config), problem.reference, TOL[torch.float16])  # the tuner's runner
    finally:
        SELECTOR.reset()
