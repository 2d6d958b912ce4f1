"""The split-K epilogues of ``kernels/split_k.py`` on their own: ``add_split`` (atomic adds into a
zeroed buffer) and ``store_split`` (a slice per split, the last one sums; or, ordered, always the
last split), run by a small kernel whose programs each hold one split's tile of random values.
Under the interpreter programs run one at a time, so which split finishes a tile last is set by the
order the kernel maps program ids to splits (an ordered last split must run last, as the GPU starts
programs in order)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from stuning.kernels.split_k import add_split, split_k_workspace, store_split


@triton.jit
def _finish_splits_kernel(x_ptr, y_ptr, partial_ptr, count_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr,
                          SPLIT_K: tl.constexpr, SLICES: tl.constexpr, LAST_FIRST: tl.constexpr,
                          ORDERED: tl.constexpr):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    if LAST_FIRST:  # split SPLIT_K - 1 runs first, split 0 finishes the tile
        pid_k = SPLIT_K - 1 - pid_k
    tiles_n = tl.cdiv(N, BN)
    offs_m = (pid // tiles_n) * BM + tl.arange(0, BM)
    offs_n = (pid % tiles_n) * BN + tl.arange(0, BN)
    ok = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    at = offs_m[:, None] * N + offs_n[None, :]
    acc = tl.load(x_ptr + pid_k * M * N + at, mask=ok, other=0.0)
    if SLICES:
        last, acc = store_split(partial_ptr + at, acc, ok, count_ptr + pid, pid_k, M * N, SPLIT_K, ORDERED)
    else:
        last, acc = add_split(partial_ptr + at, acc, ok, count_ptr + pid, SPLIT_K)
    if last:
        tl.store(y_ptr + at, acc, mask=ok)


@pytest.mark.parametrize("slices,ordered", [(True, False), (True, True), (False, False)],
                         ids=["slices", "ordered-slices", "atomics"])
@pytest.mark.parametrize("split_k", [2, 3])
@pytest.mark.parametrize("last_first", [False, True], ids=["last-split-last", "first-split-last"])
def test_split_k_epilogue_sums_every_split_and_leaves_its_workspace_reusable(device, device_gen, slices, ordered,
                                                                            split_k, last_first):
    if ordered and last_first:
        pytest.skip("an ordered last split must start after the others (the interpreter would never finish)")
    m, n, bm, bn = 5, 11, 4, 8  # ragged tiles on both axes
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    partial, counts = split_k_workspace(torch.device(device), split_k * m * n, tiles, zeroed=not slices)
    if slices:
        partial.fill_(float("nan"))  # never zeroed: a launch must read only what it wrote
    for _ in range(2):  # the second launch finds the workspace as the first left it
        x = torch.randn(split_k, m, n, generator=device_gen, device=device)
        y = torch.full((m, n), float("nan"), device=device)
        _finish_splits_kernel[(tiles, split_k)](x, y, partial, counts, m, n, BM=bm, BN=bn, SPLIT_K=split_k,
                                               SLICES=slices, LAST_FIRST=last_first,
                                               ORDERED=ordered)
        torch.testing.assert_close(y.double(), x.double().sum(0), rtol=1e-6, atol=1e-6)
        assert not counts.any(), "the counters were not reset"
        if not slices:
            assert not partial.any(), "add_split left its buffer dirty"
