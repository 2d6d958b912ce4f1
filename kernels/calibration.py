"""A micro-kernel that measures the CUDA-core FMA ceiling (for ``stuning calibrate``)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _fma_kernel(out_ptr, a, b, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    # Four independent chains per element keep the FMA pipes full without memory traffic.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x0 = offs.to(tl.float32) * 1e-9
    x1 = x0 + 1.0
    x2 = x0 + 2.0
    x3 = x0 + 3.0
    for _ in range(ITERS):
        x0 = x0 * a + b
        x1 = x1 * a + b
        x2 = x2 * a + b
        x3 = x3 * a + b
    tl.store(out_ptr + offs, x0 + x1 + x2 + x3)


def fma_launcher(programs: int, iters: int = 4096, block: int = 1024):
    """A closure that runs the FMA kernel, and the FLOPs one run performs."""
    out = torch.empty(programs * block, dtype=torch.float32, device="cuda")

    def run():
        _fma_kernel[(programs,)](out, 0.999, 0.001, ITERS=iters, BLOCK=block, num_warps=8)

    return run, 2.0 * 4 * iters * programs * block
