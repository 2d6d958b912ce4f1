"""Call 3 (BENCHMARKS.md 9l): the fp32 scatter path on three configs, its error against float64.

    python3 benchmarks/h200-fp32-split/call3_smoke.py
"""

import time

import torch
from stuning.kernels.spmm import SpMMConfig

import stuning

CONFIGS = (SpMMConfig(64, 64, 128, 1, False, 4, 4, "scatter"),
           SpMMConfig(64, 128, 128, 2, False, 4, 4, "scatter", split_k=2),
           SpMMConfig(128, 64, 128, 1, False, 8, 4, "scatter", split_k=4))

torch.manual_seed(0)
for m, k, n in ((300, 1000, 128), (4096, 4096, 128)):
    w = torch.randn(m, k, device="cuda") * (torch.rand(m, k, device="cuda") > 0.8)
    x = torch.randn(k, n, device="cuda")
    a = stuning.CSRMatrix.from_dense(w, pad_to=4)
    ref = w.double() @ x.double()
    for cfg in CONFIGS:
        t = time.time()
        y = stuning.spmm(a, x, config=cfg)
        torch.cuda.synchronize()
        err = float((y.double() - ref).norm() / ref.norm())
        print(m, k, n, cfg.rows, cfg.nnz_step, cfg.split_k, "err", err, f"{time.time() - t:.1f}s", flush=True)
