"""Device call 6 (session 52): the tiled SDDMM kernel before (08b4677, masked along M) and after
(EVEN_M) on the attention suite's masks at 80-98% zeros (fp16, L = 1024-4096, K = 64 / 128, Q and
K^T K-contiguous, the bench's inputs), each with the config the shipped database looks up for it.
Each checked against float64, then timed in the order before, after, after, before (CUDA-graph
replays behind an L2 flush); cuBLAS's dense product in the same run. The before kernel is read from
``scratch/sddmm_tiled_before.py`` (`git show 08b4677:kernels/sddmm_tiled.py`, carried).

    python3 benchmarks/h200-sddmm-wgrad-shapes/even_m_ab.py    # from the project root
"""

import importlib.util
import itertools
import json
import sys

import torch

sys.path.insert(0, "scripts")
from probe_harness import check_close, probe_time_us, write_results  # noqa: E402
from stuning.kernels import sddmm as sddmm_kernel  # noqa: E402

from stuning.bench.baselines import sddmm_inputs  # noqa: E402
from stuning.suite import SDDMMCase  # noqa: E402

spec = importlib.util.spec_from_file_location("sddmm_tiled_before", "scratch/sddmm_tiled_before.py")
before = importlib.util.module_from_spec(spec)
spec.loader.exec_module(before)
kernels = {"before": before, "after": sddmm_kernel.sddmm_tiled}
rows = []
gen = torch.Generator(device="cuda").manual_seed(0)
for L, k, sparsity in itertools.product((1024, 2048, 4096), (64, 128), (0.8, 0.9, 0.95, 0.98)):
    case = SDDMMCase(L, L, k, sparsity, "fp16", "attention")
    inputs = sddmm_inputs(case, device="cuda", generator=gen, pad_to=1, on_gpu=True)
    times = {name: [] for name in kernels}
    for name in ("before", "after", "after", "before"):
        sddmm_kernel.sddmm_tiled = kernels[name]
        check_close(inputs.run_stuning(None), inputs.reference.double(), f"{case.name} {name}")
        times[name].append(probe_time_us(lambda: inputs.run_stuning(None), False))  # noqa: B023
    sddmm_kernel.sddmm_tiled = kernels["after"]
    row = {"case": case.name, "dense_us": probe_time_us(inputs.baselines["dense"], False),
           **{f"{name}_us": sum(t) / len(t) for name, t in times.items()}}
    rows.append(row)
    print(json.dumps(row), flush=True)
write_results(rows, "even_m_ab.json")
print(f"{'case':40} {'cuBLAS':>7} {'before':>7} {'after':>7} {'before/after':>12}")
for r in rows:
    print(f"{r['case']:40} {r['dense_us']:7.1f} {r['before_us']:7.1f} {r['after_us']:7.1f} "
          f"{r['before_us'] / r['after_us']:12.3f}")
