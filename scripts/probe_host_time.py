"""Where a call's host time goes: each user path at decode widths, against the dense layer's.

A Hopper kernel's launch cost ~80-115 us of host time a call (BENCHMARKS.md 7s, 7x) against 10-40 us
of GPU time, so a model run eagerly (no CUDA graph) at decode widths waits on the host. This times
the host side of one call (median of ``CALLS``, the GPU kept busy so that no call waits on it) for:
``stuning.spmm`` with a scatter and a CSR config, ``SparseLinear`` (CSR and 2:4) at 16 tokens,
``stuning.semi24_mm`` with the warpgroup kernel, ``stuning.sddmm`` with each of its kernels on an
attention mask (L = 1024, K = 64, 95% zeros), and ``F.linear`` / ``torch.mm`` for reference; then
profiles each (cProfile, the top functions by own time) into ``$OUT/host-profile.txt``. 4096 x 4096
fp16 at 90% zeros (2:4 for the 2:4 paths), N = 128. Needs an sm_90 GPU for the Hopper kernels.

    python3 scripts/probe_host_time.py            # a table last; $OUT/host_time.json
    PROBE_PATHS=sddmm python3 scripts/probe_host_time.py   # only the paths whose name holds "sddmm"
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import statistics
import time

import torch
import torch.nn.functional as F
from stuning.kernels.sddmm import SDDMMConfig
from stuning.kernels.semi24 import Semi24Config
from stuning.kernels.spmm import SpMMConfig

import stuning
from stuning.formats import CSRMatrix, Semi24Matrix, magnitude_prune
from stuning.matrices import random_sparse

CALLS = int(os.environ.get("PROBE_CALLS", "300"))
OUT = os.environ.get("OUT", ".")


def host_us(fn, calls: int = CALLS) -> float:
    """Median host time of one call. A long kernel queued first keeps the GPU busy, so no call
    waits for the launch queue to drain and each sample is the host's work alone."""
    for _ in range(3):
        fn()
    sync()
    samples = []
    for chunk in range(0, calls, 50):
        if torch.cuda.is_available():
            torch.cuda._sleep(int(2e8))  # ~0.1 s of GPU time ahead of the calls
        for _ in range(min(50, calls - chunk)):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        sync()
    return statistics.median(samples) * 1e6


def idle_host_us(fn, calls: int = CALLS) -> float:
    """The same with the GPU idle at each call (synchronized after it, outside the timing)."""
    samples = []
    for _ in range(calls):
        sync()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    sync()
    return statistics.median(samples) * 1e6


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def profile(fn, calls: int = CALLS) -> str:
    fn()
    sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    sync()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(25)
    return text.getvalue()


def paths() -> dict:
    torch.manual_seed(0)
    # PROBE_SIZE and a CPU run under TRITON_INTERPRET=1 (PROBE_CALLS=1) check the script offline.
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dt, n = torch.float16, 128
    m = k = int(os.environ.get("PROBE_SIZE", "4096"))
    w = magnitude_prune(torch.randn(m, k, device=dev, dtype=dt), 0.9)
    a = CSRMatrix.from_dense(w, pad_to=4)
    x = torch.randn(k, n, device=dev, dtype=dt)
    y = torch.empty(m, n, device=dev, dtype=dt)
    w24 = Semi24Matrix.from_dense(torch.randn(m, k, device=dev, dtype=dt), prune=True)
    scatter = SpMMConfig(64, 128, 128, 1, False, 4, 3, "scatter", split_k=2)
    csr = SpMMConfig(1, 32, 32, 4, False, 2, 1, "csr")
    wgmma = Semi24Config(block_m=64, block_n=128, block_k=128, split_k=4, num_warps=4, num_stages=3,
                         kernel="wgmma_sp")
    tokens = torch.randn(16, k, device=dev, dtype=dt)
    lin = torch.nn.Linear(k, m, device=dev, dtype=dt)
    sparse_lin = stuning.nn.SparseLinear.from_linear(lin, sparsity=0.9, pad_to=4)
    semi_lin = stuning.nn.SparseLinear.from_linear(lin, "2:4", sparsity=0.5)
    seq, head = int(os.environ.get("PROBE_SEQ", "1024")), 64
    mask = CSRMatrix.from_dense(random_sparse(seq, seq, 0.95, dtype=dt, device=dev))
    q = torch.randn(seq, head, device=dev, dtype=dt)
    kt = torch.randn(head, seq, device=dev, dtype=dt)
    gather = SDDMMConfig(nnz_block=32, block_k=64, vec=8, num_warps=8, num_stages=1)
    tiled = SDDMMConfig(kernel="tiled", block_m=32, block_n=128, block_k=64, chunk=256, num_warps=8)
    dense_rows = SDDMMConfig(kernel="dense", nnz_block=1024, block_m=16, num_warps=4)
    return {
        "spmm scatter N=128": lambda: stuning.spmm(a, x, config=scatter, out=y),
        "spmm csr N=128": lambda: stuning.spmm(a, x, config=csr, out=y),
        "spmm auto N=128": lambda: stuning.spmm(a, x, out=y),
        "semi24_mm wgmma_sp N=128": lambda: stuning.semi24_mm(w24, x, config=wgmma, out=y),
        "SparseLinear csr, 16 tokens": lambda: sparse_lin(tokens),
        "SparseLinear 2:4, 16 tokens": lambda: semi_lin(tokens),
        "dense F.linear, 16 tokens": lambda: F.linear(tokens, lin.weight, lin.bias),
        "dense W @ X, N=128": lambda: torch.mm(w, x, out=y),
        "sddmm gather L=1024": lambda: stuning.sddmm(mask, q, kt, config=gather),
        "sddmm tiled L=1024": lambda: stuning.sddmm(mask, q, kt, config=tiled),
        "sddmm dense rows L=1024": lambda: stuning.sddmm(mask, q, kt, config=dense_rows),
        "sddmm auto L=1024": lambda: stuning.sddmm(mask, q, kt),
        "dense Q @ K^T, L=1024": lambda: torch.mm(q, kt),
    }


def main() -> None:
    rows, text = [], []
    only = os.environ.get("PROBE_PATHS", "")
    for name, fn in paths().items():
        if only and not any(part in name for part in only.split(",")):
            continue
        us = host_us(fn)
        rows.append({"path": name, "host_us": us, "idle_host_us": idle_host_us(fn)})
        text.append(f"==== {name}: {us:.1f} us a call\n{profile(fn)}")
        print(f"{name}: {us:.1f} us", flush=True)
    with open(os.path.join(OUT, "host-profile.txt"), "w") as f:
        f.write("\n".join(text))
    with open(os.path.join(OUT, "host_time.json"), "w") as f:
        device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
        json.dump({"torch": torch.__version__, "device": device, "rows": rows}, f, indent=1)
    print(f"\n{'path':34} host us (GPU busy, idle)")
    for r in rows:
        print(f"{r['path']:34} {r['host_us']:7.1f} {r['idle_host_us']:7.1f}")


if __name__ == "__main__":
    main()
