"""BENCHMARKS.md 8r, call 5: the floor of the benchmarks' timer (``flushed_graph_us``: CUDA-graph
replays, L2 flushed inside the graph, the flush's own time taken off) on trivial kernels, beside
cuBLAS on small decode shapes. Run from the project root on the GPU: ``python3 call5-floor.py``."""

import torch
import triton
import triton.language as tl

from stuning.tuning.timing import flushed_graph_us


@triton.jit
def _empty(x_ptr):
    pass


@triton.jit
def _fill(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), tl.float16), mask=offs < n)


def main() -> None:
    dev = "cuda"
    y = torch.empty(3072 * 16, device=dev, dtype=torch.float16)
    y2 = torch.empty(4096 * 128, device=dev, dtype=torch.float16)
    rows = {
        "empty triton kernel, 1 program": lambda: _empty[(1,)](y),
        "empty triton kernel, 132 programs": lambda: _empty[(132,)](y),
        "triton fill 3072x16 fp16": lambda: _fill[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), BLOCK=1024),
        "triton fill 4096x128 fp16": lambda: _fill[(triton.cdiv(y2.numel(), 1024),)](y2, y2.numel(), BLOCK=1024),
    }
    for m, k, n in [(3072, 768, 16), (768, 3072, 16), (3072, 768, 128), (4096, 4096, 16)]:
        a = torch.randn(m, k, device=dev, dtype=torch.float16)
        b = torch.randn(k, n, device=dev, dtype=torch.float16)
        rows[f"cuBLAS {m}x{k} N={n}"] = lambda a=a, b=b: torch.mm(a, b)
    for name, fn in rows.items():
        fn()
        torch.cuda.synchronize()
        ts = sorted(flushed_graph_us(fn, rep_ms=50) for _ in range(3))
        print(f"{name:40s} {ts[1]:7.2f} us  (3 runs {ts[0]:.2f}-{ts[2]:.2f})")


if __name__ == "__main__":
    main()
