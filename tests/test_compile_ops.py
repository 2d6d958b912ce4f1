"""The functional ops under ``torch.compile``: one custom operator each (``stuning.ops.compiled``).

On a CPU the kernels run in Triton's interpreter and the graphs are compiled with the ``eager`` and
``aot_eager`` backends, ``fullgraph=True`` where an op must not break the graph. The GPU test runs
Inductor with CUDA graphs (``mode="reduce-overhead"``), which replays the ops with the rest of a step.
"""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from naive import TOL, assert_close, randn, random_sparse, sddmm_ref, semi24_ref, spmm_ref

import stuning
from stuning.formats import CSRMatrix, Semi24Matrix
from stuning.formats.handles import Handles
from stuning.ops.sddmm import _sddmm_operator
from stuning.ops.semi24 import _semi24_operator
from stuning.ops.spmm import _spmm_operator

BACKENDS = ["eager", "aot_eager"]


@pytest.fixture(autouse=True)
def fresh_compiler():
    """Each test compiles afresh: Dynamo's caches would carry one test's graphs into the next."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, TOL[torch.float32]), (torch.bfloat16, TOL[torch.bfloat16])],
                         ids=["fp32", "bf16"])
def test_spmm_and_sddmm_compile_into_one_graph(dtype, tol, backend, gen):
    # Odd shapes, a bias, B as a transposed view (a layer's X^T), and traced ops on either side.
    a_dense = random_sparse(23, 37, 0.2, dtype, gen)
    a = CSRMatrix.from_dense(a_dense)
    bias = randn(23, dtype=dtype, gen=gen)
    mask_dense = random_sparse(23, 19, 0.3, dtype, gen)
    mask = CSRMatrix.from_dense(mask_dense)

    def step(x, q, k):
        y = torch.relu(stuning.spmm(a, (x * 2).t(), bias=bias)) + 1
        s = stuning.sddmm(mask, q, k, alpha=0.5, beta=2.0)
        return y, s.values.float().exp()

    compiled = torch.compile(step, backend=backend, fullgraph=True)
    for n in (9, 14):  # a second width: Dynamo recompiles, the operators still answer
        x = randn(n, 37, dtype=dtype, gen=gen)
        q, k = randn(23, n, dtype=dtype, gen=gen), randn(n, 19, dtype=dtype, gen=gen)
        got = compiled(x, q, k)
        for g, want in zip(got, step(x, q, k), strict=True):
            assert g.shape == want.shape and g.dtype == want.dtype and g.stride() == want.stride()
            torch.testing.assert_close(g, want, rtol=0, atol=0)  # the same kernels and configs
        y_ref = torch.relu(spmm_ref(a_dense, x.t() * 2) + bias.double()[:, None]) + 1
        assert_close(got[0], y_ref, tol, f"spmm {dtype} n={n}")
        s_ref = sddmm_ref(mask_dense, q, k, alpha=0.5, beta=2.0)[mask_dense != 0].exp()
        assert_close(got[1], s_ref, tol * 4, f"sddmm {dtype} n={n}")  # exp magnifies rounding


@pytest.mark.parametrize("dtype,tol", [(torch.float16, TOL[torch.float16]), (torch.bfloat16, TOL[torch.bfloat16])],
                         ids=["fp16", "bf16"])
def test_semi24_mm_compiles_into_one_graph(dtype, tol, gen):
    w = Semi24Matrix.from_dense(randn(20, 37, dtype=dtype, gen=gen), prune=True, pad=True)
    x = randn(37, 11, dtype=dtype, gen=gen)
    y = torch.compile(lambda x: stuning.semi24_mm(w, x) * 3, backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(y, stuning.semi24_mm(w, x) * 3, rtol=0, atol=0)
    assert_close(y, semi24_ref(w.to_dense(), x) * 3, tol, f"semi24_mm {dtype}")


def test_out_receives_the_result(gen):
    a_dense = random_sparse(16, 24, 0.25, torch.float32, gen)
    a = CSRMatrix.from_dense(a_dense)
    w = Semi24Matrix.from_dense(randn(16, 24, dtype=torch.float16, gen=gen), prune=True)
    x = randn(24, 8, dtype=torch.float32, gen=gen)
    out, out16 = torch.full((8, 16), float("nan")).t(), torch.full((16, 8), float("nan"), dtype=torch.float16)

    def step(x):
        return stuning.spmm(a, x, out=out), stuning.semi24_mm(w, x.half(), out=out16)

    y, y16 = torch.compile(step, backend="aot_eager", fullgraph=True)(x)
    assert y is out and y16 is out16
    assert_close(out, spmm_ref(a_dense, x), TOL[torch.float32], "spmm out=")
    assert_close(out16, semi24_ref(w.to_dense(), x.half()), TOL[torch.float16], "semi24_mm out=")


def test_each_matrix_gets_its_own_product(gen):
    """One compiled function called with several matrices: Dynamo recompiles on each one's handle
    (as an int it would have made the handle a symbol, which names no matrix)."""
    compiled = torch.compile(lambda a, x: stuning.spmm(a, x), backend="aot_eager", fullgraph=True)
    x = randn(24, 6, dtype=torch.float32, gen=gen)
    for _ in range(3):
        a_dense = random_sparse(16, 24, 0.3, torch.float32, gen)
        assert_close(compiled(CSRMatrix.from_dense(a_dense), x), spmm_ref(a_dense, x), TOL[torch.float32], "spmm")


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_matrix_answers_to_its_own_handle(how, gen):
    a = CSRMatrix.from_dense(random_sparse(16, 24, 0.3, torch.float32, gen))
    copied = copy.deepcopy(a) if how == "deepcopy" else pickle.loads(pickle.dumps(a))
    assert copied._handle is not None and copied._handle != a._handle
    copied.values.mul_(-2.0)
    x = randn(24, 6, dtype=torch.float32, gen=gen)
    compiled = torch.compile(lambda a, x: stuning.spmm(a, x), backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(copied, x), stuning.spmm(copied, x), rtol=0, atol=0)
    torch.testing.assert_close(compiled(a, x), stuning.spmm(a, x), rtol=0, atol=0)
    assert_close(compiled(copied, x), spmm_ref(a.to_dense(), x) * -2.0, TOL[torch.float32], how)


def test_what_has_no_operator_runs_eagerly_as_a_graph_break(gen):
    """A torch sparse tensor, an explicit config, and a matrix built inside the compiled function
    (SDDMM's result fed to SpMM: the attention pattern) each break the graph and still compute."""
    a_dense = random_sparse(16, 24, 0.3, torch.float32, gen)
    mask_dense = random_sparse(16, 12, 0.4, torch.float32, gen)
    a, mask = CSRMatrix.from_dense(a_dense), CSRMatrix.from_dense(mask_dense)
    x = randn(24, 5, dtype=torch.float32, gen=gen)
    q, k, v = (randn(*s, dtype=torch.float32, gen=gen) for s in ((16, 8), (8, 12), (12, 5)))
    cases = {
        "torch sparse": (lambda x: stuning.spmm(a_dense.to_sparse_csr(), x), (x,), spmm_ref(a_dense, x)),
        "config": (lambda x: stuning.spmm(a, x, config={"rows": 1}), (x,), spmm_ref(a_dense, x)),
        "sddmm then spmm": (lambda q, k, v: stuning.spmm(stuning.sddmm(mask, q, k), v), (q, k, v),
                            sddmm_ref(mask_dense, q, k) @ v.double()),
    }
    for name, (fn, args, want) in cases.items():
        torch._dynamo.reset()
        with pytest.raises(torch._dynamo.exc.Unsupported):  # not one graph
            torch.compile(fn, backend="aot_eager", fullgraph=True)(*args)
        torch._dynamo.reset()
        assert_close(torch.compile(fn, backend="aot_eager")(*args), want, TOL[torch.float32], name)


def test_a_matrix_built_while_tracing_has_no_handle(gen):
    mask = CSRMatrix.from_dense(random_sparse(16, 12, 0.4, torch.float32, gen))
    q, k = randn(16, 8, dtype=torch.float32, gen=gen), randn(8, 12, dtype=torch.float32, gen=gen)
    result = torch.compile(lambda q, k: stuning.sddmm(mask, q, k), backend="aot_eager", fullgraph=True)(q, k)
    assert isinstance(result, CSRMatrix) and result._handle is None
    assert result.crow is mask.crow and result.col is mask.col
    torch.testing.assert_close(result.values, stuning.sddmm(mask, q, k).values, rtol=0, atol=0)


def test_bad_input_fails_while_compiling_as_in_eager(gen):
    a = CSRMatrix.from_dense(random_sparse(16, 24, 0.3, torch.float32, gen))
    mask = CSRMatrix.from_dense(random_sparse(16, 12, 0.4, torch.float32, gen))
    w = Semi24Matrix.from_dense(randn(16, 24, dtype=torch.float16, gen=gen), prune=True)
    cases = [
        (lambda: stuning.spmm(a, torch.randn(23, 4)), ValueError, "spmm: A is 16 x 24 but B has 23 rows"),
        (lambda: stuning.spmm(a, torch.randn(24, 4, dtype=torch.float16)), TypeError, "A is torch.float32 but B"),
        (lambda: stuning.sddmm(mask, torch.randn(16, 8), torch.randn(8, 11)), ValueError, "B 12 columns"),
        (lambda: stuning.sddmm(mask, torch.randn(16, 8), torch.randn(8, 12), alpha=float("inf")), ValueError,
         "alpha must be finite"),
        (lambda: stuning.sddmm(mask, torch.randn(16, 8), torch.randn(8, 12, dtype=torch.float64)), TypeError,
         "B is torch.float64.*they must match"),
        (lambda: stuning.semi24_mm(w, torch.randn(20, 4, dtype=torch.float16)), ValueError, "X has 20 rows"),
    ]
    for fn, error, message in cases:
        with pytest.raises(error, match=message):
            fn()  # eager
        torch._dynamo.reset()
        with pytest.raises(Exception, match=message):  # Dynamo may wrap the fake's error in its own
            torch.compile(fn, backend="aot_eager", fullgraph=True)()


@pytest.mark.parametrize("op", ["spmm", "sddmm", "semi24_mm"])
def test_operators_pass_torch_library_checks(op, gen):
    """Schema, fake tensors (static and dynamic shapes) and AOT dispatch."""
    if op == "semi24_mm":
        w = Semi24Matrix.from_dense(randn(16, 24, dtype=torch.float16, gen=gen), prune=True)
        args = (w._handle, w.values, w.masks, randn(24, 5, dtype=torch.float16, gen=gen), None)
        torch.library.opcheck(_semi24_operator, args)
        return
    a = CSRMatrix.from_dense(random_sparse(16, 24, 0.3, torch.float32, gen))
    if op == "spmm":
        torch.library.opcheck(_spmm_operator, (a._handle, a.values, randn(24, 5, dtype=torch.float32, gen=gen),
                                               randn(16, dtype=torch.float32, gen=gen)))
    else:
        q, k = randn(16, 7, dtype=torch.float32, gen=gen), randn(7, 24, dtype=torch.float32, gen=gen)
        torch.library.opcheck(_sddmm_operator, (a._handle, a.values, q, k, 0.5, 1.0))


def test_export_is_refused_with_the_reason(gen):
    a = CSRMatrix.from_dense(random_sparse(16, 24, 0.3, torch.float32, gen))

    class Product(torch.nn.Module):
        def forward(self, x):
            return stuning.spmm(a, x)

    with pytest.raises(RuntimeError, match="stuning.spmm: torch.export is not supported"):
        torch.export.export(Product(), (torch.randn(24, 4),))


def test_a_freed_object_is_named_in_the_error():
    handles = Handles("sparse matrix")

    class Thing:
        pass

    thing = Thing()
    handle = handles.register(thing)
    assert handles.get(handle, "stuning::spmm") is thing
    del thing
    with pytest.raises(RuntimeError, match=f"stuning::spmm: no sparse matrix with handle {handle} is alive"):
        handles.get(handle, "stuning::spmm")


@pytest.mark.gpu
def test_ops_replay_in_one_cuda_graph_on_the_gpu(device_gen):
    """``mode="reduce-overhead"``: SpMM, SDDMM and 2:4 with the ops between them replay as CUDA graphs,
    no op skipped or run eagerly, on new inputs each call and at two widths."""
    from torch._dynamo.utils import counters

    a_dense = random_sparse(1024, 2048, 0.1, torch.float16, device_gen)
    a = CSRMatrix.from_dense(a_dense)
    w = Semi24Matrix.from_dense(randn(1024, 2048, dtype=torch.float16, gen=device_gen), prune=True)
    mask_dense = random_sparse(512, 512, 0.05, torch.float16, device_gen)
    mask = CSRMatrix.from_dense(mask_dense)

    def step(x, q, k):
        y = torch.relu(stuning.spmm(a, x * 2)) + stuning.semi24_mm(w, x)
        return y, stuning.sddmm(mask, q, k).values.float() * 0.5 + 1

    counters.clear()
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for n in (16, 16, 16, 64, 64, 64, 16):
        x = randn(2048, n, dtype=torch.float16, gen=device_gen)
        q, k = randn(512, 64, dtype=torch.float16, gen=device_gen), randn(64, 512, dtype=torch.float16, gen=device_gen)
        y, s = (t.clone() for t in compiled(x, q, k))  # a replay's outputs live in the graph's pool
        want = torch.relu(spmm_ref(a_dense, x * 2)) + semi24_ref(w.to_dense(), x)
        assert_close(y, want, TOL[torch.float16], f"spmm + semi24_mm, n={n}")
        assert_close(s, sddmm_ref(mask_dense, q, k)[mask_dense != 0] * 0.5 + 1, TOL[torch.float16], "sddmm")
    assert counters["inductor"]["cudagraph_skips"] == 0, dict(counters["inductor"])
