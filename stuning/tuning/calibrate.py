"""``stuning calibrate``: measure this GPU's ceilings, which the cost model then uses."""

from __future__ import annotations

import torch

from stuning.tuning.timing import bench_us


def measure_ceilings(*, size_mb: int = 1024) -> dict:
    """Copy bandwidth (bytes read + written), CUDA-core FMA rate, tensor rate per dtype."""
    if not torch.cuda.is_available():
        raise RuntimeError("calibrate measures a GPU: no CUDA device is visible")
    from stuning.kernels.calibration import fma_launcher

    n = size_mb * 2**20 // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    t_copy, _ = bench_us(lambda: dst.copy_(src))
    dram_gbs = 2 * n * 4 / (t_copy * 1e3)

    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    run, flops = fma_launcher(programs=sms * 16)
    t_fma, _ = bench_us(run)
    fp32_tflops = flops / (t_fma * 1e6)

    tensor = {}
    size = 8192
    allow = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True  # "float32" here means the TF32 tensor rate
        for name, dtype in (("float16", torch.float16), ("bfloat16", torch.bfloat16), ("float32", torch.float32)):
            a = torch.randn(size, size, device="cuda", dtype=dtype)
            b = torch.randn(size, size, device="cuda", dtype=dtype)
            t, _ = bench_us(lambda a=a, b=b: a @ b)
            tensor[name] = 2 * size**3 / (t * 1e6)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow
    return {
        "dram_gbs": round(dram_gbs, 1),
        "fp32_tflops": round(fp32_tflops, 2),
        "tensor_tflops": {k: round(v, 1) for k, v in tensor.items()},
        "device": torch.cuda.get_device_name(),
    }
