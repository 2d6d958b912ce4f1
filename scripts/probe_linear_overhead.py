"""Where a sparse Llama MLP block's time goes at decode widths, beside the kernels themselves.

The block's layers timed alone (cold L2) summed to less than the block: this times the block, each
``SparseLinear`` alone, each kernel alone, the copies around the kernels, and the block computed in
the transposed domain (X^T made once, every kernel writing into its consumer's layout), and lists
the kernels one eager forward launches. Needs a CUDA GPU; $STUNING_DB_DIR is where it pretunes.

    python3 scripts/probe_linear_overhead.py          # env: TOKENS=16 SPARSITY=0.95 PRETUNE_SECONDS=6
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F

import stuning
from stuning.nn import examples
from stuning.tuning.search import Budget
from stuning.tuning.timing import flushed_graph_us


def kernel_table(fn, reps: int = 20) -> list[dict]:
    """Name, launches per call and mean device microseconds of every kernel ``fn`` launches."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        if e.device_type.name != "CUDA" or e.count == 0:
            continue
        rows.append({"kernel": e.key[:90], "per_call": e.count / reps,
                     "us_each": e.device_time_total / e.count})
    return sorted(rows, key=lambda r: -r["us_each"] * r["per_call"])


def main() -> None:
    tokens = int(os.environ.get("TOKENS", 16))
    sparsity = float(os.environ.get("SPARSITY", 0.95))
    out = Path(os.environ.get("OUT", "results/linear-overhead"))
    out.mkdir(parents=True, exist_ok=True)
    dev, dtype = "cuda", torch.float16
    dense = examples.llama_mlp(dtype=dtype, device=dev).eval()
    sparse = copy.deepcopy(dense)
    stuning.sparsify(sparse, sparsity=sparsity, min_size=0)
    with torch.no_grad():
        for name in ("gate_proj", "up_proj", "down_proj"):
            dense.get_submodule(f"layers.0.{name}").weight.copy_(sparse.get_submodule(f"layers.0.{name}").dense_weight())
    stuning.pretune(sparse, tokens=[tokens], db=os.environ.get("STUNING_DB_DIR"),
                    budget=Budget(max_seconds=float(os.environ.get("PRETUNE_SECONDS", 6))))
    block = sparse.layers[0]
    x = torch.randn(1, tokens, 4096, device=dev, dtype=dtype)
    gate, up, down = block.gate_proj, block.up_proj, block.down_proj
    xt = x.reshape(-1, 4096).t().contiguous()
    h = torch.randn(11008, tokens, device=dev, dtype=dtype)
    ht_rows = h.t().contiguous()  # (tokens, 11008): what down_proj receives in the model
    yt = torch.empty(4096, tokens, device=dev, dtype=dtype)
    y_gate = torch.empty(tokens, 11008, device=dev, dtype=dtype)
    y_down = torch.empty(tokens, 4096, device=dev, dtype=dtype)

    def transposed_block():
        t = x.reshape(-1, 4096).t().contiguous()
        g = gate.sparse_weight.matmul(t)
        u = up.sparse_weight.matmul(t)
        return down.sparse_weight.matmul(F.silu(g) * u).t().contiguous()

    cases = {
        "block dense": lambda: dense(x),
        "block sparse": lambda: sparse(x),
        "block transposed domain": transposed_block,
        "gate layer": lambda: gate(x),
        "up layer": lambda: up(x),
        "down layer": lambda: down(ht_rows.view(1, tokens, 11008)),
        "gate kernel": lambda: gate.sparse_weight.matmul(xt),
        "up kernel": lambda: up.sparse_weight.matmul(xt),
        "down kernel": lambda: down.sparse_weight.matmul(h),
        "gate kernel into Y^T": lambda: gate.sparse_weight.matmul(xt, out=y_gate.t()),
        "down kernel into Y^T": lambda: down.sparse_weight.matmul(h, out=y_down.t()),
        "copy X^T contiguous K=4096": lambda: x.reshape(-1, 4096).t().contiguous(),
        "copy X^T contiguous K=11008": lambda: ht_rows.t().contiguous(),
        "copy Y^T -> Y M=4096": lambda: yt.t().contiguous(),
        "silu*mul (11008 x N)": lambda: F.silu(h) * h,
        "dense gate F.linear": lambda: F.linear(x, dense.layers[0].gate_proj.weight),
        "dense down F.linear": lambda: F.linear(ht_rows, dense.layers[0].down_proj.weight),
    }
    results = {}
    with torch.no_grad():
        ref = dense.layers[0](x).float()
        err = float((transposed_block().float().view_as(ref) - ref).norm() / ref.norm())
        for name, fn in cases.items():
            with torch.cuda.stream(torch.cuda.Stream()):
                results[name] = flushed_graph_us(fn, rep_ms=200)
        table = {"block sparse": kernel_table(lambda: sparse(x)), "block dense": kernel_table(lambda: dense(x))}
    (out / "linear_overhead.json").write_text(json.dumps({"tokens": tokens, "sparsity": sparsity, "us": results,
                                                          "transposed_rel_err": err, "kernels": table}, indent=1))
    for which, rows in table.items():
        print(f"-- kernels of one eager forward, {which} (profiler, warm L2)")
        for r in rows:
            print(f"  {r['per_call']:4.1f} x {r['us_each']:7.2f} us  {r['kernel']}")
    print(f"-- cold-L2 graph timings, tokens={tokens}, sparsity={sparsity} (transposed block rel err {err:.1e})")
    for name, us in results.items():
        print(f"  {us:8.2f} us  {name}")


if __name__ == "__main__":
    main()
