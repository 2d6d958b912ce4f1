"""The benchmark suite's definition, its filters, and the synthetic matrix generators (CPU, fast)."""

from __future__ import annotations

import pytest
import torch

from stuning import suite
from stuning.matrices import random_dense, random_semi24, random_sparse, row_cv, row_lengths, sparsity_of


def test_spmm_suite_covers_the_definition():
    cases = suite.spmm_suite()
    shapes = {(c.m, c.k) for c in cases}
    assert {(512, 512), (2048, 512), (512, 2048)} <= shapes  # Transformer-base
    assert {(768, 3072), (3072, 768)} <= shapes  # BERT-base
    assert {(4096, 4096), (11008, 4096), (4096, 11008)} <= shapes  # Llama-7B
    assert {c.n for c in cases} == {16, 128, 512, 2048, 8192, 49, 196, 100}
    assert {c.sparsity for c in cases} == {0.5, 0.7, 0.8, 0.9, 0.95, 0.98}
    assert {c.skew_cv for c in cases} == {0.0, 0.4}
    assert {c.dtype for c in cases} == {"fp32", "fp16", "bf16"}
    assert len(cases) == len(set(cases)) == 8 * 8 * 6 * 2 * 3


def test_sddmm_suite_covers_the_definition():
    cases = suite.sddmm_suite()
    attn = [c for c in cases if c.family == "attention"]
    wgrad = [c for c in cases if c.family == "wgrad"]
    assert {(c.m, c.n, c.k) for c in attn} == {(L, L, K) for L in (1024, 2048, 4096) for K in (64, 128)}
    assert {(c.m, c.n) for c in wgrad} == {sh for g in suite.WEIGHT_SHAPES.values() for sh in g}
    assert {c.k for c in wgrad} == {256, 2048}
    assert {c.dtype for c in cases} == {"fp32", "fp16", "bf16"}
    assert {c.sparsity for c in cases} == set(suite.SPARSITIES)
    assert len(cases) == len(set(cases))


def test_semi24_suite_covers_the_definition():
    cases = suite.semi24_suite()
    assert {c.dtype for c in cases} == {"fp16", "bf16"}
    assert {c.n for c in cases} == set(suite.ALL_NS)
    assert len({(c.m, c.k) for c in cases}) == 8
    assert all(c.k % 4 == 0 for c in cases)


def test_names_and_dicts():
    c = suite.SpMMCase(4096, 11008, 128, 0.9, 0.4, "fp16")
    assert c.name == "spmm_4096x11008_n128_s90_cv0.4_fp16"
    assert c.as_dict()["op"] == "spmm" and c.as_dict()["m"] == 4096 and c.torch_dtype == torch.float16
    d = suite.SDDMMCase(1024, 1024, 64, 0.95, "fp32", "attention")
    assert d.name == "sddmm_attention_L1024_k64_s95_fp32" and d.as_dict()["family"] == "attention"
    assert suite.Semi24Case(768, 3072, 49, "bf16").name == "semi24_768x3072_n49_bf16"
    names = [x.name for op in suite.SUITES for x in suite.SUITES[op]()]
    assert len(names) == len(set(names))


def test_filters():
    cases = suite.spmm_suite(shapes=["llama7b"], ns=[16, 100], sparsities=[90, 0.98], dtypes=["fp16"], skews=[0])
    assert {(c.m, c.k) for c in cases} == {(4096, 4096), (11008, 4096), (4096, 11008)}
    assert {c.n for c in cases} == {16, 100} and {c.sparsity for c in cases} == {0.9, 0.98}
    assert {c.dtype for c in cases} == {"fp16"} and {c.skew_cv for c in cases} == {0.0}
    assert len(cases) == 3 * 2 * 2
    assert {(c.m, c.k) for c in suite.spmm_suite(shapes=["768x3072", (512, 512)])} == {
        (768, 3072),
        (512, 512),
    }
    assert suite.spmm_suite(dtypes=[torch.bfloat16], limit=5) == suite.spmm_suite(dtypes=["bf16"])[:5]
    # "llama7b" picks the weight-gradient masks, not the 4096 x 4096 attention ones; "MxN" picks both.
    assert {c.family for c in suite.sddmm_suite(shapes=["llama7b"])} == {"wgrad"}
    assert {c.family for c in suite.sddmm_suite(shapes=["4096x4096"])} == {"attention", "wgrad"}
    assert {c.k for c in suite.sddmm_suite(ks=[64])} == {64}
    assert {c.dtype for c in suite.semi24_suite(dtypes=["fp16"], ns=[16])} == {"fp16"}
    with pytest.raises(ValueError):
        suite.spmm_suite(dtypes=["int8"])


def test_sample_is_deterministic_subset():
    full = suite.spmm_suite()
    a = suite.spmm_suite(sample=20, seed=3)
    assert a == suite.spmm_suite(sample=20, seed=3) and len(a) == 20
    assert a != suite.spmm_suite(sample=20, seed=4)
    assert set(a) <= set(full) and a == sorted(a, key=full.index)  # suite order kept


def test_presets():
    quick = suite.preset("quick")
    assert set(quick) == {"spmm", "sddmm", "semi24"} and all(quick.values())
    assert sum(map(len, quick.values())) < 100
    first = suite.preset("first-table")
    assert {(c.m, c.k) for c in first["spmm"]} == {
        (768, 3072),
        (3072, 768),
        (4096, 4096),
        (11008, 4096),
        (4096, 11008),
    }
    assert {c.n for c in first["spmm"]} == {16, 128, 2048} and {c.dtype for c in first["spmm"]} == {
        "fp32",
        "fp16",
        "bf16",
    }
    assert {c.sparsity for c in first["spmm"]} == {0.7, 0.9, 0.95, 0.98}
    assert suite.preset("first-table", ops=["semi24"], dtypes=["fp16"])["semi24"] == [
        c for c in first["semi24"] if c.dtype == "fp16"
    ]
    with pytest.raises(ValueError):
        suite.preset("nope")


@pytest.mark.parametrize("sparsity", [0.5, 0.9, 0.98])
@pytest.mark.parametrize("skew", [0.0, 0.4])
def test_random_sparse_hits_sparsity_and_skew(sparsity, skew):
    g = torch.Generator().manual_seed(0)
    a = random_sparse(1024, 1024, sparsity, skew_cv=skew, dtype=torch.float16, generator=g)
    assert a.shape == (1024, 1024) and a.dtype == torch.float16
    assert abs(sparsity_of(a) - sparsity) < 1e-3
    assert abs(row_cv(a) - skew) < 0.1
    lengths = (a != 0).sum(1)
    assert int(lengths.max()) <= 1024
    if skew == 0:
        assert int(lengths.max()) - int(lengths.min()) <= 1


def test_random_sparse_is_seeded_and_spread():
    a = random_sparse(256, 512, 0.9, generator=torch.Generator().manual_seed(1))
    b = random_sparse(256, 512, 0.9, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    cols = (a != 0).sum(0).float()
    assert cols.min() > 0  # columns chosen at random, not bunched at the left
    assert random_sparse(8, 8, 0.0).ne(0).all() and random_sparse(8, 8, 1.0).eq(0).all()


def test_row_lengths_sum_and_range():
    g = torch.Generator().manual_seed(2)
    lengths = row_lengths(1000, 64, 40_000, 0.4, generator=g)
    assert int(lengths.sum()) == 40_000 and int(lengths.min()) >= 0 and int(lengths.max()) <= 64
    with pytest.raises(ValueError):
        row_lengths(10, 10, 101)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_random_semi24_is_2_4(dtype):
    w = random_semi24(128, 256, dtype=dtype, generator=torch.Generator().manual_seed(0))
    assert w.dtype == dtype and w.shape == (128, 256)
    per_group = (w.reshape(128, -1, 4) != 0).sum(-1)
    assert (per_group == 2).all()
    with pytest.raises(ValueError):
        random_semi24(4, 6)


def test_random_dense():
    x = random_dense(64, 32, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(0))
    assert x.shape == (64, 32) and x.dtype == torch.bfloat16 and 0.5 < float(x.float().std()) < 1.5
