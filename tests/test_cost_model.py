"""Sanity properties of the analytic cost models and of the fitted coefficients."""

from __future__ import annotations

import dataclasses
import random

import pytest
from stuning.kernels.semi24 import shared_memory_bytes

from stuning.tuning.cost_model import Coefficients, CostModel, fit_coefficients
from stuning.tuning.device import DEVICES, spec_for
from stuning.tuning.features import semi24_features, synthetic_sddmm_features, synthetic_spmm_features
from stuning.tuning.registry import budget_of, family

H100 = spec_for("NVIDIA H100 80GB HBM3")


def _features(op, scale=1.0, n=128, density=0.1):
    if op == "spmm":
        return synthetic_spmm_features(int(2048 * scale), 2048, n, density, "float16", row_cv=0.3)
    if op == "sddmm":
        return synthetic_sddmm_features(int(2048 * scale), 2048, n, density, "float16", row_cv=0.3)
    return semi24_features(int(2048 * scale), 2048, n, "float16")


def _sample(configs, k=40, seed=0):
    return random.Random(seed).sample(configs, min(k, len(configs)))


@pytest.mark.parametrize("op", ["spmm", "sddmm", "semi24"])
def test_more_work_never_predicted_faster(op):
    model = CostModel(H100)
    fam = family(op)
    small = _features(op, n=128)
    for config in _sample(fam.space(small, budget_of(H100))):
        t_small = model.predict_us(small, config)
        for bigger in (_features(op, scale=2.0, n=128), _features(op, n=512)):
            assert model.predict_us(bigger, config) >= t_small * 0.999, (config, bigger.values)
        if op != "semi24":
            denser = _features(op, n=128, density=0.3)
            assert model.predict_us(denser, config) >= t_small * 0.999


@pytest.mark.parametrize("op", ["spmm", "sddmm", "semi24"])
def test_predictions_positive_and_ranking_sorted(op):
    model = CostModel(H100)
    f = _features(op)
    ranked = model.rank(f, family(op).space(f, budget_of(H100)))
    times = [t for _, t in ranked]
    assert all(t > 0 for t in times)
    assert times == sorted(times)


def test_space_respects_the_device_budget():
    small_smem = dataclasses.replace(H100, smem_per_sm_kb=64)
    f = _features("semi24", n=2048)
    big = family("semi24").space(f, budget_of(H100))
    small = family("semi24").space(f, budget_of(small_smem))
    assert 0 < len(small) < len(big)
    limit = budget_of(small_smem).shared_mem_per_block
    assert all(shared_memory_bytes(c, 2) <= limit for c in small)
    assert any(shared_memory_bytes(c, 2) > limit for c in big)


def test_invalid_configs_are_rejected_by_the_spaces():
    f = synthetic_spmm_features(100, 64, 49, 0.2, "float16")
    space = family("spmm").space(f)
    assert space
    assert all(49 % c.vec == 0 for c in space)  # odd N: no vector width that does not divide it
    assert all(c.block_n <= 64 for c in space)
    tiny = semi24_features(16, 64, 8, "float16")
    assert all(c.block_m <= 16 and c.block_n <= 16 and c.block_k >= 64 for c in family("semi24").space(tiny))


def test_swizzle_predicted_to_help_skewed_rows():
    model = CostModel(H100)
    f = synthetic_spmm_features(4096, 4096, 64, 0.05, "float16", row_cv=0.5)
    base = family("spmm").default(f)
    on = model.predict_us(f, dataclasses.replace(base, swizzle=True))
    off = model.predict_us(f, dataclasses.replace(base, swizzle=False))
    assert on < off


def test_fit_recovers_a_known_model_and_keeps_exponents_non_negative():
    model = CostModel(H100)
    f = _features("spmm")
    configs = _sample(family("spmm").space(f), k=200, seed=1)
    truth = Coefficients((0.4, 0.8, 1.5, 0.5))
    rng = random.Random(3)
    samples = [(f, c, truth.predict_us(model.terms(f, c)) * (1 + 0.02 * rng.random())) for c in configs]
    fitted = model.fit("spmm", samples)
    assert fitted.fitted_on == len(samples)
    assert all(v >= 0 for v in fitted.c[1:])
    errs = [abs(model.predict_us(f, c) / t - 1) for f, c, t in samples]
    assert sorted(errs)[len(errs) // 2] < 0.1  # median error under 10%


def test_fit_with_too_few_trials_keeps_the_prior():
    assert fit_coefficients([], []).c == Coefficients().c


def test_every_listed_device_resolves():
    for name in DEVICES:
        assert spec_for(name).name == name
    for alias in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA A100-SXM4-80GB",
                  "NVIDIA L4", "Tesla T4", "NVIDIA GeForce RTX 4090"):
        spec_for(alias)
    with pytest.raises(ValueError, match="unknown device"):
        spec_for("Voodoo 3dfx")


def test_incremental_refit_on_few_trials_keeps_what_was_learned():
    model = CostModel(H100)
    f = _features("spmm")
    # About half the space (N = 128: it doubled with the 16-byte loads), so every effect has samples.
    configs = _sample(family("spmm").space(f), k=500, seed=2)
    truth = Coefficients((0.3, 1.0, 1.0, 0.5), effects={"num_warps=8": 1.2})
    samples = [(f, c, truth.predict_us(model.terms(f, c), c)) for c in configs]
    wide = [c for c in configs if c.num_warps == 8]
    assert wide

    def penalty(m):  # predicted slowdown of 8 warps over the same config with 4, median
        ratios = sorted(m.predict_us(f, c) / m.predict_us(f, dataclasses.replace(c, num_warps=4)) for c in wide)
        return ratios[len(ratios) // 2]

    model.fit("spmm", samples)
    learned = penalty(model)
    assert learned > 2.5  # exp(1.2) = 3.3: the 8-warp penalty is learned
    model.fit("spmm", samples[:5], incremental=True)
    assert penalty(model) > 0.8 * learned  # a few new trials do not wipe it out
    scratch = CostModel(H100)
    scratch.fit("spmm", samples[:5])
    assert penalty(scratch) < penalty(model)


def test_sell_terms_see_padding_sorting_and_narrow_indices():
    model = CostModel(H100)
    sell = family("spmm").default(_features("spmm"))
    sell = dataclasses.replace(sell, kernel="sell", rows=32, nnz_step=8, block_n=16, vec=4, num_warps=4)
    skewed = synthetic_spmm_features(4096, 4096, 16, 0.1, "float16", row_cv=0.5)
    on = model.predict_us(skewed, dataclasses.replace(sell, swizzle=True))
    off = model.predict_us(skewed, dataclasses.replace(sell, swizzle=False))
    assert on < off  # unsorted slices of skewed rows are mostly padding
    # Even rows: no imbalance for either kernel, and SELL's 2-byte indices read less than CSR's 4.
    even = synthetic_spmm_features(4096, 4096, 16, 0.1, "float16", row_cv=0.0)
    t_sell = model.terms(even, sell)
    t_csr = model.terms(even, dataclasses.replace(sell, kernel="csr", rows=8))
    assert t_sell.imbalance == 1.0 and t_sell.mem_us < t_csr.mem_us
    wide_k = synthetic_spmm_features(4096, 40000, 16, 0.01024, "float16")  # same nnz, K past int16
    narrow_k = synthetic_spmm_features(4096, 32000, 16, 0.0128, "float16")
    assert model.terms(wide_k, sell).mem_us > model.terms(narrow_k, sell).mem_us


def test_model_ranks_both_spmm_kernels():
    model = CostModel(H100)
    f = synthetic_spmm_features(4096, 4096, 16, 0.1, "float16", row_cv=0.3)
    ranked = model.rank(f, family("spmm").space(f, budget_of(H100)))
    assert {c.kernel for c, _ in ranked[: len(ranked) // 2]} == {"csr", "sell"}


@pytest.mark.parametrize("density", [0.3, 0.1])
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 256), (768, 3072, 2048)])
@pytest.mark.filterwarnings("ignore::stuning.db.tuning_db.StaleEntriesWarning")  # only its fit is read
def test_fp32_sddmm_is_not_sent_to_the_exact_fp32_dot(m, n, k, density):
    """Recorded on the H200 (BENCHMARKS 7d): the tiled kernel's exact fp32 ``tl.dot`` ran at ~7
    TFLOP/s, 7-10x slower than the gather kernel at 70-90% zeros, yet the model picked it there."""
    from stuning.db import TuningDB
    from stuning.db.paths import shipped_dir
    from stuning.tuning.session import model_for

    h200 = spec_for("h200")
    shipped = TuningDB.open(h200.name, search_path=[shipped_dir()])
    assert shipped.model_coefficients  # the fit the H200's users get
    for model in (CostModel(h200), model_for(shipped, h200)):
        f = synthetic_sddmm_features(m, n, k, density, "float32")
        ranked = model.rank(f, family("sddmm").space(f, budget_of(spec_for("h200"))))
        assert ranked[0][0].kernel == "gather"
