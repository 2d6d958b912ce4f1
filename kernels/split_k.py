"""Workspaces of split-K launches: an fp32 buffer the splits of a launch add into, and one counter
per output tile.

Both are zero between launches: the split that finishes a tile last takes the sum and zeroes the
tile and its counter again. A launch then needs no fill before it and no copy after it, which at
decode widths were two more kernels (two graph nodes) beside one of ~10 us.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl


@dataclass
class _Workspace:
    buffer: torch.Tensor
    counters: torch.Tensor
    captured: bool = False  # handed out during a CUDA graph capture: the graph keeps its addresses


# (device, stream) -> workspaces, the one in use last. A launch on one stream runs after the previous
# one on it, so they may share; another stream gets its own (torch keeps cuBLAS's workspaces the
# same way). A smaller one is freed when a larger one replaces it, unless a captured graph uses it.
_HELD: dict[tuple, list[_Workspace]] = {}


def held_key(device: torch.device, zeroed: bool = True) -> tuple:
    """Which workspaces a launch on ``device`` from the current stream shares (zeroed ones, for
    ``add_split``, or not, for ``store_split``: a launch of one kind must not hand the other dirt)."""
    if device.type != "cuda":
        return device, 0, zeroed
    index = torch.cuda.current_device() if device.index is None else device.index
    # The raw handle, as Triton's own launcher reads it: ``torch.cuda.current_stream`` builds a
    # Stream object, ~7% of a scatter launch's profiled host time (scripts/probe_host_time.py).
    return "cuda", index, torch._C._cuda_getCurrentRawStream(index), zeroed


def split_k_workspace(device: torch.device, elements: int, tiles: int, *,
                      zeroed: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """A zeroed fp32 buffer of at least ``elements`` and int32 counters for at least ``tiles`` tiles
    on ``device``, for launches on the current stream. The launch must leave both zero again.
    ``zeroed=False``: the buffer's contents are whatever the last such launch left (``store_split``
    overwrites what it reads); the counters are still zero."""
    held = _HELD.setdefault(held_key(device, zeroed), [])
    if not held or held[-1].buffer.numel() < elements or held[-1].counters.numel() < tiles:
        old_elements, old_tiles = (held[-1].buffer.numel(), held[-1].counters.numel()) if held else (0, 0)
        held[:] = [w for w in held if w.captured]
        # Powers of two, so that a run of growing problems allocates a few times, not once per size.
        make = torch.zeros if zeroed else torch.empty
        held.append(_Workspace(
            make(triton.next_power_of_2(max(elements, old_elements)), dtype=torch.float32, device=device),
            torch.zeros(triton.next_power_of_2(max(tiles, old_tiles)), dtype=torch.int32, device=device),
        ))
    workspace = held[-1]
    workspace.captured |= device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    return workspace.buffer, workspace.counters


@triton.jit
def add_split(partial_ptrs, acc, ok, count_ptr, SPLIT_K: tl.constexpr):
    """Add one split's fp32 tile into the workspace. Returns whether this split finished the tile
    and, if so, the tile's sum; that split also zeroes the tile and its counter for the next launch.
    (Written for both the Triton and the Gluon 2:4 kernels: it makes no tensor of its own layout.)"""
    tl.atomic_add(partial_ptrs, acc, mask=ok, sem="relaxed")
    # Every thread's adds before the one release below (the pattern of CUTLASS's semaphore).
    tl.debug_barrier()
    last = tl.atomic_add(count_ptr, 1, sem="acq_rel") == SPLIT_K - 1
    if last:
        tl.debug_barrier()
        # L2, not L1: the other splits' adds are not in this SM's L1.
        acc = tl.load(partial_ptrs, mask=ok, other=0.0, cache_modifier=".cg")
        # Every thread's loads before any thread's zeroing: Triton may give the zeros another layout
        # than the load's (the bit trick below folds to a constant), so the thread that zeroes an
        # element need not be the one that read it. Without this barrier the Triton kernel writing
        # Y^T lost whole splits' sums at random (relative errors 3e-2 to 1.3e-1 on the H200, M >= 3072).
        tl.debug_barrier()
        # Zeros in acc's layout where the compiler keeps it (tl.zeros_like needs one named in Gluon).
        tl.store(partial_ptrs, (acc.to(tl.int32, bitcast=True) & 0).to(tl.float32, bitcast=True), mask=ok)
        tl.store(count_ptr, 0)
    return last, acc


@triton.jit
def store_split(partial_ptrs, acc, ok, count_ptr, pid_k, slice_elems, SPLIT_K: tl.constexpr,
                ORDERED: tl.constexpr = False):
    """``add_split`` without atomic adds: each split stores its fp32 tile into a slice of its own
    (``pid_k``, ``slice_elems`` apart), and the split that finishes the tile last adds the other
    slices to its own tile. The buffer need not be zero (a launch reads only what it wrote), so nothing
    is zeroed after; the counter is. Worth it for two splits, where the adds cost ~2 us of a 19 us
    launch (4096 x 4096, N = 128, BENCHMARKS.md 7y); with eight the last split's reads cost more.

    ``ORDERED``: split ``SPLIT_K - 1`` always sums, and never stores its own tile: it waits until the
    others have counted themselves in. Those have lower program ids (the grid's y), and the GPU
    starts programs in the order of their ids, so they run or are done while it waits (the rule
    CUTLASS's stream-K fixup relies on)."""
    if ORDERED:
        last = pid_k == SPLIT_K - 1
        if last:
            while tl.atomic_add(count_ptr, 0, sem="acquire") < SPLIT_K - 1:
                pass
            tl.debug_barrier()
            for s in tl.static_range(SPLIT_K - 1):
                acc += tl.load(partial_ptrs + s * slice_elems, mask=ok, other=0.0, cache_modifier=".cg")
            tl.store(count_ptr, 0)
        else:
            tl.store(partial_ptrs + pid_k * slice_elems, acc, mask=ok)
            tl.debug_barrier()
            tl.atomic_add(count_ptr, 1, sem="release")
        return last, acc
    tl.store(partial_ptrs + pid_k * slice_elems, acc, mask=ok)
    # Every thread's stores before the one release below, as in add_split.
    tl.debug_barrier()
    last = tl.atomic_add(count_ptr, 1, sem="acq_rel") == SPLIT_K - 1
    if last:
        tl.debug_barrier()
        for s in tl.static_range(1, SPLIT_K):
            # The other splits' slices, no branch or mask per slice (either cost registers or time).
            # L2, not L1: the other splits' stores are not in this SM's L1.
            other = (pid_k + s) % SPLIT_K
            acc += tl.load(partial_ptrs + other * slice_elems, mask=ok, other=0.0, cache_modifier=".cg")
        tl.store(count_ptr, 0)
    return last, acc
