"""A/B on the GPU: the dense SDDMM kernel's sampling pass by rows (kernels/sddmm_dense.py) against
the flat pass it replaced (flat_pass_sddmm_dense.py here, the file at 5fafde4: a row index and a
column read per nonzero). Same cuBLAS product in both; each variant checked against float64, then
timed twice in the order flat, row, row, flat (CUDA-graph replays behind an L2 flush), the two
medians averaged. First-table weight masks (uniform random), fp16, B as the transpose of N x K.

    git show 5fafde4:kernels/sddmm_dense.py > benchmarks/h200-sddmm-row-pass/flat_pass_sddmm_dense.py
    python3 benchmarks/h200-sddmm-row-pass/ab_pass.py    # run from the project root, at the
                                                          # session's first commit (call 2)
"""

import importlib.util
import itertools
import json
import os
import sys

import torch

sys.path.insert(0, "scripts")
from probe_harness import check_close, probe_time_us, write_results  # noqa: E402
from stuning.kernels import sddmm_dense  # noqa: E402

import stuning  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("flat", os.path.join(HERE, "flat_pass_sddmm_dense.py"))
flat = importlib.util.module_from_spec(spec)
spec.loader.exec_module(flat)

SHAPES = [(768, 3072), (3072, 768), (4096, 4096), (4096, 11008), (11008, 4096)]
gen = torch.Generator(device="cuda").manual_seed(0)
rows = []
for (m, n), k, sparsity in itertools.product(SHAPES, (256, 2048), (0.7, 0.9, 0.95, 0.98)):
    keep = torch.rand(m, n, generator=gen, device="cuda") >= sparsity
    mask = stuning.CSRMatrix.from_dense(keep * torch.randn(m, n, generator=gen, device="cuda").half())
    a = torch.randn(m, k, generator=gen, device="cuda").half()
    b = torch.randn(n, k, generator=gen, device="cuda").half().t()
    row_ids = mask.row_ids()
    ref = (a.double() @ b.double())[row_ids.long(), mask.col.long()]
    out = torch.empty(mask.nnz, dtype=a.dtype, device="cuda")
    kw = dict(alpha=1.0, beta=0.0, nnz_block=1024, num_warps=4, out=out)
    runs = {"flat": lambda: flat.sddmm_dense(row_ids, mask.col, mask.values, a, b, **kw),  # noqa: B023
            "row": lambda: sddmm_dense.sddmm_dense(mask.crow, mask.col, mask.values, a, b, **kw)}  # noqa: B023
    for name, run in runs.items():
        out.fill_(float("nan"))
        check_close(run(), ref, f"{name} {m}x{n} k={k} {sparsity}")
    times = {name: [] for name in runs}
    for name in ("flat", "row", "row", "flat"):
        times[name].append(probe_time_us(runs[name], False))
    row = {"m": m, "n": n, "k": k, "sparsity": sparsity, "nnz": mask.nnz,
           "dense_us": probe_time_us(lambda: a @ b, False),  # noqa: B023
           **{f"{name}_us": sum(t) / len(t) for name, t in times.items()}}
    rows.append(row)
    print(json.dumps(row), flush=True)
write_results(rows, "ab_pass.json")
print(f"{'problem':>26} {'cuBLAS':>7} {'flat':>7} {'row':>7} {'flat/row':>8}")
for r in rows:
    print(f"{r['m']:>6}x{r['n']:<6} k={r['k']:<5} {r['sparsity']:.0%} {r['dense_us']:7.1f} {r['flat_us']:7.1f} "
          f"{r['row_us']:7.1f} {r['flat_us'] / r['row_us']:8.3f}")
