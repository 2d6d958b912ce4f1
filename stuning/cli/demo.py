"""``stuning demo``: the library in one minute, on a GPU or, without one, through the interpreter."""

from __future__ import annotations

import time

import torch
from rich.table import Table

import stuning
from stuning.cli.output import console as make_console
from stuning.formats import CSRMatrix, Semi24Matrix, magnitude_prune
from stuning.kernels.target import interpreting
from stuning.ops.selection import SELECTOR
from stuning.tuning.features import sddmm_features, semi24_features, spmm_features
from stuning.tuning.session import key_for

# Relative Frobenius error allowed against the float64 reference (fp32 accumulation in every kernel).
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def _choose(features):
    """The config the ops pick with config=None, and where it came from."""
    return SELECTOR.choose(features, key_for(features))


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out = out.double()
    denom = ref.norm().item() or 1.0
    err = (out - ref).norm().item() / denom
    return err if err == err else float("inf")  # NaN never passes


def _time_us(fn, on_gpu: bool) -> float | None:
    if not on_gpu:
        return None
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def run(*, sparsity: float = 0.9, n: int | None = None, seed: int = 0, quiet: bool = False) -> dict:
    console = make_console(quiet=quiet)
    on_gpu = torch.cuda.is_available() and not interpreting()
    device = "cuda" if on_gpu else "cpu"
    m, k = (4096, 4096) if on_gpu else (128, 256)
    n = n or (128 if on_gpu else 32)
    dtype = torch.float16
    if on_gpu:
        console.print(f"[bold]GPU[/]: {torch.cuda.get_device_name()} — full-size run, timed against cuBLAS dense")
    else:
        console.print(
            "[bold yellow]No GPU[/]: running the Triton kernels through Triton's CPU interpreter "
            f"(TRITON_INTERPRET=1) on a small {m}x{k} matrix; results are checked, not timed."
        )
    gen = torch.Generator(device=device).manual_seed(seed)
    weight = torch.randn(m, k, generator=gen, device=device, dtype=torch.float32).to(dtype)
    x = torch.randn(k, n, generator=gen, device=device, dtype=torch.float32).to(dtype)
    rows = []

    def record(op, shape, cfg, source, out, ref, fn, dense_fn):
        err = _rel_err(out, ref)
        t = _time_us(fn, on_gpu)
        t_dense = _time_us(dense_fn, on_gpu)
        rows.append(
            {
                "op": op,
                "shape": shape,
                "config": cfg.as_dict(),
                "config_source": source,
                "rel_err": err,
                "tolerance": TOLERANCE[dtype],
                "ok": err <= TOLERANCE[dtype],
                "time_us": t,
                "dense_us": t_dense,
                "speedup_vs_dense": (t_dense / t) if t else None,
            }
        )

    start = time.perf_counter()
    # Unstructured: magnitude-prune, store as CSR (rows padded for aligned loads), Y = W @ X.
    w_sparse = magnitude_prune(weight, sparsity)
    a = CSRMatrix.from_dense(w_sparse, pad_to=4)
    cfg, source = _choose(spmm_features(a, n))
    y = stuning.spmm(a, x, config=cfg)
    record(
        "spmm", f"{m}x{k} @ {k}x{n}, {sparsity:.0%} zeros", cfg, source, y,
        w_sparse.double() @ x.double(), lambda: stuning.spmm(a, x, config=cfg), lambda: weight @ x,
    )
    # SDDMM: the weight gradient dY @ X^T, kept only where the pruned weight has entries.
    dy = torch.randn(m, n, generator=gen, device=device, dtype=torch.float32).to(dtype)
    mask = CSRMatrix.from_dense(w_sparse)
    xt = x.t()
    cfg, source = _choose(sddmm_features(mask, n, dtype))
    g = stuning.sddmm(mask, dy, xt, config=cfg)
    record(
        "sddmm", f"({m}x{n} @ {n}x{k}) at {mask.nnz} nonzeros", cfg, source, g.to_dense(),
        (dy.double() @ xt.double()) * (w_sparse != 0), lambda: stuning.sddmm(mask, dy, xt, config=cfg),
        lambda: dy @ xt,
    )
    # 2:4: prune two of every four by magnitude, Y = W @ X with on-chip decompression.
    w24 = Semi24Matrix.from_dense(weight, prune=True)
    cfg, source = _choose(semi24_features(m, k, n, dtype))
    y24 = stuning.semi24_mm(w24, x, config=cfg)
    record(
        "semi24", f"{m}x{k} (2:4) @ {k}x{n}", cfg, source, y24, w24.to_dense().double() @ x.double(),
        lambda: stuning.semi24_mm(w24, x, config=cfg), lambda: weight @ x,
    )
    elapsed = time.perf_counter() - start

    table = Table(title=f"stuning demo ({dtype}, {'GPU' if on_gpu else 'CPU interpreter'})")
    for col in ("op", "problem", "config", "from", "rel. error", "check"):
        table.add_column(col)
    if on_gpu:
        table.add_column("us")
        table.add_column("dense us")
        table.add_column("vs dense")
    for r in rows:
        cfg_text = " ".join(f"{key}={val}" for key, val in r["config"].items())
        cells = [r["op"], r["shape"], cfg_text, r["config_source"], f"{r['rel_err']:.1e}",
                 "ok" if r["ok"] else "[red]WRONG[/]"]
        if on_gpu:
            cells += [f"{r['time_us']:.1f}", f"{r['dense_us']:.1f}", f"{r['speedup_vs_dense']:.2f}x"]
        table.add_row(*cells)
    console.print(table)
    console.print(
        "'from': where each config came from: the tuning database (exact/nearest), the cost model, or the "
        "kernel's heuristic."
        + ("" if on_gpu else " Timings need a GPU; the interpreter only checks correctness.")
    )
    return {
        "device": torch.cuda.get_device_name() if on_gpu else "cpu (Triton interpreter)",
        "measured": on_gpu,
        "dtype": str(dtype),
        "seconds": elapsed,
        "results": rows,
        "ok": all(r["ok"] for r in rows),
    }
