"""SparseLinear against nn.Linear with the same zeros, through the Triton kernels and through PyTorch."""

from __future__ import annotations

import warnings

import pytest
import torch
from naive import TOL, assert_close, captured_graph, randn
from torch import nn

import stuning.nn.linear as linear_module
import stuning.tuning.launch as launch
from stuning.nn import SparseLinear

# Kernel dtypes per format; 2:4 in fp32 is served by PyTorch (tested below).
FORMAT_DTYPES = [("csr", d) for d in (torch.float32, torch.float16, torch.bfloat16)]
FORMAT_DTYPES += [("2:4", d) for d in (torch.float16, torch.bfloat16)]
# Odd sizes (K not a multiple of 4 pads the 2:4 weight) and leading dimensions of every kind.
IN_FEATURES, OUT_FEATURES = 37, 19
INPUT_SHAPES = [(IN_FEATURES,), (5, IN_FEATURES), (2, 3, IN_FEATURES)]


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(linear_module, "_warned", set())


def _dense_layer(dtype, gen, *, bias=True, in_features=IN_FEATURES, out_features=OUT_FEATURES) -> nn.Linear:
    layer = nn.Linear(in_features, out_features, bias=bias, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(randn(out_features, in_features, dtype=dtype, gen=gen))
        if bias:
            layer.bias.copy_(randn(out_features, dtype=dtype, gen=gen))
    return layer


def _pruned(fmt: str, dtype, gen, **options) -> tuple[SparseLinear, nn.Linear]:
    """A SparseLinear and the nn.Linear holding the same zeros."""
    dense = _dense_layer(dtype, gen, bias=options.pop("bias", True))
    sparse = SparseLinear.from_linear(dense, fmt, sparsity=0.5 if fmt == "2:4" else 0.7, **options)
    with torch.no_grad():
        dense.weight.copy_(sparse.dense_weight())
    return sparse, dense


def _reference(dense: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    y = x.double() @ dense.weight.double().t()
    return y if dense.bias is None else y + dense.bias.double()


@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("fmt,dtype", FORMAT_DTYPES, ids=lambda v: str(v).removeprefix("torch."))
def test_matches_linear_with_the_same_zeros(fmt, dtype, bias, backend, gen):
    sparse, dense = _pruned(fmt, dtype, gen, bias=bias, backend=backend)
    assert sparse.sparsity >= (0.45 if fmt == "2:4" else 0.69)
    for shape in INPUT_SHAPES:
        x = randn(*shape, dtype=dtype, gen=gen)
        with torch.no_grad():
            y = sparse(x)
        ref = _reference(dense, x)
        assert y.shape == ref.shape and y.dtype == dtype and y.is_contiguous()
        assert_close(y, ref, TOL[dtype], f"{fmt} {dtype} {backend} input {shape}")
        assert_close(dense(x), ref, TOL[dtype], "nn.Linear itself")


def test_empty_batch_and_config_cached_per_token_bucket(gen, monkeypatch):
    sparse, _ = _pruned("csr", torch.float32, gen)
    assert sparse(torch.zeros(0, IN_FEATURES)).shape == (0, OUT_FEATURES)
    calls = []
    features = sparse.sparse_weight.features
    monkeypatch.setattr(sparse.sparse_weight, "features",
                        lambda n, dtype=None, **kw: calls.append(n) or features(n, dtype, **kw))
    for tokens in (24, 24, 30, 32):  # one bucket (32) and one alignment class for 24 and for 30, 32
        sparse(randn(tokens, IN_FEATURES, dtype=torch.float32, gen=gen))
    assert calls == [24, 30, 32]


def test_autocast_casts_the_input_to_the_weight_dtype(gen):
    sparse, dense = _pruned("csr", torch.bfloat16, gen)
    x = randn(4, IN_FEATURES, dtype=torch.float32, gen=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = sparse(x)
    assert y.dtype == torch.bfloat16
    assert_close(y, _reference(dense, x.bfloat16()), TOL[torch.bfloat16], "under autocast")


def test_fp32_2_4_runs_through_pytorch_with_one_warning_or_refuses(gen):
    sparse, dense = _pruned("2:4", torch.float32, gen)
    x = randn(4, IN_FEATURES, dtype=torch.float32, gen=gen)
    with pytest.warns(RuntimeWarning, match="2:4 kernel takes torch.float16, torch.bfloat16"):
        assert_close(sparse(x), _reference(dense, x), TOL[torch.float32], "fp32 2:4 through torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sparse(x)  # warned once only
    strict, _ = _pruned("2:4", torch.float32, gen, backend="triton")
    with pytest.raises(TypeError, match="backend='triton'.*2:4 kernel"):
        strict(x)


def test_cpu_without_interpreter_falls_back_to_pytorch(gen, monkeypatch):
    monkeypatch.setattr(linear_module, "interpreting", lambda: False)
    sparse, dense = _pruned("csr", torch.float16, gen)
    x = randn(3, IN_FEATURES, dtype=torch.float16, gen=gen)
    with pytest.warns(RuntimeWarning, match="need a CUDA device"):
        y = sparse(x)
    assert_close(y, _reference(dense, x), TOL[torch.float16], "CPU fallback")


def test_state_dict_round_trip_and_dense_checkpoints(gen):
    for fmt in ("csr", "2:4"):
        sparse, dense = _pruned(fmt, torch.float16, gen)
        x = randn(6, IN_FEATURES, dtype=torch.float16, gen=gen)
        fresh = SparseLinear(IN_FEATURES, OUT_FEATURES, format=fmt, dtype=torch.float16)
        fresh.load_state_dict(sparse.state_dict())
        assert torch.equal(fresh(x), sparse(x)), fmt
        from_dense = SparseLinear(IN_FEATURES, OUT_FEATURES, format=fmt, dtype=torch.float16)
        from_dense.load_state_dict(dense.state_dict())  # a dense nn.Linear checkpoint, zeros kept
        assert torch.equal(from_dense.dense_weight(), dense.weight.detach()), fmt
    assert set(sparse.state_dict()) == {"weight_values", "weight_masks", "bias"}
    with pytest.raises(RuntimeError, match="does not match"):
        SparseLinear(8, 4, format="csr").load_state_dict(dense.state_dict())


def test_2to4_checkpoints_of_the_position_layout_load(gen):
    # stuning 0.1 saved 2:4 layers as "weight_meta": 2-bit positions, 16 to an int32 word.
    sparse, dense = _pruned("2:4", torch.float16, gen)
    state = sparse.state_dict()
    pos = sparse.sparse_weight.matrix.positions()
    words = pos.shape[1] // 16 + (pos.shape[1] % 16 > 0)
    padded = torch.zeros(pos.shape[0], 16 * words, dtype=torch.int64)
    padded[:, : pos.shape[1]] = pos
    packed = (padded.reshape(pos.shape[0], words, 16) << (2 * torch.arange(16))).sum(-1)
    state["weight_meta"] = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
    del state["weight_masks"]
    fresh = SparseLinear(IN_FEATURES, OUT_FEATURES, format="2:4", dtype=torch.float16)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.dense_weight(), dense.weight.detach())


def test_2to4_checkpoint_with_corrupt_masks_is_refused(gen):
    sparse, _ = _pruned("2:4", torch.float16, gen)
    state = sparse.state_dict()
    state["weight_masks"] = state["weight_masks"].clone()
    state["weight_masks"][1, 0] |= 0xF  # group 0 of row 1 keeps all four columns
    fresh = SparseLinear(IN_FEATURES, OUT_FEATURES, format="2:4", dtype=torch.float16)
    with pytest.raises(ValueError, match="corrupt masks: row 1, group 0"):
        fresh.load_state_dict(state)


def test_to_dtype_and_repr(gen):
    sparse, dense = _pruned("csr", torch.float32, gen)
    text = repr(sparse)
    assert "format='csr'" in text and "sparsity=70.0%" in text
    half = sparse.half()
    assert half.dtype == torch.float16 and half.weight_crow.dtype == torch.int32
    x = randn(4, IN_FEATURES, dtype=torch.float16, gen=gen)
    assert_close(half(x), _reference(dense, x), TOL[torch.float16], "after .half()")
    strict = SparseLinear.from_linear(_dense_layer(torch.float32, gen), "csr", backend="triton").double()
    with pytest.raises(TypeError, match="float64"):
        strict(torch.zeros(2, IN_FEATURES, dtype=torch.float64))


@pytest.mark.parametrize(
    "make,error,match",
    [
        (lambda s: s(torch.zeros(3, IN_FEATURES + 1)), ValueError, "does not end in in_features = 37"),
        (lambda s: s(torch.zeros(3, IN_FEATURES, dtype=torch.float16)), TypeError, "input is torch.float16"),
        (lambda s: SparseLinear(4, 4, backend="cuda"), ValueError, "unknown backend"),
        (lambda s: SparseLinear(4, 4, format="bsr"), ValueError, "unknown sparse format"),
        (lambda s: SparseLinear.from_linear(nn.Conv1d(2, 2, 1)), TypeError, "expects an nn.Linear"),
        (lambda s: SparseLinear.from_linear(nn.Linear(8, 4), "2:4"), ValueError, "not 2:4 sparse.*sparsity=0.5"),
        (lambda s: SparseLinear.from_linear(nn.Linear(8, 4), "2:4", sparsity=0.7), ValueError, "2 of every 4"),
    ],
)
def test_errors_name_the_problem(make, error, match, gen):
    sparse, _ = _pruned("csr", torch.float32, gen)
    with pytest.raises(error, match=match):
        make(sparse)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["csr", "2:4"])
def test_cuda_graph_capture_matches_linear(fmt, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dense = nn.Linear(1024, 768, device="cuda", dtype=torch.float16)
    sparse = SparseLinear.from_linear(dense, fmt, sparsity=0.5 if fmt == "2:4" else 0.9, backend="triton")
    with torch.no_grad():
        dense.weight.copy_(sparse.dense_weight())
    static_x = torch.randn(4, 32, 1024, device="cuda", dtype=torch.float16, generator=gen)
    graph, static_y = captured_graph(sparse, static_x)
    for _ in range(2):
        static_x.copy_(torch.randn(static_x.shape, device="cuda", dtype=torch.float16, generator=gen))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(static_y, _reference(dense, static_x), TOL[torch.float16], f"{fmt} graph replay")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_inputs_are_read_through_a_transposed_view_and_copied_only_for_gathers(gen, monkeypatch, dtype):
    sparse, dense = _pruned("csr", dtype, gen)
    elt = torch.empty((), dtype=dtype).element_size()
    monkeypatch.setattr(launch, "X_VIEW_MAX_BYTES", 6 * IN_FEATURES * elt)  # up to 6 tokens gathered in place
    handed, gathered = [], []
    real = sparse.sparse_weight.matmul
    monkeypatch.setattr(sparse.sparse_weight, "matmul", lambda x, **kw: handed.append(x.stride()) or real(x, **kw))

    def spy(module, name, b_index):
        kernel = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, **kw: gathered.append(a[b_index].stride()) or kernel(*a, **kw))

    spy(launch.spmm_kernel, "spmm", 3)  # whichever gathering kernel the lookup picks
    spy(launch.sell_kernel, "spmm_sell", 4)
    strided = randn(5, 2 * IN_FEATURES, dtype=dtype, gen=gen)[:, ::2]  # 5 tokens, every other column
    for x in (randn(1, IN_FEATURES, dtype=dtype, gen=gen), randn(6, IN_FEATURES, dtype=dtype, gen=gen), strided,
              randn(7, IN_FEATURES, dtype=dtype, gen=gen)):
        with torch.no_grad():
            assert_close(sparse(x), _reference(dense, x), TOL[dtype], f"{tuple(x.shape)} tokens")
    # The layer hands on X^T as a view of X's rows (made contiguous first when X was not) at every
    # size; the gathering kernels read it in place up to 6 tokens and a copy to rows from 7 on.
    assert handed == [(1, IN_FEATURES)] * 4
    assert gathered == [(1, IN_FEATURES)] * 3 + [(7, 1)]
    assert [sparse.reads_x_transposed(t) for t in (1, 2, 6, 7, 8192)] == [False, True, True, True, True]
