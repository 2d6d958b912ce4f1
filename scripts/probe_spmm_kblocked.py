"""Probe sliced ELL with each slice cut into K blocks: does X's reuse in L1 beat the L2 gather bound?

Every gather SpMM kernel loads a row of X for every nonzero of W, so at wide N (and N = 128 in
fp32) the kernels move nnz x N x elem bytes through L2 and run at its bandwidth (BENCHMARKS.md 7c,
7l). Rows of one slice rarely share a column, but they do share a band of K: if a slice walks its
nonzeros K block by K block (every row padded to the slice's longest count in that block), each
step's gathers fall in BLOCK_K rows of X, BLOCK_K x BLOCK_N elements that stay in L1 while the
slice works through them. From L2 X is then read once a slice: (M / S) x K x N x elem bytes.

The layout is sliced ELL's (column-major slices, ``stuning.formats.sell``), so the shipped
sliced-ELL kernel runs it unchanged; only the order and padding of the entries differ. Padding
entries hold 0 at the block's first column (or the row's last one in the block): an L1 hit.

For each problem (4096 x 4096, ``PROBE_CASES`` as dtype:N:sparsity) it times the library's pick,
the dense product (cuBLAS; fp32 with TF32 off) and sampled (slice rows, step, N tile, warps,
BLOCK_K) configs on the K-blocked layout, plus the same tiles on the plain layout, all checked
against a float64 reference first.

    python3 scripts/probe_spmm_kblocked.py      # $OUT/spmm_kblocked_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_kblocked.py   # tiny, CPU
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import random

import torch
from probe_harness import checked_time_us, probe_time_us, spmm_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
CASES = os.environ.get("PROBE_CASES", "fp32:128:0.8,fp32:2048:0.8,fp32:128:0.9,fp16:2048:0.98,fp16:128:0.95")
M, K = (64, 256) if SMOKE else (4096, 4096)
SAMPLE = 3 if SMOKE else int(os.environ.get("PROBE_CONFIGS", "36"))
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def kblocked_sell(a, s: int, step: int, block_k: int):
    """(values, cols, slice_ptr, row_ids) of CSR matrix ``a`` as slices of ``s`` rows (in order),
    each slice walked K block by K block, every block padded to a multiple of ``step``."""
    m, k = a.shape
    dev = a.values.device
    n_slices, n_blocks = -(-m // s), -(-k // block_k)
    lengths = a.row_lengths().to(torch.int64)
    keep = a.values != 0  # the CSR's own row padding (pad_to) holds zeros: drop it
    row = torch.repeat_interleave(torch.arange(m, device=dev), lengths)[keep]
    col = a.col.to(torch.int64)[keep]
    val = a.values[keep]
    blk = col // block_k
    group = row * n_blocks + blk  # sorted: CSR columns ascend within a row
    counts = torch.bincount(group, minlength=m * n_blocks)
    rank = torch.arange(group.numel(), device=dev) - (torch.cumsum(counts, 0) - counts)[group]
    per_row = torch.zeros(n_slices * s, n_blocks, dtype=torch.int64, device=dev)
    per_row[:m] = counts.view(m, n_blocks)
    blk_len = per_row.view(n_slices, s, n_blocks).amax(1)
    blk_len = (blk_len + step - 1) // step * step
    blk_off = torch.cumsum(blk_len, 1) - blk_len
    slice_len = blk_len.sum(1)
    slice_ptr = torch.zeros(n_slices + 1, dtype=torch.int64, device=dev)
    slice_ptr[1:] = torch.cumsum(slice_len * s, 0)
    total = int(slice_ptr[-1])
    # Padding first: every position of block b reads column b * block_k (value 0).
    block_col = (torch.arange(n_blocks, device=dev) * block_k).expand(n_slices, n_blocks)
    cols = torch.repeat_interleave(block_col.reshape(-1), (blk_len * s).reshape(-1))
    values = torch.zeros(total, dtype=a.values.dtype, device=dev)
    sl = row // s
    pos = slice_ptr[sl] + (blk_off[sl, blk] + rank) * s + row % s
    cols[pos] = col
    values[pos] = val
    row_ids = torch.full((n_slices * s,), -1, dtype=torch.int32, device=dev)
    row_ids[:m] = torch.arange(m, dtype=torch.int32, device=dev)
    return values, cols.to(torch.int16 if k < 2**15 else torch.int32), slice_ptr.to(torch.int32), row_ids


def plain_sell(a, s: int, step: int):
    from stuning.formats.sell import SlicedELLMatrix

    e = SlicedELLMatrix.from_csr(a, s, False, step)
    return e.values, e.cols, e.slice_ptr, e.row_ids


def configs(dtype: torch.dtype, n: int, sample: int, seed: int):
    vec = 4 if dtype == torch.float32 else 8
    grid = []
    for s, step, bn, warps, bk in itertools.product((16, 32, 64, 128), (1, 2, 4), (32, 64, 128), (4, 8),
                                                    (64, 128, 256, 512)):
        if bn > n or s * step * bn > 64 * 32 * warps or s * step < 32:
            continue  # accumulator over 64 registers a thread, or tiles under a warp
        grid.append((s, step, bn, min(vec, bn), warps, bk))
    return random.Random(seed).sample(grid, min(sample, len(grid)))


def main() -> int:
    from stuning.kernels.spmm import SpMMConfig
    from stuning.kernels.spmm_sell import spmm_sell

    import stuning

    device = "cpu" if SMOKE else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    timer = functools.partial(probe_time_us, smoke=SMOKE)
    results = []
    for case in CASES.split(","):
        dname, n, sparsity = case.split(":")
        dtype, n, sparsity = DTYPES[dname], int(n), float(sparsity)
        if SMOKE:
            n = 32
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        p = next(spmm_problems(M, K, [n], [sparsity], device, dtype=dtype))
        row = {"dtype": dname, "n": n, "sparsity": sparsity, "pick": p.pick.as_dict(),
               "dense_us": timer(functools.partial(torch.matmul, p.w, p.x)),
               "pick_us": checked_time_us(functools.partial(stuning.spmm, p.a, p.x, config=p.pick), p.ref, "pick",
                                          tol=tol, smoke=SMOKE),
               "configs": []}
        for s, step, bn, vec, warps, bk in configs(dtype, n, SAMPLE, seed=n):
            cfg = SpMMConfig(rows=s, nnz_step=step, block_n=bn, vec=vec, num_warps=warps, num_stages=1,
                             kernel="sell")
            blocked = kblocked_sell(p.a, s, step, min(bk, K))
            entry = {"s": s, "step": step, "bn": bn, "vec": vec, "warps": warps, "bk": bk,
                     "padding": blocked[0].numel() / max(p.a.nnz, 1)}
            run = functools.partial(spmm_sell, *blocked, p.x, m=M, slice_rows=s, step=step, config=cfg)
            entry["blocked_us"] = checked_time_us(run, p.ref, f"{case} blocked {entry}", tol=tol, smoke=SMOKE)
            plain = plain_sell(p.a, s, step)
            run = functools.partial(spmm_sell, *plain, p.x, m=M, slice_rows=s, step=step, config=cfg)
            entry["plain_us"] = checked_time_us(run, p.ref, f"{case} plain {entry}", tol=tol, smoke=SMOKE)
            row["configs"].append(entry)
            print(json.dumps(entry), flush=True)
        timed = [c for c in row["configs"] if isinstance(c["blocked_us"], float) and c["blocked_us"] == c["blocked_us"]]
        row["best_blocked"] = min(timed, key=lambda c: c["blocked_us"], default=None)
        plain_timed = [c for c in row["configs"] if isinstance(c["plain_us"], float)]
        row["best_plain_us"] = min((c["plain_us"] for c in plain_timed), default=None)
        results.append(row)
        write_results(results, "spmm_kblocked_probe.json")  # after every case: a timeout keeps the rest
    print(f"{'case':>16} {'dense':>8} {'pick':>8} {'plain':>8} {'blocked':>8} {'pad':>5}  best blocked config")
    for r in results:
        b = r["best_blocked"] or {}
        nan = float("nan")
        pick = r["pick_us"] if isinstance(r["pick_us"], float) else nan
        print(f"{r['dtype']}:{r['n']}:{r['sparsity']:>5} {r['dense_us']:>8.1f} {pick:>8.1f} "
              f"{r['best_plain_us'] or nan:>8.1f} {b.get('blocked_us', nan):>8.1f} {b.get('padding', nan):>5.2f}  "
              f"{ {k: b[k] for k in ('s', 'step', 'bn', 'vec', 'warps', 'bk') if k in b} }")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
