"""Read the hardware counters of stuning's kernels and their dense baselines with Nsight Compute.

Timings say how far a kernel is from its bound; the counters say which bound: DRAM and L2
throughput against their peaks, achieved occupancy, and where warps stall. For each case of a small
fixed list (decode-width 2:4 and SpMM, attention SDDMM; ``PROFILE_CASES`` picks by name) the script
builds the bench's inputs, calls stuning's kernel with its configuration from the database (as a
user gets it) and the dense cuBLAS product once each for warm-up, then once each between
``cudaProfilerStart`` and ``cudaProfilerStop``. Run it under ncu, which replays each kernel with
caches flushed (cold, as the benchmarks time):

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        --section WarpStateStats --section SchedulerStats python3 scripts/profile_kernels.py

Without ncu it only runs the cases; on a machine with no GPU it exits (counters need one).
With ``--section SourceCounters -o REPORT``, ``scripts/ncu_source_stalls.py`` reads where, per SASS
instruction, the warps stalled (BENCHMARKS.md 8r).
"""

from __future__ import annotations

import json
import os

import torch

CASES = {
    "semi24_4096x4096_n16": ("semi24", dict(m=4096, k=4096, n=16)),
    "semi24_11008x4096_n16": ("semi24", dict(m=11008, k=4096, n=16)),
    "semi24_4096x4096_n128": ("semi24", dict(m=4096, k=4096, n=128)),
    "spmm_4096x4096_n16_s95": ("spmm", dict(m=4096, k=4096, n=16, sparsity=0.95, skew_cv=0.0)),
    "spmm_4096x4096_n128_s95": ("spmm", dict(m=4096, k=4096, n=128, sparsity=0.95, skew_cv=0.0)),
    "sddmm_L4096_k64_s95": ("sddmm", dict(m=4096, n=4096, k=64, sparsity=0.95, family="attention")),
    "sddmm_L4096_k64_s98": ("sddmm", dict(m=4096, n=4096, k=64, sparsity=0.98, family="attention")),
    "sddmm_L4096_k128_s95": ("sddmm", dict(m=4096, n=4096, k=128, sparsity=0.95, family="attention")),
    "sddmm_L1024_k64_s95": ("sddmm", dict(m=1024, n=1024, k=64, sparsity=0.95, family="attention")),
    # Wide N, where the gather kernels do one multiply-add per element of B they load.
    "spmm_4096x4096_n2048_s95": ("spmm", dict(m=4096, k=4096, n=2048, sparsity=0.95, skew_cv=0.0)),
    "spmm_4096x4096_n2048_s98": ("spmm", dict(m=4096, k=4096, n=2048, sparsity=0.98, skew_cv=0.0)),
    "spmm_fp32_4096x4096_n2048_s80": ("spmm", dict(m=4096, k=4096, n=2048, sparsity=0.8, skew_cv=0.0,
                                                     dtype="fp32")),
}

# ``PROFILE_CONFIG`` (a JSON object of config fields) runs that config in every selected case instead
# of the database's: e.g. '{"kernel": "tiled", "block_m": 64, ...}' to read the tiled SDDMM kernel
# where the database picks the gather one.


def build(op: str, params: dict):
    from stuning.bench.baselines import sddmm_inputs, semi24_inputs, spmm_inputs
    from stuning.bench.runner import BenchSettings
    from stuning.suite import SDDMMCase, Semi24Case, SpMMCase

    case_type, make = {"semi24": (Semi24Case, semi24_inputs), "spmm": (SpMMCase, spmm_inputs),
                       "sddmm": (SDDMMCase, sddmm_inputs)}[op]
    case = case_type(**{"dtype": "fp16", **params})
    gen = torch.Generator(device="cuda").manual_seed(0)
    return make(case, device="cuda", generator=gen, pad_to=BenchSettings.pad_to, on_gpu=False)


def forced_config(op: str):
    """The config ``PROFILE_CONFIG`` names for ``op``, or None (the database's)."""
    text = os.environ.get("PROFILE_CONFIG")
    if not text:
        return None
    from stuning.kernels.sddmm import SDDMMConfig
    from stuning.kernels.semi24 import Semi24Config
    from stuning.kernels.spmm import SpMMConfig

    return {"semi24": Semi24Config, "spmm": SpMMConfig, "sddmm": SDDMMConfig}[op](**json.loads(text))


def main() -> None:
    if not torch.cuda.is_available():
        print("profile_kernels.py: no CUDA device (hardware counters need one)")
        return
    wanted = os.environ.get("PROFILE_CASES")
    names = [n for n in CASES if not wanted or any(w in n for w in wanted.split(","))]
    runs = []
    for name in names:
        op, params = CASES[name]
        inputs = build(op, params)
        config = forced_config(op)
        ours = lambda inputs=inputs, config=config: inputs.run_stuning(config)  # noqa: E731
        dense = inputs.baselines["dense"]
        for fn in (ours, dense):
            fn()
        runs.append((name, ours, dense))
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name, ours, dense in runs:
        torch.cuda.nvtx.range_push(name)
        ours()
        dense()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled, in order:", ", ".join(names))


if __name__ == "__main__":
    main()
