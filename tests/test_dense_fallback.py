"""dense_fallback: a sparse layer runs its dense product where pretuning measured that faster."""

from __future__ import annotations

import pytest
import torch
from naive import assert_close
from torch import nn

import stuning
import stuning.tuning.driver as driver
from stuning.nn.weights import SparseWeight
from stuning.ops.selection import SELECTOR
from stuning.tuning.search import Budget

TOKENS = 16


def _model(dense_fallback: bool) -> nn.Sequential:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 48))
    stuning.sparsify(model, sparsity=0.8, min_size=0, dense_fallback=dense_fallback)
    return model


@pytest.fixture
def calls(monkeypatch):
    """Which product each forward ran, per layer's output size."""
    seen = []
    kernel, dense = SparseWeight.matmul, SparseWeight.dense
    monkeypatch.setattr(SparseWeight, "matmul",
                        lambda w, x, **kw: seen.append(("kernel", w.shape[0])) or kernel(w, x, **kw))
    monkeypatch.setattr(SparseWeight, "dense", lambda w: seen.append(("dense", w.shape[0])) or dense(w))
    return seen


@pytest.fixture
def pretuned(db_dir, fake_measuring, monkeypatch):
    """Pretune with every config at 5 us and the dense products at 2.5 us (64 x 64: dense wins) and
    10 us (48 x 64: the kernel wins), then forget the run's cached answers as a new process would."""
    # The dense baseline is the layer's own F.linear: Y is N x M, so M is its second size.
    monkeypatch.setattr(driver, "bench_us", lambda fn: ({64: 2.5, 48: 10.0}[fn().shape[1]], "do_bench"))

    def run(model):
        report = stuning.pretune(model, tokens=[TOKENS], budget=Budget(max_trials=2), progress=False)
        assert report.tuned == 2 and sorted(p.speedup_vs_dense for p in report.problems) == [0.5, 2.0]
        SELECTOR.reset()
        return model

    return run


def _reference(model: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    h = torch.relu(x.double() @ model[0].dense_weight().double().t() + model[0].bias.double())
    return h @ model[2].dense_weight().double().t() + model[2].bias.double()


def test_layers_run_dense_only_where_the_database_says_it_is_faster(pretuned, calls):
    model = pretuned(_model(dense_fallback=True))
    x = torch.randn(TOKENS, 64)
    with torch.no_grad():
        y = model(x)
    assert calls == [("dense", 64), ("kernel", 48)]
    assert_close(y, _reference(model, x), 1e-4)
    calls.clear()
    with torch.no_grad():
        model(torch.randn(3, 100, 64))  # another token bucket: no entry, so no dense timing to go by
    assert calls == [("kernel", 64), ("kernel", 48)]


def test_without_the_option_the_kernels_always_run(pretuned, calls):
    model = pretuned(_model(dense_fallback=False))
    with torch.no_grad():
        model(torch.randn(TOKENS, 64))
    assert calls == [("kernel", 64), ("kernel", 48)]
    assert "dense_fallback" not in repr(model[0])


def test_the_dense_copy_follows_the_layer_to_another_dtype(pretuned, calls):
    model = pretuned(_model(dense_fallback=True))
    with torch.no_grad():
        model(torch.randn(TOKENS, 64))  # the fp32 dense copy is made
    model = pretuned(model.half())  # the weight is wrapped again in fp16, and fp16 has entries of its own
    calls.clear()
    x = torch.randn(TOKENS, 64).half()
    with torch.no_grad():
        y = model(x)
    assert calls == [("dense", 64), ("kernel", 48)] and y.dtype == torch.float16
    assert "dense_fallback=True" in repr(model[0])
    assert_close(y, _reference(model, x), 3e-3)


def test_set_dense_fallback_switches_every_sparse_layer_and_frees_the_copies(pretuned, calls):
    model = pretuned(_model(dense_fallback=False))
    assert stuning.nn.set_dense_fallback(model) == 2
    with torch.no_grad():
        model(torch.randn(TOKENS, 64))
    assert calls == [("dense", 64), ("kernel", 48)] and model[0].sparse_weight._dense is not None
    assert stuning.nn.set_dense_fallback(model, False) == 2 and model[0].sparse_weight._dense is None
    calls.clear()
    with torch.no_grad():
        model(torch.randn(TOKENS, 64))
    assert calls == [("kernel", 64), ("kernel", 48)]


@pytest.mark.parametrize("channels_last", [False, True])
def test_a_convolution_falls_back_to_the_dense_convolution(db_dir, fake_measuring, monkeypatch, calls, channels_last):
    # 8 -> 16 channels, 3x3: W is 16 x 72 and N = batch x H_out x W_out; the dense product wins here,
    # so the layer runs the dense convolution (no im2col), in the input's memory format.
    monkeypatch.setattr(driver, "bench_us", lambda fn: (2.5, "do_bench"))
    torch.manual_seed(0)
    conv = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1))
    stuning.sparsify(conv, sparsity=0.8, min_size=0, dense_fallback=True)
    report = stuning.pretune(conv, input_shapes=[(2, 8, 6, 6)], budget=Budget(max_trials=2), progress=False)
    assert report.tuned == 1 and report.problems[0].speedup_vs_dense == 0.5
    SELECTOR.reset()
    x = torch.randn(2, 8, 6, 6)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    monkeypatch.setattr(type(conv[0]), "_columns", lambda *a: pytest.fail("im2col ran"))
    with torch.no_grad():
        y = conv(x)
    assert calls == [("dense", 16)]
    assert y.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    ref = torch.nn.functional.conv2d(x.double(), conv[0].dense_weight().double(), conv[0].bias.double(), padding=1)
    assert_close(y, ref, 1e-4)


@pytest.mark.gpu
def test_measured_fallback_of_a_convolution_on_the_gpu(db_dir):
    torch.manual_seed(0)
    conv = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1)).half().cuda().to(memory_format=torch.channels_last)
    stuning.sparsify(conv, sparsity=0.7, min_size=0, dense_fallback=True)
    shape = (8, 64, 28, 28)
    report = stuning.pretune(conv, input_shapes=[shape], budget=Budget(max_trials=3, max_seconds=10), progress=False)
    (problem,) = report.problems
    assert problem.measured and problem.dense_us > 0
    SELECTOR.reset()
    assert conv[0].sparse_weight.dense_is_faster(8 * 28 * 28) == (problem.speedup_vs_dense < 1)
    x = torch.randn(shape, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        y = conv(x)
    ref = torch.nn.functional.conv2d(x.float(), conv[0].dense_weight().float(), conv[0].bias.float(), padding=1)
    assert (y.float() - ref).norm() / ref.norm() < 1e-2
    assert y.is_contiguous(memory_format=torch.channels_last)
