#!/usr/bin/env python3
"""Where a compiled sparse step's host time goes (``torch.compile(mode="reduce-overhead")``).

For the Llama-7B MLP block at 95% zeros (``PROBE_TOKENS`` tokens, fp16): the step time of a trivial
compiled function (the CUDA-graph trees' own floor on this host), of the compiled dense and sparse
blocks, with Inductor's graph partitions on and off; Inductor's counters (cudagraph skips) and a
profile of one replayed step (which CPU ops run, whether the sparse operator still runs eagerly).
Writes ``$OUT/compile_overhead.txt``; prints a table last.

    python3 scripts/probe_compile_overhead.py
"""

from __future__ import annotations

import copy
import os
import sys

import torch
import torch._inductor.config as inductor_config
from torch._dynamo.utils import counters

from stuning.nn import examples, sparsify

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compile import pipelined_us  # noqa: E402
from probe_host_time import host_us  # noqa: E402

OUT = os.environ.get("OUT", ".")
TOKENS = int(os.environ.get("PROBE_TOKENS", "16"))


def main() -> None:
    log = []
    dense = examples.llama_mlp(dtype=torch.float16, device="cuda")
    sparse = copy.deepcopy(dense)
    sparsify(sparse, sparsity=0.95)
    x = torch.randn(TOKENS, 4096, dtype=torch.float16, device="cuda")
    rows = []
    with torch.inference_mode():
        for partition in (inductor_config.graph_partition, not inductor_config.graph_partition):
            inductor_config.graph_partition = partition
            torch._dynamo.reset()
            counters.clear()
            fns = {"x * 2": torch.compile(lambda t: t * 2, mode="reduce-overhead"),
                   "dense": torch.compile(dense, mode="reduce-overhead"),
                   "stuning": torch.compile(sparse, mode="reduce-overhead")}
            for name, f in fns.items():
                for _ in range(4):
                    f(x)
                rows.append((partition, name, pipelined_us(lambda f=f: f(x), 50, 5, True), host_us(lambda f=f: f(x))))
                print(rows[-1], flush=True)
            log.append(f"graph_partition={partition}: inductor counters {dict(counters['inductor'])}")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                    torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    fns["stuning"](x)
                torch.cuda.synchronize()
            log.append(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    with open(os.path.join(OUT, "compile_overhead.txt"), "w") as f:
        f.write("\n\n".join(log))
    print("\n".join(log[:1] + log[2:3]))
    print(f"\n{'partitions':10} {'fn':8} {'pipelined us':>12} {'host us':>8}")
    for partition, name, piped, host in rows:
        print(f"{partition!s:10} {name:8} {piped:12.1f} {host:8.1f}")


if __name__ == "__main__":
    main()
