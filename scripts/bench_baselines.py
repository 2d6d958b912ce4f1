#!/usr/bin/env python3
"""The first benchmark table: stuning's default-config kernels against the vendor paths, same run.

For every case of the suite (stuning/suite.py), on matrices from stuning/matrices.py generated on
the GPU, this times the stuning kernel with its default heuristic config (``--configs heuristic``,
the untuned baseline; ``--configs auto`` passes ``config=None`` instead, which asks the tuning
database, then the cost model, then the heuristic) and the baselines a PyTorch user would reach
for, and reports each as a ratio to stuning:

* ``dense``: cuBLAS ``torch.mm`` of the same matrix stored dense (zeros included), same dtype,
  TF32 off for fp32;
* ``cusparse``: ``torch.sparse.mm`` on a torch sparse CSR tensor (SpMM), or
  ``torch.sparse.sampled_addmm`` (SDDMM; fp32 only on CUDA, n/a for fp16/bf16);
* ``cslt``: cuSPARSELt, ``torch._cslt_compress`` once, ``torch._cslt_sparse_mm`` timed (2:4);
* ``torch24``: ``torch.sparse.to_sparse_semi_structured(W)`` converted once, then ``W_s @ X``;
  ``torch24_conv``: conversion plus matmul on every call (2:4).

Each stuning output (and each baseline's) is first checked against the fp32 dense product
(relative Frobenius error; ``ok`` flags stuning's against a per-dtype tolerance). Then every
implementation is probed (host time per call, and GPU time with the launches queued behind a sleep
kernel) and one method times the whole row: ``triton.testing.do_bench`` (median, L2 flushed before
every call), or ``triton.testing.do_bench_cudagraph`` (median of CUDA-graph replays, warm L2) when
some implementation runs under ``--graph-below-us`` or launches slower than it runs (torch's
cuSPARSELt path spends ~0.5-1 ms of host time per call), where do_bench would time the host. The
``timing`` and ``timing_note`` columns say which and why. Writes ``results.csv``, ``summary.md`` and
``speedup.png`` under ``--out``; ``results.csv`` is also rewritten every 20 s while running.

    python3 scripts/bench_baselines.py --preset quick --out OUT           # ~1 minute on an H100
    python3 scripts/bench_baselines.py --preset first-table --out OUT     # ~2-4 minutes on an H100
    python3 scripts/bench_baselines.py --smoke --out /tmp/bb              # CPU, Triton interpreter
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sys
import time
import warnings
import zlib
from pathlib import Path

BASELINES = ("dense", "cusparse", "cslt", "torch24", "torch24_conv")
OP_BASELINES = {
    "spmm": ("dense", "cusparse"),
    "sddmm": ("dense", "cusparse"),
    "semi24": ("dense", "cslt", "torch24", "torch24_conv"),
}
# results.csv column order (columns missing from a run are left out; unlisted ones go last).
COLUMNS = (
    ["op", "name", "family", "dtype", "m", "k", "n", "sparsity", "skew_cv", "row_cv", "nnz", "time_us"]
    + [f"{b}_us" for b in BASELINES]
    + [f"speedup_vs_{b}" for b in BASELINES]
    + ["rel_err", "tol", "ok", "error"]
    + [f"{b}_err" for b in BASELINES]
    + ["timing", "timing_note", "probe_us", "host_us"]
    + [f"{b}_host_us" for b in BASELINES]
    + [f"{b}_note" for b in BASELINES]
    + ["torch24_backend", "dense_bytes", "format_bytes", "bytes_ratio", "vendor_bytes", "vendor_bytes_ratio"]
    + ["config", "config_source", "seconds", "device", "torch", "triton", "cuda", "cusparselt"]
)
# Relative Frobenius error allowed against the fp32 dense product (fp32 accumulation everywhere;
# fp16/bf16 outputs are rounded once).
TOLERANCE = {"fp32": 1e-4, "fp16": 2e-3, "bf16": 1.5e-2}
PRESET_MAX_SECONDS = {"first-table": 330.0}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="stuning default-config kernels vs cuBLAS / cuSPARSE / cuSPARSELt, as speedup ratios.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--preset", default="quick", help="suite slice: quick, first-table or full")
    ap.add_argument("--ops", default="spmm,sddmm,semi24", help="comma list of ops")
    ap.add_argument("--dtypes", help="comma list: fp32,fp16,bf16")
    ap.add_argument("--shapes", help="comma list: transformer,bert,llama7b,attention or MxK")
    ap.add_argument("--ns", help="comma list of N (SpMM, 2:4)")
    ap.add_argument("--ks", help="comma list of the inner dimension K (SDDMM)")
    ap.add_argument("--sparsities", help="comma list, as fractions or percents (0.9 or 90)")
    ap.add_argument("--skews", help="comma list of row-length cv (SpMM): 0,0.4")
    ap.add_argument("--sample", type=int, help="a seeded random subset of this many cases per op")
    ap.add_argument("--limit", type=int, help="run at most this many cases in all")
    ap.add_argument(
        "--max-seconds",
        type=float,
        help="stop starting new cases after this long (first-table: 330; 0: no limit)",
    )
    ap.add_argument(
        "--order",
        choices=("shuffle", "interleave", "suite"),
        default="shuffle",
        help="case order: ops round-robin, each shuffled (seeded) or in suite order; or op by op",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--configs",
        choices=("heuristic", "auto"),
        default="heuristic",
        help="stuning's config: the kernel's default heuristic, or config=None (database > model > heuristic)",
    )
    ap.add_argument("--pad-to", type=int, default=4, help="row padding of stuning's CSR matrices (README's choice)")
    ap.add_argument(
        "--graph-below-us",
        type=float,
        default=50.0,
        help="use CUDA-graph replay for rows where some implementation runs faster than this (us) or is host-bound",
    )
    ap.add_argument("--warmup-ms", type=float, default=10.0, help="do_bench warm-up")
    ap.add_argument("--rep-ms", type=float, default=40.0, help="do_bench measurement time")
    ap.add_argument("--graph-rep-ms", type=float, default=8.0, help="do_bench_cudagraph time per graph")
    ap.add_argument("--out", default="bench_baselines_out", help="output directory")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="CPU smoke run: Triton interpreter, tiny shapes, no vendor baselines, perf_counter",
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 if any stuning result is wrong or fails")
    args = ap.parse_args(argv)
    if args.max_seconds is None:
        args.max_seconds = PRESET_MAX_SECONDS.get(args.preset)
    if args.max_seconds == 0:
        args.max_seconds = None
    return args


def _split(s: str | None, conv=str):
    return None if s is None else [conv(x) for x in s.split(",") if x.strip()]


# ----------------------------------------------------------------------------------------- cases
def select_cases(args) -> list:
    from stuning import suite

    ops = _split(args.ops)
    unknown = set(ops) - set(suite.SUITES)
    if unknown:
        raise SystemExit(f"unknown ops {sorted(unknown)}; known: {sorted(suite.SUITES)}")
    if args.smoke:
        per_op = {
            "spmm": [
                suite.SpMMCase(64, 96, 16, 0.9, 0.0, "fp32"),
                suite.SpMMCase(64, 96, 20, 0.7, 0.4, "fp16"),
                suite.SpMMCase(48, 64, 16, 0.95, 0.4, "bf16"),
            ],
            "sddmm": [
                suite.SDDMMCase(64, 48, 32, 0.9, "fp32", "wgrad"),
                suite.SDDMMCase(32, 32, 16, 0.7, "fp16", "attention"),
                suite.SDDMMCase(48, 64, 24, 0.8, "bf16", "wgrad"),
            ],
            "semi24": [suite.Semi24Case(64, 128, 16, "fp16"), suite.Semi24Case(32, 64, 20, "bf16")],
        }
        dts = _split(args.dtypes)
        per_op = {op: [c for c in cs if dts is None or c.dtype in dts] for op, cs in per_op.items() if op in ops}
    else:
        try:
            per_op = suite.preset(
                args.preset,
                ops,
                shapes=_split(args.shapes),
                ns=_split(args.ns, int),
                ks=_split(args.ks, int),
                sparsities=_split(args.sparsities, float),
                skews=_split(args.skews, float),
                dtypes=_split(args.dtypes),
                sample=args.sample,
                seed=args.seed,
            )
        except ValueError as e:
            raise SystemExit(str(e)) from None
    lists = [list(per_op.get(op, [])) for op in ops]
    if args.order == "shuffle":
        for i, cs in enumerate(lists):
            random.Random(args.seed * 1000 + i).shuffle(cs)
    if args.order == "suite":
        cases = [c for cs in lists for c in cs]
    else:  # round-robin, so that a run cut short by --max-seconds still covers every op
        cases = [cs[i] for i in range(max(map(len, lists), default=0)) for cs in lists if i < len(cs)]
    return cases[: args.limit] if args.limit is not None else cases


# ---------------------------------------------------------------------------------------- timing
class Timer:
    """Probes each implementation (host and GPU time per call), picks one method per row, times it."""

    def __init__(self, args, on_gpu: bool):
        self.args = args
        self.on_gpu = on_gpu
        self.cycles_per_us = 1500.0
        self.flush_us = 0.0
        if on_gpu:
            self._calibrate()

    def _calibrate(self) -> None:
        import torch
        from triton import runtime

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # warm up the sleep kernel
        start.record()
        torch.cuda._sleep(2_000_000)
        end.record()
        torch.cuda.synchronize()
        self.cycles_per_us = 2_000_000 / max(1.0, start.elapsed_time(end) * 1e3)
        # How long do_bench's L2 flush keeps the GPU busy: host work up to that long is hidden.
        cache = runtime.driver.active.get_empty_cache_for_benchmark()
        runtime.driver.active.clear_cache(cache)
        start.record()
        for _ in range(5):
            runtime.driver.active.clear_cache(cache)
        end.record()
        torch.cuda.synchronize()
        self.flush_us = start.elapsed_time(end) / 5 * 1e3

    def probe(self, fn) -> tuple[float, float]:
        """(host us, GPU us) per call, unflushed. The GPU time is taken with the calls queued behind a
        sleep kernel, so the launches are all issued before the GPU reaches them."""
        if not self.on_gpu:
            t0 = time.perf_counter()
            fn()
            t = (time.perf_counter() - t0) * 1e6
            return t, t
        import torch

        fn()
        torch.cuda.synchronize()
        host_times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            host_times.append(time.perf_counter() - t0)
        host = sorted(host_times)[2] * 1e6  # median: one slow call (a GC pause, an allocation) is noise
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int(self.cycles_per_us * (6 * host + 100)))
        start.record()
        for _ in range(3):
            fn()
        end.record()
        torch.cuda.synchronize()
        return host, start.elapsed_time(end) / 3 * 1e3

    def choose(self, probes: dict[str, tuple[float, float]]) -> tuple[str, str]:
        """One method for the whole row, and why."""
        if not self.on_gpu:
            return "perf_counter", "no GPU"
        thr = self.args.graph_below_us
        fastest = min(probes, key=lambda k: probes[k][1])
        if probes[fastest][1] < thr:
            return "cudagraph", f"{fastest} runs in {probes[fastest][1]:.0f} us < {thr:g} us"
        # do_bench flushes L2 before each call, which hides up to flush_us of host work; a path
        # that launches slower than that would be timed by its host overhead.
        slow = [k for k, (h, g) in probes.items() if h > g + self.flush_us]
        if slow:
            return "cudagraph", "host-bound: " + ", ".join(f"{k} {probes[k][0]:.0f} us" for k in slow)
        return "do_bench", ""

    def measure_us(self, fn, method: str) -> float:
        if method == "perf_counter":
            fn()
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return sorted(times)[1] * 1e6
        import triton.testing

        a = self.args
        if method == "cudagraph":
            ms = triton.testing.do_bench_cudagraph(fn, rep=a.graph_rep_ms, return_mode="median")
        else:
            ms = triton.testing.do_bench(fn, warmup=a.warmup_ms, rep=a.rep_ms, return_mode="median")
        return ms * 1e3


def _short(e: BaseException | str, limit: int = 200) -> str:
    text = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    text = " ".join(str(text).split())
    return text[:limit]


def time_row(timer: Timer, impls: dict) -> tuple[dict, dict, str, str]:
    """Probe, then time every implementation of a row with one method.

    ``impls`` maps a name to a callable (None: not available). Returns ({name: us or None},
    {name: (host us, GPU us)}, method, note). A path that fails its probe is left out (noted).
    """
    import torch

    probes, errors = {}, {}
    for name, fn in impls.items():
        if fn is None:
            continue
        try:
            probes[name] = timer.probe(fn)
        except Exception as e:
            errors[name] = _short(e)
    if not probes:
        return {}, {}, "", "; ".join(f"{k}: {v}" for k, v in errors.items())
    method, why = timer.choose(probes)
    times: dict[str, float | None] = {}
    for name in probes:
        try:
            times[name] = timer.measure_us(impls[name], method)
        except Exception as e:  # a path that cannot be timed (or captured) this way
            if timer.on_gpu:
                with contextlib.suppress(Exception):
                    torch.cuda.synchronize()
            if method == "cudagraph":
                # One method per row: time the whole row again with do_bench.
                method, why = "do_bench", f"{why}; cudagraph failed for {name}: {_short(e, 120)}"
                times = {}
                for other in probes:
                    try:
                        times[other] = timer.measure_us(impls[other], method)
                    except Exception as e2:
                        times[other] = None
                        errors[other] = _short(e2)
                break
            times[name] = None
            errors[name] = _short(e)
    note = "; ".join([why] * bool(why) + [f"{k}: {v}" for k, v in errors.items()])
    return times, probes, method, note


# ------------------------------------------------------------------------------------ the cases
def rel_err(out, ref) -> float:
    import torch

    out = out.to(torch.float32)
    ref = ref.to(torch.float32)
    denom = ref.norm().item() or 1.0
    err = (out - ref).norm().item() / denom
    return err if err == err else float("inf")


def _try(fn):
    """(callable, output, None) if ``fn`` runs, else (None, None, error text)."""
    try:
        return fn, fn(), None
    except Exception as e:
        return None, None, _short(e)


def choose_config(ctx, heuristic_cfg, features_fn) -> tuple[dict, object]:
    """({config, config_source} columns, the ``config=`` to pass). ``heuristic``: the kernel's default
    heuristic, passed explicitly; ``auto``: ``config=None``, recording what the library picks."""
    if ctx["configs"] == "heuristic":
        return {"config": json.dumps(heuristic_cfg.as_dict()), "config_source": "heuristic"}, heuristic_cfg
    try:
        from stuning.ops.selection import SELECTOR
        from stuning.tuning.session import key_for

        features = features_fn()
        cfg, source = SELECTOR.choose(features, key_for(features))
        return {"config": json.dumps(cfg.as_dict()), "config_source": f"auto: {source}"}, None
    except Exception as e:  # the selection internals moved: still time config=None, say so
        return {"config": "", "config_source": f"auto: unknown ({_short(e, 80)})"}, None


def run_spmm(case, ctx) -> tuple[dict, dict, dict]:
    import torch
    from stuning.kernels import spmm as spmm_kernel

    import stuning
    from stuning.formats import CSRMatrix
    from stuning.matrices import random_dense, random_sparse
    from stuning.ops.spmm import problem_of
    from stuning.tuning.features import spmm_features

    dev, gen, dt = ctx["device"], ctx["gen"], case.torch_dtype
    a_dense = random_sparse(case.m, case.k, case.sparsity, skew_cv=case.skew_cv, dtype=dt, device=dev, generator=gen)
    b = random_dense(case.k, case.n, dtype=dt, device=dev, generator=gen)
    a0 = CSRMatrix.from_dense(a_dense)
    a = a0.padded(ctx["pad_to"])
    ref = a_dense.float() @ b.float()
    cfg, use = choose_config(ctx, spmm_kernel.heuristic(problem_of(a, b)), lambda: spmm_features(a, case.n))
    stuning_fn = lambda: stuning.spmm(a, b, config=use)
    info = {
        "nnz": a0.nnz,
        **cfg,
        "dense_bytes": a_dense.numel() * a_dense.element_size(),
        "format_bytes": a.nbytes(),
        "vendor_bytes": a0.nbytes(),
        "row_cv": a0.stats().cv,
    }
    impls = {"stuning": stuning_fn, "dense": lambda: torch.mm(a_dense, b)}
    if ctx["on_gpu"]:
        csr = torch.sparse_csr_tensor(a0.crow, a0.col, a0.values, a0.shape)
        impls["cusparse"] = lambda: torch.sparse.mm(csr, b)
    return impls, {"ref": ref}, info


def run_sddmm(case, ctx):
    import torch
    from stuning.kernels import sddmm as sddmm_kernel

    import stuning
    from stuning.formats import CSRMatrix
    from stuning.matrices import random_dense, random_sparse
    from stuning.ops.sddmm import problem_of
    from stuning.tuning.features import sddmm_features

    dev, gen, dt = ctx["device"], ctx["gen"], case.torch_dtype
    mask_dense = random_sparse(case.m, case.n, case.sparsity, dtype=dt, device=dev, generator=gen)
    mask = CSRMatrix.from_dense(mask_dense)
    a = random_dense(case.m, case.k, dtype=dt, device=dev, generator=gen)
    b = random_dense(case.n, case.k, dtype=dt, device=dev, generator=gen).t()  # K x N, K contiguous
    rows, cols = mask.row_ids().long(), mask.col.long()
    ref = (a.float() @ b.float())[rows, cols]
    cfg, use = choose_config(
        ctx, sddmm_kernel.heuristic(problem_of(mask, a)), lambda: sddmm_features(mask, case.k, a.dtype)
    )
    info = {
        "nnz": mask.nnz,
        **cfg,
        "dense_bytes": case.m * case.n * mask_dense.element_size(),
        "format_bytes": mask.nbytes(),
        "vendor_bytes": mask.nbytes(),
    }
    impls = {"stuning": lambda: stuning.sddmm(mask, a, b, config=use).values, "dense": lambda: torch.mm(a, b)}
    notes = {}
    if ctx["on_gpu"]:
        if dt == torch.float32:
            mask_t = torch.sparse_csr_tensor(mask.crow, mask.col, mask.values, mask.shape)
            impls["cusparse"] = lambda: torch.sparse.sampled_addmm(mask_t, a, b, beta=0.0).values()
        else:
            notes["cusparse"] = "n/a: torch.sparse.sampled_addmm supports only fp32/fp64 on CUDA"
    return impls, {"ref": ref, "dense_sample": (rows, cols), "notes": notes}, info


def run_semi24(case, ctx):
    import torch
    from stuning.kernels import semi24 as semi24_kernel

    import stuning
    from stuning.formats import Semi24Matrix
    from stuning.matrices import random_dense, random_semi24
    from stuning.ops.semi24 import problem_of
    from stuning.tuning.features import semi24_features

    dev, gen, dt = ctx["device"], ctx["gen"], case.torch_dtype
    w = random_semi24(case.m, case.k, dtype=dt, device=dev, generator=gen)
    x = random_dense(case.k, case.n, dtype=dt, device=dev, generator=gen)
    w24 = Semi24Matrix.from_dense(w)
    ref = w.float() @ x.float()
    cfg, use = choose_config(
        ctx, semi24_kernel.heuristic(problem_of(w24, x)), lambda: semi24_features(case.m, case.k, case.n, dt)
    )
    info = {
        "nnz": case.m * case.k // 2,
        **cfg,
        "dense_bytes": w.numel() * w.element_size(),
        "format_bytes": w24.nbytes(),
    }
    impls = {"stuning": lambda: stuning.semi24_mm(w24, x, config=use), "dense": lambda: torch.mm(w, x)}
    notes = {}
    if ctx["on_gpu"]:
        # cuSPARSELt directly: compress once, time the matmul.
        try:
            compressed = torch._cslt_compress(w)
            info["vendor_bytes"] = compressed.numel() * compressed.element_size()
            fn, _, err = _try(lambda: torch._cslt_sparse_mm(compressed, x))
            if fn is None and case.n % 8:
                # cuSPARSELt wants N aligned; pad X once (what torch's wrapper does on every call).
                n_pad = (case.n + 7) // 8 * 8
                xp = torch.nn.functional.pad(x, (0, n_pad - case.n))
                fn, _, err2 = _try(lambda: torch._cslt_sparse_mm(compressed, xp)[:, : case.n])
                notes["cslt"] = f"X padded to N={n_pad} (unpadded: {err})" if fn else f"{err}; padded: {err2}"
            elif fn is None:
                notes["cslt"] = err
            impls["cslt"] = fn
        except Exception as e:
            notes["cslt"] = _short(e)
        # torch's SparseSemiStructuredTensor: converted once, and converted on every call.
        try:
            from torch.sparse import to_sparse_semi_structured

            ws = to_sparse_semi_structured(w)
            notes["torch24_backend"] = type(ws).__name__
            fn, _, err = _try(lambda: torch.mm(ws, x))
            impls["torch24"] = fn
            if err:
                notes["torch24"] = err
            fn, _, err = _try(lambda: torch.mm(to_sparse_semi_structured(w), x))
            impls["torch24_conv"] = fn
            if err:
                notes["torch24_conv"] = err
        except Exception as e:
            notes["torch24"] = notes["torch24_conv"] = _short(e)
    return impls, {"ref": ref, "notes": notes}, info


RUNNERS = {"spmm": run_spmm, "sddmm": run_sddmm, "semi24": run_semi24}


def run_case(case, ctx, timer: Timer) -> dict:
    row = {
        "op": case.op,
        "name": case.name,
        "dtype": case.dtype,
        "m": case.m,
        "k": case.k,
        "n": case.n,
        "sparsity": getattr(case, "sparsity", 0.5),
        "skew_cv": getattr(case, "skew_cv", 0.0),
        "family": getattr(case, "family", ""),
    }
    t_row = time.perf_counter()
    import torch

    seed = (zlib.crc32(case.name.encode()) + ctx["seed"]) % 2**63
    ctx["gen"] = torch.Generator(device=ctx["device"]).manual_seed(seed)
    impls, extra, info = RUNNERS[case.op](case, ctx)
    row.update(info)
    ref = extra["ref"]
    notes = dict(extra.get("notes", {}))
    # Correctness first: stuning against the fp32 dense product (the kernels compile here).
    out = impls["stuning"]()
    row["rel_err"] = rel_err(out, ref)
    row["tol"] = TOLERANCE[case.dtype]
    row["ok"] = row["rel_err"] <= row["tol"]
    del out
    for name in [b for b in BASELINES if b in impls]:
        fn = impls[name]
        if fn is None:
            continue
        try:
            res = fn()
            if case.op == "sddmm" and name == "dense":
                rows, cols = extra["dense_sample"]
                res = res[rows, cols]
            row[f"{name}_err"] = rel_err(res, ref)
        except Exception as e:
            impls[name] = None
            notes[name] = _short(e)
    del ref, extra
    times, probes, method, timing_note = time_row(timer, impls)
    row["timing"] = method
    row["timing_note"] = timing_note
    row["time_us"] = times.get("stuning")
    row["host_us"], row["probe_us"] = probes.get("stuning", (None, None))
    for b in OP_BASELINES[case.op]:
        row[f"{b}_us"] = times.get(b)
        row[f"{b}_host_us"] = probes.get(b, (None, None))[0]
        t_b, t_s = times.get(b), times.get("stuning")
        row[f"speedup_vs_{b}"] = (t_b / t_s) if (t_b and t_s) else None
        if b in notes:
            row[f"{b}_note"] = notes[b]
        elif ctx["smoke"] and b != "dense" and b not in impls:
            row[f"{b}_note"] = "skipped (smoke: GPU-only vendor path)"
    if "torch24_backend" in notes:
        row["torch24_backend"] = notes["torch24_backend"]
    if "vendor_bytes" in row:
        row["vendor_bytes_ratio"] = row["vendor_bytes"] / row["dense_bytes"]
    row["bytes_ratio"] = row["format_bytes"] / row["dense_bytes"]
    row["seconds"] = time.perf_counter() - t_row
    return row


# ---------------------------------------------------------------------------------------- output
def environment(on_gpu: bool, smoke: bool) -> dict:
    import torch
    import triton

    env = {
        "device": torch.cuda.get_device_name() if on_gpu else "cpu (Triton interpreter)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda or "",
    }
    try:
        env["cusparselt"] = str(torch.backends.cusparselt.version()) if on_gpu else ""
    except Exception:
        env["cusparselt"] = ""
    return env


SPEEDUPS = [f"speedup_vs_{b}" for b in BASELINES]


def _geomean(s):
    import numpy as np

    v = s.dropna().astype(float)
    v = v[v > 0]
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")


def _fmt(v, spec="") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return format(v, spec or ".3g")
    return str(v)


def markdown_table(df, formats: dict | None = None) -> str:
    formats = formats or {}
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for rec in df.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v, formats.get(c, "")) for c, v in zip(cols, rec, strict=True)) + " |")
    return "\n".join(lines)


def geomean_table(df, by):
    import pandas as pd

    present = [c for c in SPEEDUPS if c in df and df[c].notna().any()]
    groups = []
    for key, g in df.groupby(by, sort=True, dropna=False):
        rec = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        rec["rows"] = len(g)
        rec["wrong"] = int((~g["ok"].astype(bool)).sum()) if "ok" in g else 0
        for c in present:
            rec[c.replace("speedup_", "")] = _geomean(g[c])
        groups.append(rec)
    return pd.DataFrame(groups)


def write_outputs(rows: list[dict], out: Path, env: dict, args, elapsed: float, final: bool) -> None:
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows)
    for key, val in env.items():
        df[key] = val
    if df.empty:
        df.to_csv(out / "results.csv", index=False)
        return
    sort_cols = [c for c in ("op", "dtype", "m", "k", "n", "sparsity", "skew_cv") if c in df]
    df = df.sort_values(sort_cols, kind="stable")
    df = df[[c for c in COLUMNS if c in df] + [c for c in df if c not in COLUMNS]]
    df.to_csv(out / "results.csv", index=False)
    if not final:
        return
    write_summary(df, out, env, args, elapsed)
    try:
        write_plot(df, out / "speedup.png")
    except Exception as e:  # a plot is not worth losing the table over
        print(f"speedup.png not written: {_short(e)}", file=sys.stderr)


def write_summary(df, out: Path, env: dict, args, elapsed: float) -> None:
    done = df[df["time_us"].notna()] if "time_us" in df else df
    lines = [
        "# stuning vs vendor baselines (default configs)",
        "",
        f"- command: `python3 scripts/bench_baselines.py {' '.join(args.argv)}`",
        f"- device: {env['device']}; torch {env['torch']}, triton {env['triton']}, "
        f"CUDA {env['cuda'] or 'n/a'}, cuSPARSELt {env.get('cusparselt') or 'n/a'}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {len(df)} cases in {elapsed:.0f} s",
        f"- stuning configs: {args.configs} ("
        + (
            "each kernel's default heuristic"
            if args.configs == "heuristic"
            else "config=None: tuning database, else cost model, else heuristic; see config_source"
        )
        + ")",
        "- speedup_vs_X = time of X / time of stuning (> 1: stuning is faster); geomeans over the rows that "
        "have both times.",
        "- one timing method per row (column `timing`, why in `timing_note`): `do_bench` (median, L2 flushed "
        "before each call), or `cudagraph` (`do_bench_cudagraph`, median of graph replays, warm L2) when "
        f"some implementation of the row runs under {args.graph_below_us:g} us or launches slower than it "
        "runs (host time per call, `*host_us`, above its GPU time plus the L2 flush), where do_bench would "
        "time the launch.",
        "- bytes_ratio = stuning format bytes / dense bytes (CSR: values + int32 col + crow, padded rows; "
        "2:4: values + 2-bit metadata); vendor_bytes_ratio likewise for cuSPARSE's CSR / cuSPARSELt's "
        "compressed matrix.",
        f"- inputs: stuning's CSR rows padded to {args.pad_to} (cuSPARSE gets the unpadded int32 CSR); "
        "SDDMM's B (K x N) is the transpose of a row-major N x K matrix (K contiguous), as X^T in a weight "
        "gradient; 2:4 N not a multiple of 8 is padded once for `torch._cslt_sparse_mm` (see cslt_note).",
        "",
    ]
    wrong = df[~df["ok"].astype(bool)] if "ok" in df else df.iloc[:0]
    errors = df[df["error"].notna()] if "error" in df else df.iloc[:0]
    if len(wrong) or len(errors):
        lines += [f"**{len(wrong)} wrong results, {len(errors)} errors** (see rel_err, error columns).", ""]
    lines += ["## Geomean speedups per op, dtype and sparsity", ""]
    lines.append(markdown_table(geomean_table(done, ["op", "dtype", "sparsity"]), {"sparsity": "g"}))
    lines += ["", "## Geomean speedups per op and dtype", ""]
    lines.append(markdown_table(geomean_table(done, ["op", "dtype"])))
    lines += ["", "## All rows", ""]
    row_cols = "op family dtype m k n sparsity skew_cv nnz time_us host_us dense_us cusparse_us cslt_us torch24_us"
    row_cols += " torch24_conv_us speedup_vs_dense speedup_vs_cusparse speedup_vs_cslt bytes_ratio rel_err ok timing"
    cols = [c for c in row_cols.split() if c in df]
    fmts = {c: ".1f" for c in cols if c.endswith("_us")}
    fmts.update({c: ".2f" for c in cols if c.startswith("speedup")})
    fmts.update({"rel_err": ".1e", "bytes_ratio": ".3f", "sparsity": "g", "skew_cv": "g"})
    lines.append(markdown_table(df[cols], fmts))
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def write_plot(df, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    ops = [op for op in ("spmm", "sddmm", "semi24") if op in set(df["op"])]
    fig, axes = plt.subplots(1, max(1, len(ops)), figsize=(5 * max(1, len(ops)), 4), squeeze=False)
    for ax, op in zip(axes[0], ops, strict=False):
        d = df[df["op"] == op]
        # 2:4 has one sparsity (50%): its panel runs along N instead.
        by, scale, label = ("n", 1, "N") if d["sparsity"].nunique() == 1 else ("sparsity", 100, "sparsity (%)")
        for col in SPEEDUPS:
            if col not in d or not d[col].notna().any():
                continue
            g = d.groupby(by)[col].apply(_geomean).dropna()
            ax.plot(g.index * scale, g.values, marker="o", label=col.replace("speedup_vs_", "vs "))
        ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        ax.set_yscale("log")
        if by == "n":
            ax.set_xscale("log", base=2)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_title(f"{op} (geomean over shapes, N, dtypes)" if by == "sparsity" else f"{op} (2:4, geomean)")
        ax.set_xlabel(label)
        ax.set_ylabel("speedup of stuning (> 1: faster)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_table(rows: list[dict], console) -> None:
    import pandas as pd
    from rich.table import Table

    if not rows:
        console.print("no results")
        return
    df = pd.DataFrame(rows)
    table = Table(title="stuning (default config) vs baselines: geomean speedups")
    g = geomean_table(df[df["time_us"].notna()], ["op", "dtype"]) if df["time_us"].notna().any() else None
    if g is None or g.empty:
        console.print("no timed rows")
        return
    for c in g.columns:
        table.add_column(c.replace("vs_", "x "), justify="right" if c not in ("op", "dtype") else "left")
    for rec in g.itertuples(index=False):
        table.add_row(*[_fmt(v, ".2f") if isinstance(v, float) else str(v) for v in rec])
    console.print(table)


# ------------------------------------------------------------------------------------------ main
def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    args.argv = argv
    if args.smoke:
        # Before stuning is imported: the kernels read it when they are defined.
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from stuning.kernels.target import interpreting

    console = Console() if sys.stdout.isatty() else Console(width=130)
    # Torch's beta/prototype notices for sparse CSR and SparseSemiStructuredTensor, once per call site.
    warnings.filterwarnings("ignore", message=r"Sparse (CSR tensor support|invariant checks)")
    warnings.filterwarnings("ignore", message=r"The PyTorch API of SparseSemiStructuredTensor")
    on_gpu = torch.cuda.is_available() and not interpreting() and not args.smoke
    if not on_gpu and not args.smoke:
        raise SystemExit("no CUDA GPU (or TRITON_INTERPRET is on): pass --smoke for the CPU smoke run")
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    cases = select_cases(args)
    env = environment(on_gpu, args.smoke)
    console.print(
        f"[bold]bench_baselines[/]: {len(cases)} cases "
        f"({'smoke, ' if args.smoke else ''}preset {args.preset}) "
        f"on {env['device']}; torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda'] or 'n/a'}"
        + (f"; stops starting cases after {args.max_seconds:.0f} s" if args.max_seconds else "")
    )
    ctx = {
        "configs": args.configs,
        "device": "cuda" if on_gpu else "cpu",
        "on_gpu": on_gpu,
        "smoke": args.smoke,
        "seed": args.seed,
        "pad_to": args.pad_to,
    }
    timer = Timer(args, on_gpu)
    out = Path(args.out)
    rows: list[dict] = []
    t0 = time.perf_counter()
    last_write = t0
    consecutive_errors = 0
    stopped = ""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    try:
        with progress:
            task = progress.add_task("starting", total=len(cases))
            for case in cases:
                if args.max_seconds and time.perf_counter() - t0 > args.max_seconds:
                    stopped = (
                        f"stopped after {time.perf_counter() - t0:.0f} s (--max-seconds): "
                        f"{len(rows)} of {len(cases)} cases done"
                    )
                    break
                progress.update(task, description=case.name)
                try:
                    row = run_case(case, ctx, timer)
                    consecutive_errors = 0
                    if not row["ok"]:
                        progress.console.print(f"[red]WRONG[/] {case.name}: rel_err {row['rel_err']:.2e}")
                except Exception as e:
                    consecutive_errors += 1
                    row = {**case.as_dict(), "ok": False, "error": _short(e, 400)}
                    progress.console.print(f"[red]ERROR[/] {case.name}: {_short(e)}")
                    if on_gpu:
                        with contextlib.suppress(Exception):
                            torch.cuda.synchronize()
                rows.append(row)
                progress.advance(task)
                if consecutive_errors >= 5:
                    stopped = "stopped: 5 errors in a row (the device may be in a bad state)"
                    break
                if time.perf_counter() - last_write > 20:
                    write_outputs(rows, out, env, args, time.perf_counter() - t0, final=False)
                    last_write = time.perf_counter()
    except KeyboardInterrupt:
        stopped = "interrupted"
    elapsed = time.perf_counter() - t0
    write_outputs(rows, out, env, args, elapsed, final=True)
    if stopped:
        console.print(f"[yellow]{stopped}[/]")
    print_table(rows, console)
    wrong = sum(1 for r in rows if not r.get("ok", False))
    console.print(
        f"{len(rows)} cases in {elapsed:.0f} s, {wrong} wrong or failed; wrote {out / 'results.csv'}, "
        f"{out / 'summary.md'}, {out / 'speedup.png'}"
    )
    return 1 if (args.strict and wrong) else 0


if __name__ == "__main__":
    sys.exit(main())
