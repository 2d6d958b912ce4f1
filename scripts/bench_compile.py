#!/usr/bin/env python3
"""Eager against ``torch.compile``: a sparse model's step where the host, not the GPU, sets the pace.

At decode widths a sparse layer's kernel runs 10-40 us on an H200 while an eager launch from Python
costs ~60-140 us of host time (BENCHMARKS.md 7y), so an eager sparse model waits on the host.
``torch.compile(model, mode="reduce-overhead")`` (stuning's layers and ops run there as one operator
each, ``stuning.nn.compiled`` and ``stuning.ops.compiled``) replays the step as a CUDA graph. For
each model (``--models``: the Llama-7B MLP block; BERT-base's 12 encoder layers; ``llama-mlp-ops``,
the same block written with the functional ops on ``CSRMatrix`` / ``Semi24Matrix`` weights, as a
user's own module would), pruning (``--patterns``: fractions of zeros for CSR, or ``2:4``) and token
count (``--tokens``) this times:

* ``dense`` and ``stuning``, eager: the dense model with the same zeros, and the same after ``sparsify``;
* ``dense-compiled`` and ``stuning-compiled``: each through ``torch.compile(mode=--mode)``
  (``reduce-overhead``, the default, replays CUDA graphs; ``default`` launches each kernel from the
  compiled code, host time and all);
* ``stuning-graph``: the sparse model captured by hand in a CUDA graph (the README's recipe);
* ``stuning-breaks`` (``llama-mlp-ops`` only): compiled with each op forced to a graph break, as the
  ops were before they had operators of their own (``stuning.ops.compiled``).

Two times each, medians of ``--reps``:
* ``step_us``: one step from an idle GPU behind an L2 flush, host time included (events around the
  call): what a decode step that waits on its previous token costs;
* ``pipelined_us``: a step of ``--steps`` back-to-back ones (the host runs ahead where it can, L2 warm).

Configs come from the shipped tuning database (no pretune: both modes run the same kernels). Every
output is checked against the fp32 forward of the dense model. Writes ``OUT/compile.json``,
``OUT/compile.csv`` and ``OUT/compile.png`` (each row's pipelined step per path, log scale), prints
a table last.

    python3 scripts/bench_compile.py                         # on a GPU
    python3 scripts/bench_compile.py --smoke                 # tiny models, CPU interpreter, aot_eager
    python3 scripts/bench_compile.py --replot OUT/compile.json   # the table and plot of a run again
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SMOKE = "--smoke" in sys.argv
if SMOKE and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read when the kernels are defined, below

import stuning  # noqa: E402
from stuning.formats import CSRMatrix, Semi24Matrix  # noqa: E402
from stuning.nn import examples, sparsify  # noqa: E402
from stuning.ops.semi24 import _eager_semi24_mm  # noqa: E402
from stuning.ops.spmm import _eager_spmm  # noqa: E402

PATHS = ("dense", "dense-compiled", "stuning", "stuning-compiled", "stuning-graph", "stuning-breaks")
TOLERANCE = {torch.float16: 2e-2, torch.bfloat16: 5e-2, torch.float32: 1e-4}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="llama-mlp,bert")
    p.add_argument("--patterns", default="0.95,0.9,2:4")
    p.add_argument("--tokens", default="16,128")
    p.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--mode", default="reduce-overhead",
                   choices=("reduce-overhead", "default", "max-autotune-no-cudagraphs"),
                   help="torch.compile's mode on the GPU (the CPU smoke test compiles with the aot_eager backend)")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--smoke", action="store_true", help="tiny models on the CPU (Triton's interpreter)")
    p.add_argument("--replot", metavar="JSON", help="a run's compile.json: its table and plot again, nothing timed")
    return p.parse_args(argv)


def build(name: str, smoke: bool, dtype, device):
    if name in ("llama-mlp", "llama-mlp-ops"):
        return examples.llama_mlp(**(dict(hidden=32, intermediate=64) if smoke else {}), dtype=dtype, device=device)
    if name == "bert":
        sizes = dict(layers=1, hidden=32, heads=2, ffn=64) if smoke else {}
        return examples.bert_encoder(**sizes, dtype=dtype, device=device)
    raise SystemExit(f"bench_compile: unknown model {name!r}; use llama-mlp, llama-mlp-ops or bert")


def _product(w, x: torch.Tensor) -> torch.Tensor:
    return (stuning.semi24_mm if isinstance(w, Semi24Matrix) else stuning.spmm)(w, x)


def _product_breaking(w, x: torch.Tensor) -> torch.Tensor:
    """``_product`` as a graph break: the ops' eager paths, which were the public ops until they had
    operators (each ``torch.compiler.disable``d)."""
    if isinstance(w, Semi24Matrix):
        return _eager_semi24_mm(w, x, config=None, out=None, bias=None)
    return _eager_spmm(w, x, config=None, out=None, bias=None)


class FunctionalMLP(torch.nn.Module):
    """A pruned ``examples.MLPStack`` through ``stuning.spmm`` / ``semi24_mm`` on its layers' weights
    (Y^T = W X^T, as ``SparseLinear`` computes)."""

    def __init__(self, sparse: examples.MLPStack):
        super().__init__()
        self.hidden = sparse.hidden
        names = ("gate_proj", "up_proj", "down_proj")
        self.blocks = [tuple(getattr(layer, name).sparse_weight.matrix for name in names) for layer in sparse.layers]
        assert all(isinstance(w, (CSRMatrix, Semi24Matrix)) for block in self.blocks for w in block)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for gate, up, down in self.blocks:
            xt = x.t()
            h = F.silu(_product(gate, xt)) * _product(up, xt)
            x = x + _product(down, h).t()
        return x


class BreakingFunctionalMLP(FunctionalMLP):
    """``FunctionalMLP`` with each op a graph break. A forward of its own, not a flag in the shared one:
    after compiling this one, Dynamo also broke ``FunctionalMLP``'s graph at every op (it keys what it
    learns about a function by the function's code)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for gate, up, down in self.blocks:
            xt = x.t()
            h = F.silu(_product_breaking(gate, xt)) * _product_breaking(up, xt)
            x = x + _product_breaking(down, h).t()
        return x


def model_input(model, tokens: int, dtype, device) -> torch.Tensor:
    """One step's activations: a sequence of ``tokens`` for the encoder, ``tokens`` rows for the MLP."""
    shape = (1, tokens, model.hidden) if isinstance(model, examples.Encoder) else (tokens, model.hidden)
    return torch.randn(shape, dtype=dtype, device=device)


def pruned_pair(base, pattern: str):
    """(dense model with the zeros, sparse model): sparsify keeps the dense twin exact."""
    sparse = copy.deepcopy(base)
    if pattern == "2:4":
        sparsify(sparse, pattern="2:4", sparsity=0.5, min_size=0)
    else:
        sparsify(sparse, sparsity=float(pattern), min_size=0)
    dense = copy.deepcopy(base)
    with torch.no_grad():
        for name, module in sparse.named_modules():
            if hasattr(module, "dense_weight"):
                dense.get_submodule(name).weight.copy_(module.dense_weight())
    return dense, sparse


def captured(model, x: torch.Tensor):
    """``model(x)`` captured by hand in a CUDA graph after two warm-up calls on a side stream."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            model(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = model(x)
    return lambda: (graph.replay(), y)[1]


def step_us(fn, reps: int, flush) -> float:
    """Median of single steps from an idle GPU behind an L2 flush, host time included."""
    on_gpu = flush is not None
    samples = []
    for _ in range(reps):
        if on_gpu:
            flush.zero_()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


def pipelined_us(fn, steps: int, reps: int, on_gpu: bool) -> float:
    """Median over ``reps`` of the mean step in a run of ``steps`` back-to-back ones."""
    samples = []
    for _ in range(reps):
        if on_gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        if on_gpu:
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e6 / steps)
    return statistics.median(samples)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def run(args) -> list[dict]:
    on_gpu = torch.cuda.is_available()
    device = "cuda" if on_gpu else "cpu"
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    if not on_gpu:
        dtype = torch.float32  # the interpreter's 16-bit arithmetic is slow and partly wrong
    compile_options = dict(mode=args.mode) if on_gpu else dict(backend="aot_eager")
    mode = args.mode if on_gpu else "aot_eager"
    flush = torch.empty(128 << 20, dtype=torch.int8, device=device) if on_gpu else None
    rows = []
    torch.manual_seed(0)
    for model_name in args.models.split(","):
        base = build(model_name, args.smoke, dtype, device)
        for pattern in args.patterns.split(","):
            # The models compiled for the last pattern are done with. Their graphs share code objects
            # with these (one forward per class), and Dynamo stops compiling a code object after 8
            # graphs: a run of patterns and token counts would reach that.
            torch._dynamo.reset()
            dense, sparse = pruned_pair(base, pattern)
            reference_model = copy.deepcopy(dense).float()
            compiled = {}
            if model_name == "llama-mlp-ops":
                compiled["stuning-breaks"] = torch.compile(BreakingFunctionalMLP(sparse), **compile_options)
                sparse = FunctionalMLP(sparse)
            compiled.update({"dense-compiled": torch.compile(dense, **compile_options),
                             "stuning-compiled": torch.compile(sparse, **compile_options)})
            for tokens in (int(t) for t in args.tokens.split(",")):
                x = model_input(base, tokens, dtype, device)
                with torch.inference_mode():
                    reference = reference_model(x.float())
                    models = {"dense": dense, "stuning": sparse, **compiled}
                    fns = {name: (lambda m=m, x=x: m(x)) for name, m in models.items()}
                    if on_gpu:
                        fns["stuning-graph"] = captured(sparse, x)
                    row = {"model": model_name, "pattern": pattern, "tokens": tokens, "dtype": str(dtype), "mode": mode}
                    for name, fn in fns.items():
                        for _ in range(3):  # compile, capture, warm up
                            out = fn()
                        row[f"{name}_err"] = rel_err(out, reference)
                        row[f"{name}_ok"] = row[f"{name}_err"] <= TOLERANCE[dtype]
                        row[f"{name}_step_us"] = step_us(fn, args.reps, flush)
                        row[f"{name}_pipelined_us"] = pipelined_us(fn, args.steps, max(3, args.reps // 10), on_gpu)
                rows.append(row)
                print(json.dumps(row), flush=True)
                save(rows, args.out)  # after every row: a run cut short keeps what it measured
    return rows


def save(rows: list[dict], out: str) -> None:
    os.makedirs(out, exist_ok=True)
    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}
    with open(os.path.join(out, "compile.json"), "w") as f:
        json.dump({**env, "rows": rows}, f, indent=1)
    with open(os.path.join(out, "compile.csv"), "w", newline="") as f:
        fields = list(dict.fromkeys(key for row in rows for key in row))  # rows of every model's paths
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict], path: str) -> None:
    """Grouped bars: a group per row (model, pruning, tokens), a bar per path, the pipelined step."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a benchmark machine
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(rows)), 4.2))
    width = 0.8 / len(PATHS)
    for i, name in enumerate(PATHS):
        xs = [j + (i - (len(PATHS) - 1) / 2) * width for j in range(len(rows))]
        ax.bar(xs, [r.get(f"{name}_pipelined_us", float("nan")) for r in rows], width, label=name)
    ax.set_xticks(range(len(rows)), [f"{r['model']}\n{r['pattern']}, {r['tokens']} tok" for r in rows], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("us a step (back to back)")
    # Rows from before --mode were all reduce-overhead.
    modes = sorted({r.get("mode", "reduce-overhead") for r in rows})
    ax.set_title(f"eager against torch.compile(mode={'/'.join(modes)!r})")
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(rows: list[dict]) -> None:
    print(f"\n{'model':10} {'zeros':5} {'tok':>4} | step us: " + " ".join(f"{p:>16}" for p in PATHS)
          + " | pipelined us: " + " ".join(f"{p:>16}" for p in PATHS))
    for r in rows:
        step = " ".join(f"{r.get(f'{p}_step_us', float('nan')):16.1f}" for p in PATHS)
        piped = " ".join(f"{r.get(f'{p}_pipelined_us', float('nan')):16.1f}" for p in PATHS)
        bad = [p for p in PATHS if r.get(f"{p}_ok") is False]
        wrong = f"  WRONG: {bad}" if bad else ""
        print(f"{r['model']:10} {r['pattern']:5} {r['tokens']:4d} | {step} | {piped}{wrong}")


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.replot:
        with open(args.replot) as f:
            rows = json.load(f)["rows"]
        plot(rows, os.path.join(os.path.dirname(args.replot), "compile.png"))
        table(rows)
        return
    if args.smoke:
        args.tokens, args.reps, args.steps = "4", 2, 2
    rows = run(args)
    plot(rows, os.path.join(args.out, "compile.png"))
    table(rows)


if __name__ == "__main__":
    main()
