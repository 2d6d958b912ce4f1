"""Device call 3 (session 49): the dense SDDMM kernel's two sampling passes as the library ships
them, flat (``dense_config()``) against by rows (``dense_config(rows_per_program(...))``), on the
first table's weight masks (uniform random, fp16, B as the transpose of N x K). Each checked
against float64, then timed in the order flat, rows, rows, flat (CUDA-graph replays behind an L2
flush), the two medians averaged.

    python3 benchmarks/h200-sddmm-row-pass/passes.py    # from the project root
"""

import itertools
import json
import sys

import torch

sys.path.insert(0, "scripts")
from probe_harness import check_close, probe_time_us, write_results  # noqa: E402
from stuning.kernels import sddmm as sddmm_kernel  # noqa: E402
from stuning.kernels import sddmm_dense  # noqa: E402

import stuning  # noqa: E402

SHAPES = [(768, 3072), (3072, 768), (4096, 4096), (4096, 11008), (11008, 4096)]
gen = torch.Generator(device="cuda").manual_seed(0)
rows = []
for (m, n), k, sparsity in itertools.product(SHAPES, (256, 2048), (0.7, 0.9, 0.95, 0.98)):
    keep = torch.rand(m, n, generator=gen, device="cuda") >= sparsity
    mask = stuning.CSRMatrix.from_dense(keep * torch.randn(m, n, generator=gen, device="cuda").half())
    a = torch.randn(m, k, generator=gen, device="cuda").half()
    b = torch.randn(n, k, generator=gen, device="cuda").half().t()
    ref = (a.double() @ b.double())[mask.row_ids().long(), mask.col.long()]
    configs = {"flat": sddmm_kernel.dense_config(),
               "rows": sddmm_kernel.dense_config(sddmm_dense.rows_per_program(mask.nnz, m))}
    runs = {name: (lambda c=c: stuning.sddmm(mask, a, b, config=c).values) for name, c in configs.items()}  # noqa: B023
    for name, run in runs.items():
        check_close(run(), ref, f"{name} {m}x{n} k={k} {sparsity}")
    times = {name: [] for name in runs}
    for name in ("flat", "rows", "rows", "flat"):
        times[name].append(probe_time_us(runs[name], False))
    row = {"m": m, "n": n, "k": k, "sparsity": sparsity, "nnz": mask.nnz, "rows_per_program": configs["rows"].block_m,
           "dense_us": probe_time_us(lambda: a @ b, False),  # noqa: B023
           **{f"{name}_us": sum(t) / len(t) for name, t in times.items()}}
    rows.append(row)
    print(json.dumps(row), flush=True)
write_results(rows, "passes.json")
print(f"{'problem':>26} {'cuBLAS':>7} {'flat':>7} {'rows':>7} {'flat/rows':>9}")
for r in rows:
    print(f"{r['m']:>6}x{r['n']:<6} k={r['k']:<5} {r['sparsity']:.0%} {r['dense_us']:7.1f} {r['flat_us']:7.1f} "
          f"{r['rows_us']:7.1f} {r['flat_us'] / r['rows_us']:9.3f}")
