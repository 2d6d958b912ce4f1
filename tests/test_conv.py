"""SparseConv2d against F.conv2d (float64) with the same zeros, through the Triton kernels and PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from naive import TOL, assert_close, captured_graph, randn
from torch import nn

import stuning.nn.linear as linear_module
from stuning.nn import SparseConv2d

C_IN, C_OUT = 5, 6
# (kernel, stride, padding, dilation, batch, H, W): odd sizes, batch 1, asymmetric pairs, "same" with
# an even kernel (torch pads the extra row at the end), outputs of a single pixel.
GEOMETRIES = [
    (1, 1, 0, 1, 2, 7, 9),
    (1, 2, 0, 1, 2, 9, 7),
    (3, 1, 1, 1, 1, 5, 7),
    (3, 2, 1, 1, 2, 9, 11),
    (3, 1, 2, 2, 1, 7, 6),
    (3, (2, 1), (0, 1), (1, 2), 2, 7, 9),
    (7, 2, 3, 1, 1, 11, 13),
    (7, 1, 0, 1, 2, 7, 8),
    ((2, 3), 1, "same", 1, 1, 6, 5),
    (3, 1, "valid", 1, 2, 3, 3),
]


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(linear_module, "_warned", set())


def _pruned(dtype, gen, *, kernel=3, stride=1, padding=1, dilation=1, bias=True, fmt="csr", **options):
    """A SparseConv2d and the nn.Conv2d holding the same zeros."""
    dense = nn.Conv2d(C_IN, C_OUT, kernel, stride, padding, dilation, bias=bias, dtype=dtype)
    with torch.no_grad():
        dense.weight.copy_(randn(*dense.weight.shape, dtype=dtype, gen=gen))
        if bias:
            dense.bias.copy_(randn(C_OUT, dtype=dtype, gen=gen))
    sparse = SparseConv2d.from_conv(dense, fmt, sparsity=0.5 if fmt == "2:4" else 0.7, **options)
    with torch.no_grad():
        dense.weight.copy_(sparse.dense_weight())
    return sparse, dense


def _reference(dense: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    bias = None if dense.bias is None else dense.bias.double()
    return F.conv2d(x.double(), dense.weight.double(), bias, dense.stride, dense.padding, dense.dilation)


def _layout(channels_last: bool):
    return torch.channels_last if channels_last else torch.contiguous_format


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")  # F.conv2d, the reference
@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "k{}-s{}-p{}-d{}-b{}-{}x{}".format(*g))
def test_matches_conv2d_with_the_same_zeros(geometry, channels_last, backend, gen):
    kernel, stride, padding, dilation, batch, h, w = geometry
    bias = GEOMETRIES.index(geometry) % 3 != 2  # some without bias
    sparse, dense = _pruned(torch.float32, gen, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                            bias=bias, backend=backend)
    assert sparse.sparsity == pytest.approx(0.7, abs=0.02)
    x = randn(batch, C_IN, h, w, dtype=torch.float32, gen=gen).to(memory_format=_layout(channels_last))
    with torch.no_grad():
        y = sparse(x)
    ref = _reference(dense, x)
    assert y.shape == ref.shape and y.dtype == torch.float32
    assert y.is_contiguous(memory_format=_layout(channels_last))
    assert_close(y, ref, TOL[torch.float32], f"{geometry} {backend}")
    assert sparse.gemm_columns(tuple(x.shape)) == batch * ref.shape[2] * ref.shape[3]
    assert sparse.output_shape(tuple(x.shape)) == tuple(ref.shape)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_padding_modes_match_conv2d(mode, gen):
    dense = nn.Conv2d(C_IN, C_OUT, (3, 2), (2, 1), (2, 1), padding_mode=mode)  # asymmetric, as nn.Conv2d pads
    sparse = SparseConv2d.from_conv(dense, sparsity=0.7, backend="triton")
    assert sparse.padding_mode == mode and f"padding_mode='{mode}'" in repr(sparse)
    with torch.no_grad():
        dense.weight.copy_(sparse.dense_weight())
    x = randn(2, C_IN, 6, 5, dtype=torch.float32, gen=gen).to(memory_format=torch.channels_last)
    with torch.no_grad():
        y, ref = sparse(x), dense.double()(x.double())
    assert y.shape == ref.shape and y.is_contiguous(memory_format=torch.channels_last)
    assert_close(y, ref, TOL[torch.float32], mode)


@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize("fmt,dtype", [("csr", torch.float16), ("csr", torch.bfloat16), ("2:4", torch.float16),
                                       ("2:4", torch.bfloat16)], ids=lambda v: str(v).removeprefix("torch."))
def test_half_precision_and_2_4(fmt, dtype, backend, gen):
    # K = 5 x 3 x 3 = 45: not a multiple of 4, so the 2:4 weight is padded.
    sparse, dense = _pruned(dtype, gen, stride=2, fmt=fmt, backend=backend)
    for channels_last in (False, True):
        x = randn(2, C_IN, 7, 9, dtype=dtype, gen=gen).to(memory_format=_layout(channels_last))
        with torch.no_grad():
            y = sparse(x)
        assert y.dtype == dtype and y.is_contiguous(memory_format=_layout(channels_last))
        assert_close(y, _reference(dense, x), TOL[dtype], f"{fmt} {dtype} {backend}")


def test_unbatched_and_empty_inputs(gen):
    sparse, dense = _pruned(torch.float32, gen, backend="torch")
    x = randn(C_IN, 6, 5, dtype=torch.float32, gen=gen)
    assert_close(sparse(x), _reference(dense, x[None])[0], TOL[torch.float32], "unbatched")
    assert sparse(torch.zeros(0, C_IN, 6, 5)).shape == (0, C_OUT, 6, 5)


def test_autocast_casts_the_input_to_the_weight_dtype(gen):
    sparse, dense = _pruned(torch.bfloat16, gen, backend="torch")
    x = randn(2, C_IN, 5, 6, dtype=torch.float32, gen=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = sparse(x)
    assert y.dtype == torch.bfloat16
    assert_close(y, _reference(dense, x.bfloat16()), TOL[torch.bfloat16], "under autocast")


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("batch", [1, 3])
def test_pytorch_path_passes_gradients_to_the_input(batch, channels_last, gen):
    # An input that requires grad (e.g. the output of a dense layer with parameters, outside no_grad)
    # must not hit an out= op, which autograd rejects; the gradient is F.conv2d's with the same zeros.
    sparse, dense = _pruned(torch.float32, gen, stride=2, backend="torch")
    x = randn(batch, C_IN, 7, 6, dtype=torch.float32, gen=gen).to(memory_format=_layout(channels_last))
    x.requires_grad_(True)
    y = sparse(x)
    assert y.requires_grad and y.is_contiguous(memory_format=_layout(channels_last))
    x64 = x.detach().double().requires_grad_(True)
    ref = _reference(dense, x64)
    assert_close(y, ref, TOL[torch.float32], "forward with autograd")
    grad_out = randn(*ref.shape, dtype=torch.float64, gen=gen)
    y.backward(grad_out.float())
    ref.backward(grad_out)
    assert_close(x.grad, x64.grad, TOL[torch.float32], "input gradient")


def test_pointwise_conv_uses_the_activations_without_im2col(gen):
    sparse, _ = _pruned(torch.float32, gen, kernel=1, padding=0)
    one = randn(1, C_IN, 6, 5, dtype=torch.float32, gen=gen)
    cols = sparse._columns(one, 6, 5)
    assert cols.data_ptr() == one.data_ptr() and cols.shape == (C_IN, 30)  # the image itself, no copy
    nhwc = randn(3, C_IN, 6, 5, dtype=torch.float32, gen=gen).to(memory_format=torch.channels_last)
    cols = sparse._columns(nhwc, 6, 5)  # one transposing copy: rows of X contiguous for the gathers
    assert cols.shape == (C_IN, 90) and cols.is_contiguous()
    assert torch.equal(cols, nhwc.permute(1, 0, 2, 3).reshape(C_IN, 90))


def test_config_is_looked_up_once_per_gemm_bucket(gen, monkeypatch):
    sparse, _ = _pruned(torch.float32, gen, stride=2)
    calls = []
    features = sparse.sparse_weight.features
    monkeypatch.setattr(sparse.sparse_weight, "features",
                        lambda n, dtype=None, **kw: calls.append(n) or features(n, dtype, **kw))
    with torch.no_grad():
        for batch in (2, 2, 1):
            sparse(randn(batch, C_IN, 7, 7, dtype=torch.float32, gen=gen))  # 4 x 4 outputs per image
    assert calls == [32, 16]  # N = batch x H_out x W_out, one lookup per bucket
    assert sparse.sparse_weight.shape == (C_OUT, C_IN * 9)  # the tuning problem's M x K: the GEMM view


def test_cpu_without_interpreter_falls_back_to_pytorch(gen, monkeypatch):
    monkeypatch.setattr(linear_module, "interpreting", lambda: False)
    sparse, dense = _pruned(torch.float16, gen)
    x = randn(2, C_IN, 5, 5, dtype=torch.float16, gen=gen)
    with pytest.warns(RuntimeWarning, match="SparseConv2d: not using .*need a CUDA device"):
        y = sparse(x)
    assert_close(y, _reference(dense, x), TOL[torch.float16], "CPU fallback")


def test_state_dict_round_trip_dense_checkpoints_and_repr(gen):
    sparse, dense = _pruned(torch.float32, gen, kernel=3, stride=2, padding=1)
    x = randn(2, C_IN, 7, 7, dtype=torch.float32, gen=gen)
    fresh = SparseConv2d(C_IN, C_OUT, 3, 2, 1)
    fresh.load_state_dict(sparse.state_dict())
    assert torch.equal(fresh(x), sparse(x))
    from_dense = SparseConv2d(C_IN, C_OUT, 3, 2, 1)
    from_dense.load_state_dict(dense.state_dict())  # an nn.Conv2d checkpoint, zeros kept
    assert torch.equal(from_dense.dense_weight(), dense.weight.detach())
    with pytest.raises(RuntimeError, match=r"does not match this layer's \(6, 5, 5, 5\)"):
        SparseConv2d(C_IN, C_OUT, 5).load_state_dict(dense.state_dict())
    assert "kernel_size=(3, 3), stride=(2, 2)" in repr(sparse) and "sparsity=70.0%" in repr(sparse)


@pytest.mark.parametrize(
    "make,error,match",
    [
        (lambda s: SparseConv2d.from_conv(nn.Conv2d(8, 8, 3, groups=8)), ValueError, r"groups=8 \(depthwise\)"),
        (lambda s: SparseConv2d.from_conv(nn.Conv2d(8, 4, 3, groups=2)), ValueError, r"groups=2 \(grouped\)"),
        (lambda s: SparseConv2d(8, 8, 3, 1, 1, 1, 8), ValueError, "groups=8: only groups=1"),  # nn.Conv2d's order
        (lambda s: SparseConv2d(4, 4, 3, padding_mode="mirror"), ValueError, "padding_mode 'mirror'"),
        (lambda s: SparseConv2d.from_conv(nn.Linear(4, 4)), TypeError, "expects an nn.Conv2d"),
        (lambda s: s(torch.zeros(2, C_IN + 1, 5, 5)), ValueError, "expected 5 input channels .* got 6"),
        (lambda s: s(torch.zeros(4, 5, 5)), ValueError, "expected 5 input channels .*got 4"),
        (lambda s: s(torch.zeros(2, C_IN)), ValueError, r"\(B, C, H, W\) or \(C, H, W\)"),
        (lambda s: s(torch.zeros(1, C_IN, 1, 1)), ValueError, "smaller than the kernel"),
        (lambda s: s(torch.zeros(1, C_IN, 5, 5, dtype=torch.float16)), TypeError, "input is torch.float16"),
        (lambda s: SparseConv2d(4, 4, 3, stride=2, padding="same"), ValueError, "'same' needs stride 1"),
        (lambda s: SparseConv2d(4, 4, 3, padding="full"), ValueError, "padding 'full'"),
        (lambda s: SparseConv2d(4, 4, 0), ValueError, "must be positive"),
        (lambda s: SparseConv2d(4, 4, 3, backend="cudnn"), ValueError, "unknown backend"),
    ],
)
def test_errors_name_the_problem(make, error, match, gen):
    sparse, _ = _pruned(torch.float32, gen, padding=0)
    with pytest.raises(error, match=match):
        make(sparse)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["csr", "2:4"])
def test_cuda_graph_capture_matches_conv2d_channels_last(fmt, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dense = nn.Conv2d(128, 256, 3, padding=1, device="cuda", dtype=torch.float16)
    sparse = SparseConv2d.from_conv(dense, fmt, sparsity=0.5 if fmt == "2:4" else 0.9, backend="triton")
    with torch.no_grad():
        dense.weight.copy_(sparse.dense_weight())
    static_x = torch.randn(4, 128, 14, 14, device="cuda", dtype=torch.float16, generator=gen)
    static_x = static_x.to(memory_format=torch.channels_last)
    graph, static_y = captured_graph(sparse, static_x)
    for _ in range(2):
        static_x.copy_(torch.randn(static_x.shape, device="cuda", dtype=torch.float16, generator=gen))
        graph.replay()
        torch.cuda.synchronize()
        assert static_y.is_contiguous(memory_format=torch.channels_last)
        assert_close(static_y, _reference(dense, static_x), TOL[torch.float16], f"{fmt} graph replay")
