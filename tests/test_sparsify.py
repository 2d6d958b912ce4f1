"""sparsify: which layers it replaces, what its report counts, and that the model still computes the same."""

from __future__ import annotations

import pytest
import torch
from naive import TOL, assert_close
from torch import nn

import stuning
from stuning.nn import SparseLinear
from stuning.nn.examples import tiny_encoder, tiny_mlp


def _index_bytes(n: int) -> int:
    return 4 * n  # int32 indices below 2**31 entries


def test_report_counts_bytes_and_honours_min_size_and_skip():
    model = tiny_encoder()  # four 32x32 attention projections, a 64x32 and a 32x64 FFN
    report = stuning.sparsify(model, sparsity=0.75, min_size=2048, skip=lambda name, m: name.endswith("output"))
    assert [r.name for r in report.layers] == ["layers.0.intermediate"]
    assert report.skipped == {
        **{f"layers.0.attention.{p}": "1024 weights < min_size 2048" for p in ("query", "key", "value")},
        "layers.0.attention.output": "skip",
        "layers.0.output": "skip",
    }
    (row,) = report.layers
    nnz = 2048 // 4
    assert row.shape == (64, 32) and row.format == "csr" and row.sparsity == pytest.approx(0.75)
    assert row.dense_bytes == 2048 * 4
    assert row.sparse_bytes == nnz * 4 + _index_bytes(nnz) + _index_bytes(65)
    assert row.bytes_saved == row.dense_bytes - row.sparse_bytes
    totals = report.to_dict()["totals"]
    assert totals == {"layers": 1, "dense_bytes": row.dense_bytes, "sparse_bytes": row.sparse_bytes,
                      "bytes_saved": row.bytes_saved}
    assert isinstance(model.layers[0].intermediate, SparseLinear)
    assert type(model.layers[0].output) is nn.Linear
    assert "total (1 layers)" in str(report) and report.table().row_count == 2


def test_glob_skip_2_4_and_same_outputs_as_the_pruned_dense_model(gen):
    model = tiny_mlp().half()
    reference = tiny_mlp().half()
    report = stuning.sparsify(model, sparsity=0.5, pattern="2:4", min_size=0, skip="*.down_proj")
    assert [r.name for r in report.layers] == ["layers.0.gate_proj", "layers.0.up_proj"]
    assert all(r.format == "2:4" and r.sparsity == pytest.approx(0.5) for r in report.layers)
    assert report.layers[0].sparse_bytes == 64 * 16 * 2 + 64 * 1 * 4  # values + one metadata word per row
    for name in ("gate_proj", "up_proj"):  # the dense model with the same zeros
        getattr(reference.layers[0], name).weight.data = getattr(model.layers[0], name).dense_weight()
    x = torch.randn(2, 5, 32, generator=gen).half()
    with torch.no_grad():
        assert_close(model(x), reference(x).double(), TOL[torch.float16], "2:4 MLP")


def test_keeps_existing_zeros_and_replaces_shared_layers_everywhere():
    shared = nn.Linear(32, 32)
    with torch.no_grad():
        shared.weight[:, ::2] = 0
    model = nn.Sequential(shared, nn.ReLU(), shared)
    report = stuning.sparsify(model, min_size=0)
    assert len(report.layers) == 1 and report.layers[0].sparsity == pytest.approx(0.5)
    assert model[0] is model[2] and isinstance(model[0], SparseLinear)


def test_leaves_linear_subclasses_alone():
    attention = nn.MultiheadAttention(32, 2, batch_first=True)  # reads out_proj.weight itself
    model = nn.ModuleDict({"attn": attention, "proj": nn.Linear(32, 32)})
    report = stuning.sparsify(model, sparsity=0.5, min_size=0)
    assert [r.name for r in report.layers] == ["proj"]
    assert type(attention.out_proj) is not SparseLinear


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"pattern": "2:4"}, "layer 'layers.0.gate_proj'.*not 2:4 sparse.*sparsity=0.5"),
        ({"pattern": "2:4", "sparsity": 0.9}, "2 of every 4"),
        ({"pattern": "4:8"}, "unknown pattern"),
        ({"sparsity": 1.5}, r"fraction of zeros in \[0, 1\)"),
    ],
)
def test_bad_requests_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        stuning.sparsify(tiny_mlp(), min_size=0, **kwargs)


def test_a_bare_linear_is_refused():
    with pytest.raises(ValueError, match="single Linear layer"):
        stuning.sparsify(nn.Linear(4, 4))
