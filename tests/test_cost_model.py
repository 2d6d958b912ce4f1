"""Sanity properties of the analytic cost models and of the fitted coefficients."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics

import pytest
from stuning.kernels.semi24 import shared_memory_bytes
from stuning.kernels.spmm import SpMMConfig

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


def test_an_incremental_refit_on_the_same_trials_keeps_the_fit():
    # Each incremental fit steps away from the prior; refits of unchanged trials must not keep stepping.
    model = CostModel(H100)
    problems = _problems(4)
    truth = Coefficients((0.3, 1.0, 1.0, 0.5), effects={"num_warps=8": 1.2})
    samples = [(p, c, truth.predict_us(model.terms(p, c), c))
               for i, p in enumerate(problems) for c in _sample(family("spmm").space(p), k=20, seed=7 + i)]
    first = model.fit("spmm", samples, incremental=True)
    second = model.fit("spmm", list(reversed(samples)), incremental=True)  # the same trials, in another order
    assert second == first and first.trials
    stored = Coefficients.from_dict(first.as_dict())
    assert stored == first
    model.coefficients["spmm"] = stored
    changed = [(p, c, 1.5 * t) for p, c, t in samples[:3]] + samples[3:]
    third = model.fit("spmm", changed, incremental=True)
    assert third.trials != first.trials and third.c != first.c


def test_every_listed_device_resolves():
    for name in DEVICES:
        assert spec_for(name).name == name
    for alias in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA A100-SXM4-80GB",
                  "NVIDIA L4", "Tesla T4", "NVIDIA GeForce RTX 4090"):
        spec_for(alias)
    with pytest.raises(ValueError, match="unknown device"):
        spec_for("Voodoo 3dfx")


def test_incremental_refit_on_few_trials_keeps_what_was_learned(uncapped_effects):
    model = CostModel(H100)
    # Twelve problems, so the fit takes the penalty for every shape (from one it keeps well under half).
    problems = _problems(12)
    f = problems[0]
    truth = Coefficients((0.3, 1.0, 1.0, 0.5), effects={"num_warps=8": 1.2})
    samples = [(p, c, truth.predict_us(model.terms(p, c), c))
               for i, p in enumerate(problems) for c in _sample(family("spmm").space(p), k=40, seed=2 + i)]
    wide = [c for p, c, _ in samples if p is f and c.num_warps == 8]
    assert wide

    def penalty(m):  # predicted slowdown of 8 warps over the same config with 4, median
        ratios = sorted(m.predict_us(f, c) / m.predict_us(f, dataclasses.replace(c, num_warps=4)) for c in wide)
        return ratios[len(ratios) // 2]

    model.fit("spmm", samples)
    learned = penalty(model)
    # exp(1.2) = 3.3; the effect-ridge shrinks it: 1.6-2.1x on these 12 problems whichever configs are sampled.
    assert learned > 1.5
    model.fit("spmm", samples[:5], incremental=True)
    assert penalty(model) > 0.8 * learned  # a few new trials do not wipe it out
    scratch = CostModel(H100)
    scratch.fit("spmm", samples[:5])
    assert penalty(scratch) < penalty(model)


def _problems(count):
    """SpMM problems of distinct shapes at N = 128, fp16: width 8 is in their spaces."""
    shapes = [(m, k, d) for m in (1024, 2048, 4096) for k in (2048, 8192) for d in (0.02, 0.1)]
    return [synthetic_spmm_features(m, k, 128, d, "float16", row_cv=0.3) for m, k, d in shapes[:count]]


def _timed(features, configs, rng, vec8_effect=0.0):
    """Trials timed as a known model with 5% noise, width 8 exp(vec8_effect) times slower."""
    model, truth = CostModel(H100), Coefficients((0.3, 1.0, 1.0, 0.5))
    trials = []
    for c in configs:
        t = truth.predict_us(model.terms(features, c), c) * math.exp(rng.gauss(0.0, 0.05))
        trials.append((features, c, t * math.exp(vec8_effect) if c.vec == 8 else t))
    return trials


def _guarded_and_unguarded(samples):
    """The fit the tuner makes (CostModel.fit: it knows each trial's problem), and one that does not."""
    model = CostModel(H100)
    unguarded = fit_coefficients([model.terms(f, c) for f, c, _ in samples], [t for *_, t in samples],
                                 [c for _, c, _ in samples])
    return model.fit("spmm", samples), unguarded


def _width8_speedup(coef) -> float:
    """Log of how much faster a fit predicts width 8 than width 4, median over the configs of a
    shape it has no trials of."""
    model = CostModel(H100, {"spmm": coef})
    f = synthetic_spmm_features(3072, 768, 128, 0.05, "float16", row_cv=0.3)
    wide = [c for c in family("spmm").space(f) if c.vec == 8]
    return statistics.median(math.log(model.predict_us(f, dataclasses.replace(c, vec=4)) / model.predict_us(f, c))
                             for c in wide)


@pytest.mark.parametrize("seed", [0, 1])
def test_an_effect_seen_on_one_problem_is_not_applied_to_every_shape(seed, uncapped_effects):
    """Seen on the H200 (BENCHMARKS, "a user's refit"): a tune's refit on a few problems' trials
    carried what was fast on them to untuned shapes, whose picks slowed down up to 5x."""
    rng = random.Random(seed)
    problems = _problems(8)
    space = family("spmm").space(problems[0])
    narrow = [c for c in space if c.vec != 8]
    samples = _timed(problems[0], rng.sample(space, 80), rng, vec8_effect=-1.2)  # width 8 3.3x faster
    for f in problems[1:]:  # the others timed no width-8 config (their top trials, say)
        samples += _timed(f, rng.sample(narrow, 80), rng)
    guarded, unguarded = _guarded_and_unguarded(samples)
    assert _width8_speedup(unguarded) > 0.9  # it takes one problem's speedup for every shape
    assert 0 < _width8_speedup(guarded) < 0.5 * _width8_speedup(unguarded)


@pytest.mark.parametrize("seed", [0, 1])
def test_an_effect_seen_on_many_problems_is_still_learned(seed, uncapped_effects):
    rng = random.Random(seed)
    samples = []
    for f in _problems(8):
        samples += _timed(f, rng.sample(family("spmm").space(f), 80), rng, vec8_effect=-1.2)
    guarded, unguarded = _guarded_and_unguarded(samples)
    # Eight problems move it about 3/4 of the way an unguarded fit goes (which takes about 1.0 of
    # the true 1.2): width 8 is still predicted about 2.1x faster.
    assert _width8_speedup(guarded) > 2 / 3 * _width8_speedup(unguarded)
    assert _width8_speedup(guarded) > 0.6


def test_a_problem_with_many_trials_does_not_outvote_many_problems():
    rng = random.Random(5)
    problems = _problems(11)
    samples = _timed(problems[0], rng.sample(family("spmm").space(problems[0]), 300), rng, vec8_effect=-1.0)
    for f in problems[1:]:  # ten problems, 20 trials each, on which width 8 is slower
        samples += _timed(f, rng.sample(family("spmm").space(f), 20), rng, vec8_effect=1.0)
    guarded, unguarded = _guarded_and_unguarded(samples)
    assert _width8_speedup(unguarded) > 0  # 300 trials against 200
    assert _width8_speedup(guarded) < -0.2  # one problem against ten


def test_a_guarded_fit_keeps_the_prior_on_too_few_trials_and_the_exponents_in_range():
    model = CostModel(H100)
    f = _problems(1)[0]
    prior = Coefficients((0.2, 0.9, 1.1, 0.4), fitted_on=50, effects={"vec=8": -0.3})
    two = _timed(f, _sample(family("spmm").space(f), k=2), random.Random(0))
    kept = fit_coefficients([model.terms(f, c) for _, c, _ in two], [t for *_, t in two], [c for _, c, _ in two],
                            prior=prior, problems=["a", "b"])
    assert kept == prior
    rng = random.Random(1)
    noise = [(p, c, t * rng.uniform(0.1, 10)) for p in _problems(4)  # times that say little
             for _, c, t in _timed(p, rng.sample(family("spmm").space(p), 30), rng)]
    fitted = model.fit("spmm", noise)
    assert 0.5 <= fitted.c[1] <= 1.5 and all(0.0 <= v <= 3.0 for v in fitted.c[2:])
    assert fitted.fitted_on == len(noise)


def test_sell_terms_see_padding_sorting_and_narrow_indices():
    model = CostModel(H100)
    sell = family("spmm").default(_features("spmm"))
    sell = dataclasses.replace(sell, kernel="sell", rows=32, nnz_step=8, block_n=16, vec=4, num_warps=4)
    skewed = synthetic_spmm_features(4096, 4096, 16, 0.1, "float16", row_cv=0.5)
    on = model.terms(skewed, dataclasses.replace(sell, swizzle=True))
    off = model.terms(skewed, dataclasses.replace(sell, swizzle=False))
    # Unsorted slices of skewed rows are mostly padding (both walk the longest row whole: 32-row
    # slices are not cut, test_the_longest_row_is_a_chain_of_its_own).
    assert on.mem_us < off.mem_us and on.chain_us == off.chain_us
    # Even rows: no imbalance for either kernel, and SELL's 2-byte indices read less than CSR's 4.
    even = synthetic_spmm_features(4096, 4096, 16, 0.1, "float16", row_cv=0.0)
    t_sell = model.terms(even, sell)
    t_csr = model.terms(even, dataclasses.replace(sell, kernel="csr", rows=8))
    assert t_sell.imbalance == 1.0 and t_sell.mem_us < t_csr.mem_us
    wide_k = synthetic_spmm_features(4096, 40000, 16, 0.01024, "float16")  # same nnz, K past int16
    narrow_k = synthetic_spmm_features(4096, 32000, 16, 0.0128, "float16")
    assert model.terms(wide_k, sell).mem_us > model.terms(narrow_k, sell).mem_us


def test_the_longest_row_is_a_chain_of_its_own():
    """One program holds the longest row whole (its steps in a row, however many programs run beside
    it) unless sorted slices of up to CUT_MAX_SLICE_ROWS rows cut it into pieces."""
    model = CostModel(H100)
    skewed = synthetic_spmm_features(11008, 4096, 16, 0.2, "float32", row_cv=0.6)
    even = synthetic_spmm_features(11008, 4096, 16, 0.2, "float32", row_cv=0.0)
    assert skewed["row_max"] > 2.5 * skewed["row_mean"]
    sell = SpMMConfig(kernel="sell", rows=16, nnz_step=8, block_n=16, vec=4, num_warps=4, swizzle=True)
    whole = model.terms(skewed, sell)
    assert whole.chain_us >= math.ceil(skewed["row_max"] / 8) * H100.mem_latency_us
    assert model.terms(even, sell).chain_us < whole.chain_us / 2  # as many nonzeros, no long row
    cut = model.terms(skewed, dataclasses.replace(sell, rows=8))
    assert cut.chain_us < whole.chain_us / 2
    csr = model.terms(skewed, dataclasses.replace(sell, kernel="csr"))
    assert csr.chain_us >= whole.chain_us  # CSR never cuts rows


def test_model_ranks_both_spmm_kernels():
    model = CostModel(H100)
    f = synthetic_spmm_features(4096, 4096, 16, 0.1, "float16", row_cv=0.3)
    ranked = model.rank(f, family("spmm").space(f, budget_of(H100)))
    assert {c.kernel for c, _ in ranked[: len(ranked) // 2]} == {"csr", "sell"}


@pytest.mark.parametrize("density", [0.3, 0.1])
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 256), (768, 3072, 2048)])
def test_fp32_sddmm_without_tf32_is_not_sent_to_the_exact_fp32_dot(m, n, k, density):
    """Recorded on the H200 (BENCHMARKS 7d): Triton's exact fp32 ``tl.dot`` ran at ~7 TFLOP/s, 7-10x
    slower than the gather kernel at 70-90% zeros, yet the model picked it there. A GPU without TF32
    (the T4) still multiplies fp32 tiles that way; the gather kernel or cuBLAS's SGEMM (dense) is
    the pick."""
    t4 = spec_for("t4")
    f = synthetic_sddmm_features(m, n, k, density, "float32")
    ranked = CostModel(t4).rank(f, family("sddmm").space(f, budget_of(t4)))
    assert ranked[0][0].kernel in ("gather", "dense")


@pytest.mark.parametrize("density", [0.3, 0.1])
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 256), (4096, 4096, 2048)])
@pytest.mark.filterwarnings("ignore::stuning.db.tuning_db.StaleEntriesWarning")  # only its fit is read
def test_fp32_sddmm_takes_the_tiles_where_even_tf32x3_ones_won(m, n, k, density):
    """Recorded on the H200 (BENCHMARKS 7n): with three TF32 products per fp32 tile the tiled kernel
    ran 126-139 us (K = 256) and 860-865 us (K = 2048) at 70-90% zeros, against 194-555 and
    1462-4282 us for the gather kernel; 64-row tiles on 8 warps ran 2x slower and are out. fp32 tiles
    now multiply as fp16 parts (three fp16 products at twice TF32's rate, plus the split's pass), so
    the tiled kernel must stay the pick there."""
    from stuning.db import TuningDB
    from stuning.db.paths import shipped_dir
    from stuning.tuning.session import model_for

    h200 = spec_for("h200")
    shipped = TuningDB.open(h200.name, search_path=[shipped_dir()])
    assert shipped.model_coefficients  # the fit the H200's users get
    f = synthetic_sddmm_features(m, n, k, density, "float32")
    space = family("sddmm").space(f, budget_of(h200))
    assert not any(c.kernel == "tiled" and c.block_m // c.num_warps < 16 for c in space)
    for model in (CostModel(h200), model_for(shipped, h200)):
        assert model.rank(f, space)[0][0].kernel == "tiled"
