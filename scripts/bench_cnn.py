#!/usr/bin/env python3
"""Sparse CNN inference end to end: pruned ResNet-50 and MobileNetV1 on stuning's kernels against cuDNN.

Two networks built in code (stuning/nn/cnn_examples.py, random weights, nothing downloaded), in
``--dtype`` and channels-last, 224 x 224 inputs. Each is magnitude-pruned per layer to every
``--sparsities`` entry with ``stuning.sparsify`` (every Conv2d with groups = 1 and the classifier;
MobileNetV1's depthwise convolutions stay dense), pretuned with ``stuning.pretune(input_shapes=...)``
at every ``--batches`` size into ``OUT/db``, and then timed per batch:

* ``dense``: the network with the pruned weights stored dense, convolutions in cuDNN
  (``torch.backends.cudnn.benchmark = True``, TF32 off);
* ``stuning``: the same network after ``sparsify`` (SparseConv2d / SparseLinear, pretuned configs).

Both share BatchNorm statistics recalibrated on random images after pruning (``calibrate_batchnorm``).

Every output is checked against the fp32 forward of the dense network with the same zeros (relative
Frobenius error; ``ok`` is stuning's within ``MODEL_TOLERANCE``). Each convolution and linear layer is
then timed alone, dense and sparse, on the input it received in that forward; ``layers.csv`` has them
all and ``summary.md`` the ten slowest stuning layers per network and sparsity at the largest batch.
Timing follows stuning/bench/timer.py (one method per row: ``do_bench`` medians or CUDA-graph replays).
Writes ``results.csv``, ``layers.csv``, ``summary.md`` and ``speedup.png`` under ``--out``.

    python3 scripts/bench_cnn.py --out OUT                                  # full run on a GPU
    python3 scripts/bench_cnn.py --out OUT --models resnet50 --sparsities 0.9 --strategy model   # quick
    python3 scripts/bench_cnn.py --smoke --out /tmp/cnn                     # tiny networks, CPU interpreter

Pretune is resumable (problems already in ``OUT/db`` are skipped), so a run cut short by a time limit
can be repeated with the same ``--out``; splitting it by ``--models`` and ``--sparsities`` works too.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

RESOLUTION = 224
SMOKE_RESOLUTION = 32
# Relative Frobenius error of the logits against the fp32 network: some 50 layers of fp16/bf16
# rounding, BatchNorms and residual sums add up beyond a single product's tolerance.
MODEL_TOLERANCE = {"fp16": 2e-2, "bf16": 8e-2, "fp32": 1e-4}
TOP_LAYERS = 10
# do_bench's warm-up and timed window (ms) for whole networks. Its default window (40 ms) holds a
# single call of ResNet-50 at batch 64, and a median of one or two samples is noise; single layers
# run well under a millisecond or two and keep stuning/bench/timer.py's defaults.
MODEL_WARMUP_MS, MODEL_REP_MS = 100.0, 500.0


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="results directory (its db/ holds the pretuned database)")
    ap.add_argument("--models", default="resnet50,mobilenet-v1", help="comma list of: resnet50, mobilenet-v1")
    ap.add_argument("--sparsities", default="0.7,0.8,0.9,0.95", help="fractions of zeros (CSR), or 2:4")
    ap.add_argument("--batches", default="1,8,64", help="batch sizes")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--strategy", default="model+optuna", choices=["model", "model+optuna", "exhaustive"])
    ap.add_argument("--trials", type=int, default=4, help="pretune: configs timed per problem")
    ap.add_argument("--seconds", type=float, default=3.0, help="pretune: time limit per problem")
    ap.add_argument("--no-layers", action="store_true", help="skip the per-layer timings")
    ap.add_argument("--smoke", action="store_true", help="tiny networks through Triton's CPU interpreter")
    args = ap.parse_args(argv)
    if args.smoke:
        args.strategy = "model"
        if args.batches == ap.get_default("batches"):
            args.batches = "1,2"
    return args


def build(name: str, args, dtype, device):
    import torch

    from stuning.nn import cnn_examples

    makers = {"resnet50": (cnn_examples.resnet50, cnn_examples.tiny_resnet),
              "mobilenet-v1": (cnn_examples.mobilenet_v1, cnn_examples.tiny_mobilenet)}
    if name not in makers:
        raise SystemExit(f"unknown model {name!r}; use resnet50 or mobilenet-v1")
    model = makers[name][1]() if args.smoke else makers[name][0]()
    return model.to(device=device, dtype=dtype, memory_format=torch.channels_last).eval()


def variants(base, pattern: str):
    """(dense-with-zeros model, stuning model, sparsify report) for one pruning pattern."""
    import torch

    import stuning

    sparse = copy.deepcopy(base)
    if pattern == "2:4":
        report = stuning.sparsify(sparse, sparsity=0.5, pattern="2:4", min_size=0)
    else:
        report = stuning.sparsify(sparse, sparsity=float(pattern), min_size=0)
    dense = copy.deepcopy(base)
    with torch.no_grad():
        for r in report.layers:
            dense.get_submodule(r.name).weight.copy_(sparse.get_submodule(r.name).dense_weight())
    return dense, sparse, report


def calibrate_batchnorm(dense, sparse, shape: tuple[int, ...], gen) -> None:
    """BatchNorm statistics of the pruned network (on random images, in fp32), into both models.

    As one recalibrates after pruning: a random network pruned to 95% otherwise loses most of its
    activations' scale at every layer, and its outputs sink toward fp16's underflow, where an error
    check means nothing. Both models get the same statistics, so they compute the same function.
    """
    import torch

    calib = copy.deepcopy(dense).float()
    norms = [m for m in calib.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: one batch gives its own statistics
        m.train()
    device = next(calib.parameters()).device
    with torch.no_grad():
        calib(torch.randn(16, *shape, generator=gen, device=device))
    stats = {name: m for name, m in calib.named_modules() if isinstance(m, torch.nn.BatchNorm2d)}
    with torch.no_grad():
        for model in (dense, sparse):
            for name, m in model.named_modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.copy_(stats[name].running_mean)
                    m.running_var.copy_(stats[name].running_var)


def rel_err(out, ref) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30))


def layer_inputs(model, names: list[str], x) -> dict:
    """The input each named layer receives in one forward of ``model`` on ``x``."""
    captured, hooks = {}, []

    def keep(name: str):
        def hook(module, args, output) -> None:  # a hook returning a value would replace the output
            captured.setdefault(name, args[0].detach())

        return hook

    for name in names:
        hooks.append(model.get_submodule(name).register_forward_hook(keep(name)))
    try:
        model(x)
    finally:
        for h in hooks:
            h.remove()
    return captured


def time_layers(name: str, pattern: str, batch: int, dense, sparse, report, x, timer) -> list[dict]:
    """Each Conv2d / Linear position timed alone, dense and stuning, on the input it got in the forward."""
    import math

    import torch

    from stuning.bench.timer import time_row

    converted = {r.name: r for r in report.layers}
    names = [n for n, m in dense.named_modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    rows = []
    for layer, inp in layer_inputs(dense, names, x).items():
        d, s = dense.get_submodule(layer), sparse.get_submodule(layer)
        timing = time_row(timer, {"dense": lambda d=d, inp=inp: d(inp), "stuning": lambda s=s, inp=inp: s(inp)})
        weight = d.weight
        rows.append({"model": name, "pattern": pattern, "batch": batch, "layer": layer, "kind": type(d).__name__,
                     "weight": "x".join(map(str, weight.shape)), "converted": layer in converted,
                     "m": weight.shape[0], "k": math.prod(weight.shape[1:]),
                     "n": s.gemm_columns(tuple(inp.shape)) if layer in converted else None,
                     "dense_us": timing.times_us.get("dense"), "stuning_us": timing.times_us.get("stuning"),
                     "timing": timing.method, "note": timing.note})
    for r in rows:
        r["speedup"] = r["dense_us"] / r["stuning_us"] if r["dense_us"] and r["stuning_us"] else None
    return rows


def run_pattern(name: str, base, pattern: str, args, timers: tuple, env: dict) -> tuple[list[dict], list[dict]]:
    """Rows per batch for one pruning pattern; ``timers`` = (whole-network timer, per-layer timer)."""
    import torch

    import stuning
    from stuning.bench import error_text
    from stuning.bench.timer import time_row
    from stuning.tuning.search import Budget

    dense, sparse, report = variants(base, pattern)
    batches = [int(b) for b in args.batches.split(",")]
    shape = (base.in_channels, args.resolution, args.resolution)
    gen = torch.Generator(device=env["torch_device"]).manual_seed(0)
    calibrate_batchnorm(dense, sparse, shape, gen)
    t0 = time.perf_counter()
    tuned = stuning.pretune(sparse, input_shapes=[(b, *shape) for b in batches], db=args.out / "db",
                            strategy=args.strategy, budget=Budget(max_trials=args.trials, max_seconds=args.seconds))
    pretune_s = time.perf_counter() - t0
    fallback = copy.deepcopy(sparse)  # dense convolutions where pretune timed the dense product faster
    stuning.nn.set_dense_fallback(fallback)
    reference_model = copy.deepcopy(dense).float()
    rows, layer_rows = [], []
    for b in batches:
        x = torch.randn(b, *shape, generator=gen, device=env["torch_device"]).to(base_dtype(base))
        x = x.contiguous(memory_format=torch.channels_last)
        errors, impls, notes = {}, {}, []
        with torch.no_grad():
            ref = reference_model(x.float())
            for impl, model in (("dense", dense), ("stuning", sparse), ("fallback", fallback)):
                try:
                    errors[impl] = rel_err(model(x), ref)
                    impls[impl] = lambda m=model, x=x: m(x)
                except Exception as e:
                    notes.append(f"{impl}: {error_text(e)}")
            timing = time_row(timers[0], impls)
            if not args.no_layers and "stuning" in impls:
                layer_rows += time_layers(name, pattern, b, dense, sparse, report, x, timers[1])
        d_us, s_us, f_us = (timing.times_us.get(k) for k in ("dense", "stuning", "fallback"))
        rows.append({"model": name, "pattern": pattern, "batch": b, "dense_us": d_us, "stuning_us": s_us,
                     "speedup": d_us / s_us if d_us and s_us else None, "fallback_us": f_us,
                     "fallback_speedup": d_us / f_us if d_us and f_us else None, "dense_err": errors.get("dense"),
                     "stuning_err": errors.get("stuning"), "fallback_err": errors.get("fallback"),
                     "ok": max(errors.get(k, float("inf")) for k in ("stuning", "fallback"))
                     <= MODEL_TOLERANCE[args.dtype],
                     "timing": timing.method, "note": "; ".join(filter(None, [timing.note, *notes])),
                     "layers_sparse": len(report.layers), "layers_dense": len(report.skipped),
                     "pretune_s": round(pretune_s, 2), "pretune_tuned": tuned.tuned,
                     "pretune_skipped": tuned.skipped, "pretune_failed": tuned.failed,
                     "dense_weight_bytes": report.dense_bytes, "sparse_weight_bytes": report.sparse_bytes})
        print(f"  {name} {pattern} batch={b}: dense {_us(d_us)}, stuning {_us(s_us)}, "
              f"error {errors.get('stuning', float('nan')):.1e}", flush=True)
    return rows, layer_rows


def _us(v) -> str:
    return f"{v:.1f} us" if v else "-"


def base_dtype(model):
    return next(model.parameters()).dtype


def write_outputs(rows: list[dict], layer_rows: list[dict], args, env: dict, elapsed: float) -> None:
    import pandas as pd

    from stuning.bench.report import markdown_table, plot_model_speedups, pretune_text

    out = args.out
    df = _frame(rows, env)
    df.to_csv(out / "results.csv", index=False)
    layers = pd.DataFrame(layer_rows)
    if len(layers):
        layers.to_csv(out / "layers.csv", index=False)
    short = df[["model", "pattern", "batch", "dense_us", "stuning_us", "speedup", "fallback_us", "fallback_speedup",
                "dense_err", "stuning_err", "ok", "timing"]]
    weights = df.groupby(["model", "pattern"], sort=False)[
        ["layers_sparse", "layers_dense", "pretune_s", "pretune_tuned", "pretune_skipped", "pretune_failed",
         "dense_weight_bytes", "sparse_weight_bytes"]].first().reset_index()
    lines = [
        "# Sparse CNNs: stuning SparseConv2d vs dense cuDNN", "",
        f"Command: `python3 {' '.join(sys.argv)}`", "",
        f"Device: {env['device']}; torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda'] or '-'}, "
        f"cuDNN {env['cudnn'] or '-'}; dtype {args.dtype}, channels-last, {args.resolution}x{args.resolution} "
        f"inputs, cudnn.benchmark on, TF32 off; pretune {pretune_text(args.strategy, args.trials, args.seconds)}; "
        f"{elapsed:.0f} s in all.", "",
        "Forward latency (us, median) and speedup of stuning over dense (>1: stuning faster). `fallback`: the "
        "same pretuned network with `dense_fallback` on (a layer runs its dense convolution where pretune timed "
        "the dense product faster). Errors: relative Frobenius error of the logits against the fp32 dense network "
        f"with the same zeros (tolerance {MODEL_TOLERANCE[args.dtype]:g}).", "",
        markdown_table(short, {"dense_us": ".1f", "stuning_us": ".1f", "speedup": ".2f", "fallback_us": ".1f",
                               "fallback_speedup": ".2f", "dense_err": ".1e", "stuning_err": ".1e"}), "",
        "Layers sparsified / left dense, pretune wall time and problems, weight bytes (dense vs sparse).", "",
        markdown_table(weights), "",
    ]
    if len(layers):
        top = layers[layers["batch"] == layers["batch"].max()]
        lines += [f"## The {TOP_LAYERS} slowest stuning layers at batch {int(top['batch'].max())}", "",
                  "Each layer timed alone on the input it received; `n` = batch x H_out x W_out (GEMM view: "
                  "`m` out channels, `k` in channels x kh x kw). All layers of every batch: `layers.csv`.", ""]
        for (model, pattern), g in top.groupby(["model", "pattern"], sort=False):
            g = g.sort_values("stuning_us", ascending=False).head(TOP_LAYERS)
            lines += [f"### {model}, {pattern}", "",
                      markdown_table(g[["layer", "weight", "converted", "m", "k", "n", "dense_us", "stuning_us",
                                        "speedup"]], {"dense_us": ".1f", "stuning_us": ".1f", "speedup": ".2f"}), ""]
    if env["torch_device"] == "cpu":
        lines.append("No GPU: times are the wall clock of Triton's CPU interpreter and say nothing about GPU speed.")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    plot_model_speedups(df, out / "speedup.png", x="batch", y="speedup", label="{pattern} zeros",
                        ylabel="speedup of stuning over cuDNN (>1 faster)")
    print(markdown_table(short[["model", "pattern", "batch", "speedup", "fallback_speedup", "stuning_err", "ok"]],
                         {"speedup": ".2f", "fallback_speedup": ".2f", "stuning_err": ".1e"}))
    print(f"wrote results.csv, layers.csv, summary.md, speedup.png in {out}")


def _frame(rows: list[dict], env: dict):
    import pandas as pd

    df = pd.DataFrame(rows)
    for key in ("device", "torch", "triton", "cuda", "cudnn"):
        df[key] = env[key]
    return df



def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    args.resolution = SMOKE_RESOLUTION if args.smoke else RESOLUTION
    # Forwards look configs up where pretune writes them: set before stuning opens a database.
    os.environ["STUNING_DB_DIR"] = str((args.out / "db").resolve())
    import torch

    from stuning.bench.runner import environment
    from stuning.bench.timer import RowTimer, TimerSettings
    from stuning.tuning.driver import can_measure

    on_gpu = can_measure()
    if not on_gpu and not args.smoke:
        raise SystemExit("no CUDA GPU: run with --smoke (tiny networks through Triton's interpreter)")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # the fp32 reference is fp32
    torch.backends.cuda.matmul.allow_tf32 = False
    env = {**environment(on_gpu), "torch_device": "cuda" if on_gpu else "cpu",
           "cudnn": str(torch.backends.cudnn.version() or "") if on_gpu else ""}
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    timers = (RowTimer(TimerSettings(warmup_ms=MODEL_WARMUP_MS, rep_ms=MODEL_REP_MS), on_gpu),
              RowTimer(TimerSettings(), on_gpu))
    start, rows, layer_rows = time.perf_counter(), [], []
    for name in (n.strip() for n in args.models.split(",")):
        base = build(name, args, dtype, env["torch_device"])
        for pattern in (p.strip() for p in args.sparsities.split(",")):
            print(f"{name} {pattern}: sparsify, pretune ({args.strategy}), time", flush=True)
            new_rows, new_layers = run_pattern(name, base, pattern, args, timers, env)
            rows, layer_rows = rows + new_rows, layer_rows + new_layers
            _frame(rows, env).to_csv(args.out / "results.csv", index=False)  # kept if a later step dies
        del base
    write_outputs(rows, layer_rows, args, env, time.perf_counter() - start)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
