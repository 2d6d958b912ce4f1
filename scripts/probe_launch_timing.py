"""How the tuner's timer sees SpMM configs whose launch is slow on the host (BENCHMARKS.md 7s).

For a few configs of 4096 x 4096 fp16 problems at N = 128 (uniform and skewed rows, 90% and 95%
zeros) it prints the host time of one launch, do_bench's time, the flushed-graph time, what
``bench_us`` returns (and how it timed), and the kernel's own time from the profiler; with
``--profile`` it also lists where a scatter launch and a CSR launch spend their host time. Needs a
CUDA GPU (sm_90 for the scatter configs).

    python3 scripts/probe_launch_timing.py [--out diag.json] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats

import torch
import triton.testing
from stuning.kernels.spmm import SpMMConfig

from stuning.suite import SpMMCase
from stuning.tuning.objective import KernelObjective
from stuning.tuning.problems import build_problem
from stuning.tuning.timing import bench_us, flushed_graph_us, host_us

# The skewed 90% entry of 7r's database: the first two timed ~28 us, the other three 216-220 us.
CONFIGS = [
    dict(kernel="scatter", rows=64, nnz_step=128, block_n=128, num_warps=4, num_stages=2, split_k=8),
    dict(kernel="scatter", rows=128, nnz_step=64, block_n=128, num_warps=8, num_stages=4, split_k=4),
    dict(kernel="scatter", rows=64, nnz_step=128, block_n=128, num_warps=4, num_stages=2, split_k=4),
    dict(kernel="scatter", rows=64, nnz_step=128, block_n=128, num_warps=4, num_stages=3, split_k=4),
    dict(kernel="scatter", rows=64, nnz_step=64, block_n=128, num_warps=4, num_stages=2, split_k=4),
]
CSR = dict(kernel="csr", rows=1, nnz_step=32, block_n=32, num_warps=2, num_stages=1)


def kernel_us(fn, calls: int = 5) -> float:
    """Mean device time of the kernels one call launches, from the profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sum(e.device_time_total for e in prof.key_averages()) / calls


def host_profile(problem, config: dict, calls: int = 300) -> str:
    out = problem.output()
    fn = lambda: problem.run(SpMMConfig(**config), out)  # noqa: E731
    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(20)
    return f"{config['kernel']}: host {host_us(fn):.1f} us a launch\n{text.getvalue()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--profile", action="store_true", help="also profile a scatter and a CSR launch's host time")
    args = parser.parse_args()
    rows = []
    for skew in (0.4, 0.0):
        for sparsity in (0.9, 0.95):
            problem = build_problem(SpMMCase(4096, 4096, 128, sparsity, skew, "fp16"), seed=0)
            objective = KernelObjective(problem)
            for d in CONFIGS:
                config = SpMMConfig(**d)
                objective.check(config)
                fn = objective.timed(config)
                eager = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
                with torch.cuda.stream(torch.cuda.Stream()):
                    graph = flushed_graph_us(fn)
                tuner_us, method = bench_us(fn)
                rows.append(dict(skew_cv=skew, sparsity=sparsity, config=d, host_us=host_us(fn), do_bench_us=eager,
                                 graph_us=graph, bench_us=tuner_us, bench_method=method, kernel_us=kernel_us(fn)))
                r = rows[-1]
                print(f"cv {skew} {sparsity:.0%} {d['rows']}x{d['nnz_step']} w{d['num_warps']} s{d['num_stages']} "
                      f"split {d['split_k']}: host {r['host_us']:.1f}  do_bench {eager:.1f}  graph {graph:.1f}  "
                      f"bench_us {tuner_us:.1f} ({method})  kernel {r['kernel_us']:.1f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    if args.profile:
        problem = build_problem(SpMMCase(4096, 4096, 128, 0.9, 0.0, "fp16"), seed=0)
        for config in (CONFIGS[2], CSR):
            print(host_profile(problem, config))


if __name__ == "__main__":
    main()
