"""Run the pick and a two-range scatter config once each (N = 128 then 16, 4096 x 4096, 95%) for ncu."""
# Ran on f2ecd07 (num_warps = 8 on 64 rows: two K ranges); on the reverted kernel those configs are rejected.
import torch
from stuning.kernels.spmm import SpMMConfig

import stuning

gen = torch.Generator().manual_seed(0)
w = torch.randn(4096, 4096, generator=gen)
w = (w * (torch.rand(4096, 4096, generator=gen) >= 0.95)).half().cuda()
a = stuning.CSRMatrix.from_dense(w, pad_to=4)
CASES = ((128, [(64, 128, 128, 4, 4, 2), (64, 64, 128, 8, 3, 2)]),
         (16, [(64, 128, 16, 4, 4, 4), (64, 128, 16, 8, 4, 2)]))
for n, cfgs in CASES:
    x = torch.randn(4096, n, generator=gen).half().cuda()
    for bm, bk, bn, warps, stages, split in cfgs:
        cfg = SpMMConfig(bm, bk, bn, 1, False, warps, stages, "scatter", split_k=split)
        y = stuning.spmm(a, x, config=cfg)  # compile + warm
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        y = stuning.spmm(a, x, config=cfg)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        err = float((y.double() - w.double() @ x.double()).norm() / (w.double() @ x.double()).norm())
        print(n, cfg, "rel err", err)
