#!/usr/bin/env python3
"""Why a sparse model compiled in ``torch.compile``'s default mode runs slower than eager.

For the Llama-7B MLP block at 95% zeros (``PROBE_TOKENS`` tokens, fp16), host time per call of: one
layer eager, the same layer through ``torch.ops.stuning.sparse_layer`` called directly, the block
eager, and the block compiled in default mode; then a cProfile of compiled calls (sorted by own time
and by cumulative time). Writes ``$OUT/compile_default.txt``; prints a table last.

    python3 scripts/probe_compile_default.py
"""

from __future__ import annotations

import copy
import cProfile
import io
import os
import pstats
import statistics
import time

import torch

from stuning.nn import compiled, examples, sparsify

OUT = os.environ.get("OUT", ".")
TOKENS = int(os.environ.get("PROBE_TOKENS", "16"))


def host_us(fn, calls: int = 50) -> float:
    """Median host time of a call, the GPU kept busy so that no call waits on it."""
    for _ in range(5):
        fn()
    samples = []
    for _ in range(calls):
        torch.cuda._sleep(int(2e7))
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def main() -> None:
    dense = examples.llama_mlp(dtype=torch.float16, device="cuda")
    sparse = copy.deepcopy(dense)
    sparsify(sparse, sparsity=0.95)
    layer = next(m for m in sparse.modules() if hasattr(m, "_handle"))
    x = torch.randn(TOKENS, 4096, dtype=torch.float16, device="cuda")
    weight = [getattr(layer, name) for name in layer._weight_buffers]
    block = torch.compile(sparse)
    rows, log = [], []
    with torch.inference_mode():
        rows.append(("layer eager", host_us(lambda: layer(x))))
        rows.append(("layer op", host_us(lambda: compiled.sparse_layer(layer._handle, x, weight, layer.bias))))
        rows.append(("layer _eager_forward", host_us(lambda: layer._eager_forward(x))))
        rows.append(("block eager", host_us(lambda: sparse(x))))
        rows.append(("block compiled", host_us(lambda: block(x))))
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
    print(log[0][:6000])
    print(f"\n{'what':22} {'host us':>8}")
    for name, us in rows:
        print(f"{name:22} {us:8.1f}")


if __name__ == "__main__":
    main()
