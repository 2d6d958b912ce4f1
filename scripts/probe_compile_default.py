#!/usr/bin/env python3
"""Why a sparse model compiled in ``torch.compile``'s default mode runs slower than eager.

For the Llama-7B MLP block at 95% zeros (``PROBE_TOKENS`` tokens, fp16): the host time of a call
(the GPU kept busy) and the back-to-back step of one layer eager, through
``torch.ops.stuning.sparse_layer`` called directly and through its eager forward; of the dense and
sparse blocks eager and compiled in default mode; and of the sparse block captured by hand. Then
a cProfile of compiled calls (by own time and by cumulative time) and Dynamo's counters. Writes
``$OUT/compile_default.txt``; prints a table last.

    python3 scripts/probe_compile_default.py
"""

from __future__ import annotations

import copy
import cProfile
import io
import os
import pstats
import sys

import torch
from torch._dynamo.utils import counters

from stuning.nn import compiled, examples, sparsify

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compile import captured, pipelined_us  # noqa: E402
from probe_host_time import host_us  # noqa: E402

OUT = os.environ.get("OUT", ".")
TOKENS = int(os.environ.get("PROBE_TOKENS", "16"))


def main() -> None:
    dense = examples.llama_mlp(dtype=torch.float16, device="cuda")
    sparse = copy.deepcopy(dense)
    sparsify(sparse, sparsity=0.95)
    layer = next(m for m in sparse.modules() if hasattr(m, "_handle"))
    x = torch.randn(TOKENS, 4096, dtype=torch.float16, device="cuda")
    weight = [getattr(layer, name) for name in layer._weight_buffers]
    block, dense_block = torch.compile(sparse), torch.compile(dense)
    rows, log = [], []
    with torch.inference_mode():
        fns = {"layer eager": lambda: layer(x),
               "layer op": lambda: compiled.sparse_layer(layer._handle, x, weight, layer.bias),
               "layer _eager_forward": lambda: layer._eager_forward(x),
               "dense eager": lambda: dense(x), "dense compiled": lambda: dense_block(x),
               "block eager": lambda: sparse(x), "block compiled": lambda: block(x)}
        # As bench_compile does: a hand-captured graph of the sparse block first, then the rest.
        graph = captured(sparse, x)
        fns["block graph"] = graph
        for name, fn in fns.items():
            rows.append((name, host_us(fn), pipelined_us(fn, 20, 5, True)))
        log.append(f"dynamo counters: { {k: dict(v) for k, v in counters.items()} }")
        for sort in ("tottime", "cumulative"):
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(20):
                block(x)
            profile.disable()
            torch.cuda.synchronize()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats(sort).print_stats(45)
            log.append(text.getvalue())
    with open(os.path.join(OUT, "compile_default.txt"), "w") as f:
        f.write("\n\n".join(log))
    print(log[0])
    print(log[1][:5000])
    print(f"\n{'what':22} {'host us':>8} {'pipelined us':>12}")
    for name, us, piped in rows:
        print(f"{name:22} {us:8.1f} {piped:12.1f}")


if __name__ == "__main__":
    main()
