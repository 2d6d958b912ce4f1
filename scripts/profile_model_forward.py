"""Where a model's forward spends its GPU time: each kernel's total, dense model against stuning's.

BENCHMARKS.md 8d: at 8192 tokens the Llama-7B MLP block's three pretuned sparse layers summed to
2.74 ms in pretune's timings, and the block took 4.15 ms (dense: 3.01 ms). This runs one forward of
the dense and the sparsified model (the database's configs, as a user gets them) under
``torch.profiler`` and lists the GPU kernels by total time, so the time outside the layers' kernels
(copies of X^T, elementwise work, anything unexpected) shows by name.

    python3 scripts/profile_model_forward.py --model llama-mlp --sparsity 0.95 --tokens 8192
    python3 scripts/profile_model_forward.py --model bert --sparsity 0.9 --tokens 128 --top 15

Needs a CUDA GPU (the profiler's kernel times). Writes ``$OUT/profile_<model>_<tokens>.json``;
prints a table per model last.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

import stuning
from stuning.nn import examples

OUT = os.environ.get("OUT", ".")


def kernel_times(model, x, repeats: int) -> dict[str, tuple[float, int]]:
    """{kernel name: (total us per forward, launches per forward)} over ``repeats`` forwards."""
    with torch.no_grad():
        for _ in range(3):  # compiles, lookups and allocations outside the profile
            model(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(repeats):
                model(x)
            torch.cuda.synchronize()
    totals: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name][0] += event.device_time / repeats
            totals[event.name][1] += 1
    return {name: (us, count // repeats) for name, (us, count) in totals.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-mlp", choices=["llama-mlp", "bert"])
    ap.add_argument("--sparsity", type=float, default=0.95)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--top", type=int, default=10, help="kernels listed per model")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("profile_model_forward.py needs a CUDA GPU")
    make = examples.llama_mlp if args.model == "llama-mlp" else examples.bert_encoder
    dense = make(dtype=torch.float16, device="cuda")
    sparse = copy.deepcopy(dense)
    stuning.sparsify(sparse, sparsity=args.sparsity, min_size=0)
    with torch.no_grad():  # the same zeros in the dense model
        for name, layer in sparse.named_modules():
            if isinstance(layer, stuning.nn.SparseLinear):
                dense.get_submodule(name).weight.copy_(layer.dense_weight())
    seq = 128 if args.tokens % 128 == 0 else args.tokens
    x = torch.randn(args.tokens // seq, seq, dense.hidden, device="cuda", dtype=torch.float16)
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "args": vars(args)}
    for label, model in (("dense", dense), ("stuning", sparse)):
        times = kernel_times(model, x, args.repeats)
        report[label] = {name: {"us": us, "launches": n} for name, (us, n) in times.items()}
        total = sum(us for us, _ in times.values())
        print(f"\n{label}: {total:.1f} us of kernels a forward "
              f"({args.model}, {args.sparsity:.0%}, {args.tokens} tokens)")
        for name, (us, n) in sorted(times.items(), key=lambda kv: -kv[1][0])[: args.top]:
            print(f"  {us:9.1f} us  {n:3d}x  {name[:90]}")
    path = os.path.join(OUT, f"profile_{args.model}_{args.tokens}.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
