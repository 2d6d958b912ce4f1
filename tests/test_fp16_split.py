"""fp32 SpMM on the fp16 tensor cores: the weights' fp16 parts (``stuning.formats.scatter.fp16_parts``),
X's split (``stuning.kernels.fp16_split``, in the interpreter here) and the product they make.

On the CPU the product of the parts is taken in float64, which is what the scatter kernel computes
on the GPU up to its fp32 sums: it must match A @ X to fp32's accuracy, whatever the rows' and
columns' ranges. The ``gpu`` tests run the scatter kernel on fp32 (``test_spmm_scatter.py`` runs
its shapes and configs on every dtype).
"""

from __future__ import annotations

import pytest
import torch
from naive import assert_close, randn, random_sparse, rel_err, spmm_ref
from stuning.kernels import fp16_split, spmm_scatter
from stuning.kernels import spmm as spmm_kernel
from stuning.kernels.fp16_split import split_x
from stuning.kernels.target import H100_BUDGET

import stuning
from stuning import CSRMatrix
from stuning.formats.scatter import LO_SCALE, PARTS, ScatterTiles, fp16_parts
from stuning.tuning.cost_model.spmm import scatter_terms
from stuning.tuning.device import spec_for
from stuning.tuning.features import ProblemFeatures


def parts_product(a: CSRMatrix, x: torch.Tensor) -> torch.Tensor:
    """A @ X from the fp16 parts of both, in float64: the scatter kernel's product and epilogue."""
    parts, row_factor = fp16_parts(a)
    stack, col_factor = split_x(x, LO_SCALE)
    assert stack.dtype == torch.float16 and stack.shape == (PARTS * x.shape[0], x.shape[1])
    return (parts.to_dense().double() @ stack.double()) * row_factor.double()[:, None] * col_factor.double()[None, :]


def ranged(m: int, k: int, n: int, gen: torch.Generator, density: float = 0.3):
    """An fp32 A (sparse, ``density`` of it kept) and a dense X whose rows and columns span fp32's
    range: rows of A at 1e-30 and 3e4, columns of X at 1e5 and 1e-7, a zero row and a zero column."""
    dense = random_sparse(m, k, density, torch.float32, gen)
    dense[1] *= 1e-30
    dense[2] *= 3e4
    dense[3] = 0
    x = randn(k, n, dtype=torch.float32, gen=gen)
    x[:, 1] *= 1e5
    x[:, 2] *= 1e-7
    x[:, 3] = 0
    return dense, x


@pytest.mark.parametrize("m,k,n", [(37, 100, 24), (64, 333, 5), (5, 7, 130)])
@pytest.mark.parametrize("x_kmajor", [False, True], ids=["x", "x^T"])
def test_parts_multiply_to_fp32_accuracy(gen, m, k, n, x_kmajor):
    dense, x = ranged(m, k, n, gen)
    if x_kmajor:
        x = x.t().contiguous().t()  # K contiguous: a linear layer's input
    a = CSRMatrix.from_dense(dense, pad_to=4)
    y = parts_product(a, x)
    ref = spmm_ref(dense, x)
    # Per row and column: every one, tiny or huge, to about 2^-22 of its terms' magnitudes.
    bound = dense.double().abs() @ x.double().abs()
    assert float(((y - ref).abs() / bound.clamp_min(1e-300)).max()) < 4e-7
    assert rel_err(y, ref) < 1e-6
    assert y[3].abs().max() == 0 and y[:, 3].abs().max() == 0


def test_split_keeps_x_orientation_and_tma_alignment(gen):
    x = randn(50, 13, dtype=torch.float32, gen=gen)
    stack, _ = split_x(x, LO_SCALE)
    assert stack.stride(1) == 1 and stack.stride(0) % 8 == 0
    stack_t, _ = split_x(x.t().contiguous().t(), LO_SCALE)
    assert stack_t.stride(0) == 1 and stack_t.stride(1) % 8 == 0
    assert torch.equal(stack, stack_t)
    # The parts: 2^11 hi, lo, hi, and hi + lo / 2^11 is X (scaled) to 2^-22.
    hi, lo = stack[100:].float(), stack[50:100].float()
    assert torch.equal(stack[:50].float(), hi * LO_SCALE)
    _, col_factor = split_x(x, LO_SCALE)
    back = (hi + lo / LO_SCALE) * col_factor[None, :]
    assert float(((back - x).abs() / x.abs().clamp_min(1e-30)).max()) < 2**-21


@pytest.mark.parametrize("a_mcontig", [False, True], ids=["a", "a^T-view"])
def test_left_hand_stack_pairs_with_the_right_hand_one(gen, a_mcontig):
    """The tiled SDDMM's operands: A (M x K) through its transpose as [A_hi | A_hi | A_lo] (rows
    scaled), B as [2^11 B_hi ; B_lo ; B_hi] (columns scaled); their product, scaled back, is A @ B to
    about 2^-22 of its terms, whatever the rows' and columns' ranges."""
    m, k, n = 21, 90, 17
    a, b = ranged(m, k, n, gen, density=1.0)
    if a_mcontig:
        a = a.t().contiguous().t()  # a weight gradient's dY^T
    a_stack, row_factor = split_x(a.t(), lhs=True)
    b_stack, col_factor = split_x(b)
    image = a_stack.t()
    assert image.shape == (m, PARTS * k) and image.dtype == torch.float16
    hi, lo = image[:, :k].float(), image[:, 2 * k:].float()
    assert torch.equal(image[:, k:2 * k].float(), hi)  # no 2^11 on the left: the right's first block has it
    assert float(((hi + lo / LO_SCALE) * row_factor[:, None] - a).abs().max()) <= 2**-21 * float(a.abs().max())
    y = (image.double() @ b_stack.double()) * row_factor.double()[:, None] * col_factor.double()[None, :] / LO_SCALE
    ref = a.double() @ b.double()
    bound = a.double().abs() @ b.double().abs()
    assert float(((y - ref).abs() / bound.clamp_min(1e-300)).max()) < 4e-7
    assert y[3].abs().max() == 0


def test_split_rejects_what_it_cannot_split():
    with pytest.raises(TypeError, match="fp32"):
        split_x(torch.zeros(4, 4, dtype=torch.float16), LO_SCALE)


def test_a_non_finite_column_stays_in_its_column(gen):
    """inf in X: its column comes out non-finite, as from a dense product (the tiles multiply their
    zeros too), and the other columns are untouched by its scale."""
    dense = random_sparse(16, 40, 0.5, torch.float32, gen)
    x = randn(40, 8, dtype=torch.float32, gen=gen)
    x[5, 2] = float("inf")
    y = parts_product(CSRMatrix.from_dense(dense), x)
    assert not torch.isfinite(y[:, 2]).any()
    finite = torch.ones(8, dtype=torch.bool)
    finite[2] = False
    assert_close(y[:, finite], spmm_ref(dense, x)[:, finite], 1e-6, "the other columns")


def test_fp32_tiles_hold_the_parts(gen):
    dense = random_sparse(70, 150, 0.2, torch.float32, gen)
    a = CSRMatrix.from_dense(dense, pad_to=4)
    tiles = ScatterTiles.from_csr(a, 64, 64)
    parts, factor = fp16_parts(a)
    assert tiles.shape == (70, 150) and tiles.tile_k == 450 and tiles.parts == PARTS
    assert PARTS == fp16_split.PARTS, "the format's blocks must be the split's"
    assert LO_SCALE == fp16_split.LO_SCALE, "A's lo parts and X's are scaled alike"
    assert tiles.dtype == torch.float32 and tiles.lo_scale == LO_SCALE and tiles.row_factor is factor
    assert torch.equal(tiles.to_dense(), parts.to_dense())
    assert tiles.tile_ptr.numel() == 2 * 8 + 1  # two bands, ceil(450 / 64) K tiles each
    assert ScatterTiles.from_csr(a, 64, 64) is tiles and fp16_parts(a)[0] is parts


def test_fp32_space_on_hopper_reads_the_tripled_k(monkeypatch):
    monkeypatch.setattr(spmm_scatter, "available", lambda: True)
    problem = spmm_kernel.SpMMProblem(4096, 100, 128, 80_000, torch.float32)
    space = spmm_scatter.config_space(problem, H100_BUDGET)
    assert space and all(c.kernel == "scatter" for c in space)
    # 300 of K: four splits of 64 fit, not of 128 (eight of neither).
    assert {(c.nnz_step, c.split_k) for c in space if c.split_k > 2} == {(64, 4)}


def test_cost_model_prices_fp32_as_three_fp16_products():
    spec = spec_for("NVIDIA H200")
    v = {"m": 4096, "k": 4096, "n": 2048, "nnz": 3_355_443, "density": 0.2, "row_mean": 819.2,
         "row_cv": 0.03, "row_max": 900}
    cfg = spmm_kernel.SpMMConfig(128, 64, 256, 1, False, 8, 4, "scatter")
    half = scatter_terms(ProblemFeatures("spmm", "float16", v), cfg, spec)
    single = scatter_terms(ProblemFeatures("spmm", "float32", v), cfg, spec)
    assert single.compute_us == pytest.approx(3 * half.compute_us, rel=0.01)
    assert single.chain_us > 2.5 * half.chain_us and single.mem_us > half.mem_us


# ---------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_fp32_scatter_matches_sgemm_accuracy_at_depth(device_gen):
    """K = 4096 (12288 deep in parts) on one split: the MMA's sums are added out every FLUSH_K, so
    the error stays near SGEMM's (unflushed it was 2e-5)."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0) \
            or not spmm_scatter.available():
        pytest.skip("the scatter kernel needs an sm_90 GPU and Triton's Gluon")
    dense = random_sparse(512, 4096, 0.2, torch.float32, device_gen)
    x = randn(4096, 128, dtype=torch.float32, gen=device_gen)
    a = CSRMatrix.from_dense(dense, pad_to=4)
    ref = spmm_ref(dense, x)
    sgemm = rel_err(dense @ x, ref)  # TF32 is off unless a user turns it on
    for cfg in (spmm_kernel.SpMMConfig(64, 64, 128, 1, False, 4, 4, "scatter"),
                spmm_kernel.SpMMConfig(128, 128, 128, 1, False, 8, 3, "scatter")):
        y = stuning.spmm(a, x, config=cfg)
        assert rel_err(y, ref) < max(4 * sgemm, 1e-6), (cfg, rel_err(y, ref), sgemm)

