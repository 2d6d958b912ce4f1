"""Workspaces of split-K launches: an fp32 buffer the splits of a launch add into, and one counter
per output tile.

Both are zero between launches: the split that finishes a tile last takes the sum and zeroes the
tile and its counter again. A launch then needs no fill before it and no copy after it, which at
decode widths were two more kernels (two graph nodes) beside one of ~10 us.
"""

from __future__ import annotations

import torch
import triton

# (device, stream) -> workspaces, the largest last. A launch on one stream runs after the previous
# one on it, so they may share; another stream gets its own (torch keys cuBLAS's workspaces the same
# way). Smaller ones are never freed: a captured CUDA graph keeps their addresses.
_HELD: dict[tuple, list[tuple[torch.Tensor, torch.Tensor]]] = {}


def split_k_workspace(device: torch.device, elements: int, tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A zeroed fp32 buffer of at least ``elements`` and int32 counters for at least ``tiles`` tiles
    on ``device``, for launches on the current stream. The launch must leave both zero again."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    held = _HELD.setdefault((device, stream), [])
    if held and held[-1][0].numel() >= elements and held[-1][1].numel() >= tiles:
        return held[-1]
    old_elements, old_tiles = (held[-1][0].numel(), held[-1][1].numel()) if held else (0, 0)
    # Powers of two, so that a run of growing problems allocates a few times, not once per size.
    buffer = torch.zeros(triton.next_power_of_2(max(elements, old_elements)), dtype=torch.float32, device=device)
    counters = torch.zeros(triton.next_power_of_2(max(tiles, old_tiles)), dtype=torch.int32, device=device)
    held.append((buffer, counters))
    return buffer, counters
