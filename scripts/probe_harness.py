"""The harness the GPU probes in scripts/ share: their random inputs, how they time a call, how
they check its result and where they write what they measured.

Each probe is run as ``python3 scripts/probe_<name>.py``, which puts this directory on the path.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import dataclass

import torch


def env_list(name: str, default: str, cast=float) -> list:
    """A comma-separated probe setting from the environment (``PROBE_NS=16,128``), each cast."""
    return [cast(v) for v in os.environ.get(name, default).split(",")]


def env_shapes(name: str, default: str) -> list[tuple[int, int]]:
    """Shapes from the environment as ``4096x4096,768x3072``."""
    return env_list(name, default, lambda s: tuple(int(v) for v in s.split("x")))


def probe_time_us(fn, smoke: bool) -> float:
    """Median time of ``fn`` in CUDA-graph replays with L2 flushed before every call, as the tuner
    times (a sub-L2 operand stayed resident across warm replays). ``smoke``: through Triton's
    interpreter there is no GPU time; ``fn`` runs once and the time is NaN."""
    if smoke:
        fn()
        return float("nan")
    from stuning.tuning.timing import flushed_graph_us

    with torch.cuda.stream(torch.cuda.Stream()):
        return flushed_graph_us(fn)


def check_close(y: torch.Tensor, ref: torch.Tensor, what: str, tol: float = 1e-2) -> None:
    """Raise unless ``y`` is within ``tol`` relative (Frobenius) error of the float64 ``ref``."""
    err = float((y.double() - ref).norm() / max(ref.norm(), 1e-30))
    if not err < tol:
        raise AssertionError(f"{what}: relative error {err:.2e} against the float64 reference")


def random_problem(m: int, k: int, n: int, sparsity: float, gen: torch.Generator, device: str,
                   dtype: torch.dtype = torch.float16):
    """W (m x k) with uniformly random zeros, X (k x n), both ``dtype``, and W @ X in float64."""
    w = torch.randn(m, k, generator=gen)
    w = (w * (torch.rand(m, k, generator=gen) >= sparsity)).to(dtype).to(device)
    x = torch.randn(k, n, generator=gen).to(dtype).to(device)
    return w, x, w.double() @ x.double()


@dataclass
class SpMMProbeProblem:
    n: int
    sparsity: float
    w: torch.Tensor  # dense W (fp16 unless asked otherwise)
    x: torch.Tensor
    ref: torch.Tensor  # W @ X in float64
    a: object  # W as stuning's CSRMatrix, rows padded to 4 (what the bench gives the kernels)
    pick: object  # the config stuning.spmm(a, x) runs: the database's, else the cost model's


def spmm_problems(m: int, k: int, ns, sparsities, device: str, *, seconds: float | None = None,
                  dtype: torch.dtype = torch.float16):
    """One ``SpMMProbeProblem`` per (N, sparsity), inputs from one generator seeded 0 (the same
    inputs run after run); none starts after ``seconds``."""
    import functools

    import stuning
    from stuning.ops.inputs import tuned_config
    from stuning.ops.spmm import spmm_features

    gen = torch.Generator(device="cpu").manual_seed(0)
    started = time.perf_counter()
    for n, sparsity in itertools.product(ns, sparsities):
        if seconds is not None and time.perf_counter() - started > seconds:
            print(f"stopped before n={n} sparsity={sparsity}: over {seconds:g} s", flush=True)
            return
        w, x, ref = random_problem(m, k, n, sparsity, gen, device, dtype)
        a = stuning.CSRMatrix.from_dense(w, pad_to=4)
        pick = tuned_config(a, "spmm", n, a.dtype, functools.partial(spmm_features, a, n))
        yield SpMMProbeProblem(n, sparsity, w, x, ref, a, pick)


@dataclass
class AttentionProbeProblem:
    length: int
    k: int
    sparsity: float
    mask: object  # L x L, uniformly random zeros, as stuning's CSRMatrix
    a: torch.Tensor  # L x K
    b: torch.Tensor  # K x L, K contiguous (Q @ K^T)
    ref: torch.Tensor  # (A @ B) at the mask's nonzeros, float64


def attention_problems(lengths, ks, sparsities, device: str, *, seconds: float | None = None,
                       dtype: torch.dtype = torch.float16):
    """One SDDMM ``AttentionProbeProblem`` per (L, K, sparsity), inputs from one generator seeded 0
    (the same inputs run after run); none starts after ``seconds``."""
    import stuning

    gen = torch.Generator(device="cpu").manual_seed(0)
    started = time.perf_counter()
    for length, k, sparsity in itertools.product(lengths, ks, sparsities):
        if seconds is not None and time.perf_counter() - started > seconds:
            print(f"stopped before L={length} K={k} sparsity={sparsity}: over {seconds:g} s", flush=True)
            return
        keep = torch.rand(length, length, generator=gen) >= sparsity
        mask = stuning.CSRMatrix.from_dense((keep * torch.randn(length, length, generator=gen)).to(dtype).to(device))
        a = torch.randn(length, k, generator=gen).to(dtype).to(device)
        b = torch.randn(length, k, generator=gen).to(dtype).to(device).t()
        ref = (a.double() @ b.double())[mask.row_ids().long(), mask.col.long()]
        yield AttentionProbeProblem(length, k, sparsity, mask, a, b, ref)


def sddmm_baseline_row(p: AttentionProbeProblem, smoke: bool) -> dict:
    """A result row's start: the problem, the dense product's time, and the library pick and its time."""
    import dataclasses

    import stuning
    from stuning.ops.inputs import tuned_config
    from stuning.tuning.features import sddmm_features

    pick = tuned_config(p.mask, "sddmm", p.k, p.a.dtype, lambda: sddmm_features(p.mask, p.k, p.a.dtype))
    return {"l": p.length, "k": p.k, "sparsity": p.sparsity, "nnz": p.mask.nnz,
            "dense_us": probe_time_us(lambda: p.a @ p.b, smoke), "pick": dataclasses.asdict(pick),
            "auto_us": probe_time_us(lambda: stuning.sddmm(p.mask, p.a, p.b), smoke)}


@dataclass
class Semi24ProbeProblem:
    m: int
    k: int
    n: int
    dense: torch.Tensor  # fp16 W with two of every four kept
    x: torch.Tensor
    ref: torch.Tensor  # W @ X in float64
    w: object  # W as stuning's Semi24Matrix
    pick: object  # the config stuning.semi24_mm(w, x) runs: the database's, else the cost model's


def random_24(m: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """An (m x k) float32 matrix with two random values kept in every group of four along K."""
    dense = torch.randn(m, k, generator=gen)
    keep = torch.rand(m, k // 4, 4, generator=gen).argsort(-1) < 2
    return dense * keep.reshape(m, k)


def semi24_gate_problems(shapes, seed: int):
    """The odd problems a 2:4 probe's gate checks, on the GPU: for each (M, K, N) in ``shapes`` and
    fp16 / bf16, (label, W as a ``Semi24Matrix``, X, a bias, W @ X in float64)."""
    import stuning

    gen = torch.Generator(device="cpu").manual_seed(seed)
    for (m, k, n), dtype in itertools.product(shapes, (torch.float16, torch.bfloat16)):
        dense = random_24(m, k, gen).to(dtype).cuda()
        x = torch.randn(k, n, generator=gen).to(dtype).cuda()
        bias = torch.randn(m, generator=gen).to(dtype).cuda()
        yield f"{m}x{k} n={n} {dtype}", stuning.Semi24Matrix.from_dense(dense), x, bias, dense.double() @ x.double()


def semi24_gate_failure(what: str, ref: torch.Tensor, bias: torch.Tensor, plain, biased) -> str | None:
    """One config of a 2:4 probe's gate: ``plain()`` must return W X (not run when None) and
    ``biased(bias=, out=)`` write W X + bias into a transposed Y. The failure in one line, or None."""
    try:
        if plain is not None:
            check_close(plain(), ref, what)
        m, n = ref.shape
        yt = torch.empty(n, m, dtype=bias.dtype, device=bias.device)
        biased(bias=bias, out=yt.t())
        check_close(yt.t(), ref + bias.double()[:, None], what + " bias, Y^T")
    except Exception as e:  # noqa: BLE001 - the gate lists every failure
        return f"{what}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"
    return None


def semi24_problems(shapes, ns, device: str):
    """One ``Semi24ProbeProblem`` per ((M, K), N), inputs from one generator seeded 0 (the same
    inputs run after run)."""
    import functools

    import stuning
    from stuning.ops.inputs import tuned_config
    from stuning.tuning.features import semi24_features

    gen = torch.Generator(device="cpu").manual_seed(0)
    for (m, k), n in itertools.product(shapes, ns):
        dense = random_24(m, k, gen).half().to(device)
        x = torch.randn(k, n, generator=gen).half().to(device)
        w = stuning.Semi24Matrix.from_dense(dense)
        pick = tuned_config(w, "semi24", n, w.dtype, functools.partial(semi24_features, m, k, n, w.dtype))
        yield Semi24ProbeProblem(m, k, n, dense, x, dense.double() @ x.double(), w, pick)


def spmm_baseline_row(p: SpMMProbeProblem, smoke: bool) -> dict:
    """A result row's start: the problem, cuBLAS's time and the library pick's (checked first)."""
    import functools

    import stuning

    lib = functools.partial(stuning.spmm, p.a, p.x, config=p.pick)
    check_close(lib(), p.ref, "library pick")
    return {"n": p.n, "sparsity": p.sparsity, "pick": p.pick.as_dict(),
            "cublas_us": probe_time_us(functools.partial(torch.matmul, p.w, p.x), smoke),
            "pick_us": probe_time_us(lib, smoke)}


def semi24_baseline_row(p: Semi24ProbeProblem) -> dict:
    """A result row's start: the problem, cuBLAS's time and the library pick's (checked first)."""
    import functools

    import stuning

    lib = functools.partial(stuning.semi24_mm, p.w, p.x, config=p.pick)
    check_close(lib(), p.ref, "library pick")
    return {"m": p.m, "k": p.k, "n": p.n, "pick": p.pick.as_dict(),
            "cublas_us": probe_time_us(functools.partial(torch.matmul, p.dense, p.x), False),
            "pick_us": probe_time_us(lib, False)}


def checked_time_us(run, ref: torch.Tensor, what: str, *, checks: int = 1, tol: float = 1e-2,
                    smoke: bool = False) -> float | str:
    """``run``'s time after ``checks`` calls matched ``ref``; or, for a config that fails to
    compile, run or check (a finding too), the error in one line. ``smoke`` (the interpreter, no
    GPU): only the check, whose failure then raises, and the time is NaN."""
    if smoke:
        check_close(run(), ref, what, tol)
        return float("nan")
    try:
        for i in range(checks):
            check_close(run(), ref, what if i == 0 else f"{what} (call {i + 1})", tol)
        return probe_time_us(run, False)
    except Exception as e:
        return f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"


def best_checked(results: dict) -> tuple[str, float, list[str]]:
    """The fastest of ``checked_time_us`` results by label: (label, us, the failures as "label: error");
    ("-", NaN, ...) when none ran."""
    timed = {c: t for c, t in results.items() if isinstance(t, float)}
    best = min(timed, key=timed.get) if timed else "-"
    return best, timed.get(best, float("nan")), [f"{c}: {t}" for c, t in results.items() if not isinstance(t, float)]


def write_results(rows: list, file_name: str) -> None:
    """``rows`` as JSON to ``$OUT/file_name`` when $OUT is set (the device tool returns that folder)."""
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, file_name), "w") as f:
            json.dump(rows, f, indent=1)
