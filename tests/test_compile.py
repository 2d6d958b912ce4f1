"""Sparse layers under ``torch.compile``: the kernel path as one operator (``stuning.nn.compiled``;
the functional ops' operators are tested in ``test_compile_ops.py``).

On a CPU the kernels run in Triton's interpreter and the graphs are compiled with the ``eager`` and
``aot_eager`` backends (Dynamo's tracing, and AOT autograd's fake tensors and functionalization:
everything ``torch.compile`` does but Inductor's code generation). The GPU test runs Inductor with
CUDA graphs (``mode="reduce-overhead"``), the mode that removes the layers' host time.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from naive import TOL, assert_close, randn
from torch import nn

import stuning.nn.linear as linear_module
from stuning.nn import SparseConv2d, SparseLinear
from stuning.nn.compiled import sparse_layer

BACKENDS = ["eager", "aot_eager"]


@pytest.fixture(autouse=True)
def fresh_compiler(monkeypatch):
    """Each test compiles afresh (Dynamo's caches would carry one test's graphs into the next), and
    warns afresh."""
    monkeypatch.setattr(linear_module, "_warned", set())
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _linear(fmt: str, dtype, gen, in_features: int, out_features: int, device="cpu") -> SparseLinear:
    dense = nn.Linear(in_features, out_features, dtype=dtype, device=device)
    with torch.no_grad():
        dense.weight.copy_(randn(out_features, in_features, dtype=dtype, gen=gen))
        dense.bias.copy_(randn(out_features, dtype=dtype, gen=gen))
    return SparseLinear.from_linear(dense, fmt, sparsity=0.5 if fmt == "2:4" else 0.8)


class TwoLayers(nn.Module):
    """A pruned MLP: sparse, an activation (the part the compiler traces), sparse."""

    def __init__(self, first: nn.Module, second: nn.Module):
        super().__init__()
        self.first, self.second = first, second

    def forward(self, x):
        return self.second(F.gelu(self.first(x)))


def _reference(model: TwoLayers, x: torch.Tensor) -> torch.Tensor:
    """The same model in float64 on dense copies of the weights."""
    def layer(sparse, h):
        return h @ sparse.dense_weight().double().t() + sparse.bias.double()

    return layer(model.second, F.gelu(layer(model.first, x.double())))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt,dtype,tol", [
    ("csr", torch.float32, TOL[torch.float32]),
    ("csr", torch.bfloat16, TOL[torch.bfloat16]),
    ("2:4", torch.float16, TOL[torch.float16]),
], ids=["csr-fp32", "csr-bf16", "2:4-fp16"])
def test_compiled_model_matches_eager_and_float64(fmt, dtype, tol, backend, gen):
    # Odd widths (K = 37 pads a 2:4 weight) and a 3-D input, as a transformer's layers see.
    model = TwoLayers(_linear(fmt, dtype, gen, 37, 24), _linear(fmt, dtype, gen, 24, 19))
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        for shape in [(2, 3, 37), (5, 37)]:  # a second shape: Dynamo recompiles, the operator still answers
            x = randn(*shape, dtype=dtype, gen=gen)
            y = compiled(x)
            eager = model(x)
            assert y.shape == eager.shape and y.dtype == dtype and y.stride() == eager.stride()
            # The same kernels with the same configs: the same bits.
            torch.testing.assert_close(y, eager, rtol=0, atol=0)
            assert_close(y, _reference(model, x), tol, f"{fmt} {dtype} {shape}")


@pytest.mark.parametrize("layout", ["nchw", "channels_last", "unbatched"])
def test_compiled_conv_keeps_the_input_layout(layout, gen):
    dense = nn.Conv2d(4, 6, 3, stride=2, padding=1)
    conv = SparseConv2d.from_conv(dense, sparsity=0.7)
    x = randn(2, 4, 7, 6, dtype=torch.float32, gen=gen)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    elif layout == "unbatched":
        x = x[0]
    with torch.no_grad():
        y = torch.compile(conv, backend="aot_eager", fullgraph=True)(x)
        eager = conv(x)
        reference = F.conv2d(x.double(), conv.dense_weight().double(), conv.bias.double(), 2, 1)
    assert y.shape == eager.shape and y.stride() == eager.stride()
    torch.testing.assert_close(y, eager, rtol=0, atol=0)
    assert_close(y, reference, TOL[torch.float32], layout)


def test_fake_output_describes_the_real_one(gen):
    """What the compiler plans with (the fake implementation) is what the layer returns, for every
    input form a layer takes, including the shapes no test above compiles."""
    lin = _linear("csr", torch.float32, gen, 16, 8)
    conv = SparseConv2d.from_conv(nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 0)), sparsity=0.6)
    image = randn(3, 3, 6, 5, dtype=torch.float32, gen=gen)
    cases = [
        (lin, randn(16, dtype=torch.float32, gen=gen)),
        (lin, randn(4, 16, dtype=torch.float32, gen=gen)),
        (lin, randn(2, 1, 3, 16, dtype=torch.float32, gen=gen)),
        (conv, image),
        (conv, image[:1]),
        (conv, image.to(memory_format=torch.channels_last)),
        (conv, image[0]),
    ]
    for layer, x in cases:
        with torch.no_grad():
            real = layer(x)
        fake = layer._empty_output(x)
        assert (fake.shape, fake.stride(), fake.dtype) == (real.shape, real.stride(), real.dtype), tuple(x.shape)


@pytest.mark.parametrize("fmt,dtype", [("csr", torch.float32), ("2:4", torch.float16)])
def test_operator_passes_torch_library_checks(fmt, dtype, gen):
    """Schema, fake tensors (static and dynamic shapes), AOT dispatch and the autograd registration."""
    layer = _linear(fmt, dtype, gen, 20, 12)
    x = randn(3, 20, dtype=dtype, gen=gen)
    weight = [getattr(layer, f"weight_{name}") for name in layer.sparse_weight.buffer_names]
    torch.library.opcheck(sparse_layer, (layer._handle, x, weight, layer.bias))


def test_a_deep_copy_runs_its_own_weight(gen):
    original = _linear("csr", torch.float32, gen, 12, 10)
    copied = copy.deepcopy(original)
    assert copied._handle != original._handle
    with torch.no_grad():
        copied.weight_values.mul_(-2.0)
        x = randn(4, 12, dtype=torch.float32, gen=gen)
        y_original = torch.compile(original, backend="aot_eager")(x)
        y_copied = torch.compile(copied, backend="aot_eager")(x)
        torch.testing.assert_close(y_original, original(x), rtol=0, atol=0)
        torch.testing.assert_close(y_copied, copied(x), rtol=0, atol=0)
        assert not torch.allclose(y_original, y_copied)


def test_bad_input_fails_as_in_eager(gen):
    layer = _linear("csr", torch.float32, gen, 12, 10)
    compiled = torch.compile(layer, backend="aot_eager")
    with pytest.raises(ValueError, match=r"input of shape \(4, 11\) does not end in in_features = 12"):
        compiled(randn(4, 11, dtype=torch.float32, gen=gen))
    with pytest.raises(TypeError, match="input is torch.float16 but the layer's weight is torch.float32"):
        compiled(randn(4, 12, dtype=torch.float16, gen=gen))


def test_export_is_refused_with_the_reason(gen):
    layer = _linear("csr", torch.float32, gen, 12, 10)
    with pytest.raises(RuntimeError, match="SparseLinear: torch.export is not supported"):
        torch.export.export(layer, (randn(4, 12, dtype=torch.float32, gen=gen),))


def test_no_gradient_flows_and_the_layer_says_so(gen):
    layer = _linear("csr", torch.float32, gen, 12, 10)
    x = randn(4, 12, dtype=torch.float32, gen=gen).requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = torch.compile(layer, backend="aot_eager", fullgraph=True)(x)
    assert any("no gradient flows through the Triton kernels" in str(w.message) for w in caught)
    torch.testing.assert_close(y.detach(), layer(x.detach()), rtol=0, atol=0)
    y.sum().backward()
    assert x.grad is None


def test_the_pytorch_backend_is_traced_not_wrapped(gen, monkeypatch):
    """Only the kernel path is the opaque operator: a layer on PyTorch's sparse product keeps its
    autograd under torch.compile, as in eager mode."""
    dense = nn.Linear(12, 10)
    layer = SparseLinear.from_linear(dense, sparsity=0.5, backend="torch")
    called = []
    monkeypatch.setattr(linear_module.compiled, "sparse_layer", lambda *a: called.append(a))
    x = torch.randn(4, 12, generator=gen, requires_grad=True)
    y = torch.compile(layer, backend="aot_eager")(x)
    y.sum().backward()
    assert not called
    torch.testing.assert_close(x.grad, layer.dense_weight().sum(0).expand(4, 12))


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,dtype", [("csr", torch.float16), ("csr", torch.bfloat16), ("2:4", torch.float16)])
def test_reduce_overhead_mode_on_the_gpu(fmt, dtype, device_gen):
    """Inductor with CUDA graphs: the step replays the layers' kernels, on new inputs each call,
    and at two token counts (one graph each)."""
    model = TwoLayers(_linear(fmt, dtype, device_gen, 1024, 2816, "cuda"),
                      _linear(fmt, dtype, device_gen, 2816, 1024, "cuda"))
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.inference_mode():
        for tokens in (16, 16, 16, 128, 128, 128, 16):
            x = randn(tokens, 1024, dtype=dtype, gen=device_gen)
            y = compiled(x).clone()  # a replay's output lives in the graph's pool until the next replay
            # Not bit for bit: Inductor computes the GELU in fp32 and rounds once, where eager rounds
            # its fp16 steps (0.6% of the elements a unit apart on the H200).
            assert_close(y, model(x), TOL[dtype], f"{fmt} {dtype} {tokens} tokens against eager")
            assert_close(y, _reference(model, x), TOL[dtype] * 2, f"{fmt} {dtype} {tokens} tokens")
