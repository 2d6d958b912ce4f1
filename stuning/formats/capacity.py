"""One capacity for all the lists of a format: the scatter tiles' entry lists, the sliced-ELL slices.

Where the lists are about equally long (uniform sparsity: the longest at most
``FIXED_CAPACITY_SLACK`` times the mean), a format pads every list to the longest. List i then starts
at ``i * capacity``, which a kernel computes instead of loading it from a pointer array: a program's
first loads of A wait for no other load, one trip to DRAM fewer before its first product (the scatter
kernel gained 0.5-0.7 us at decode widths on the H200, BENCHMARKS.md 8b). Uneven lists (skewed or
blocky matrices) keep their own lengths (capacity 0), where padding would cost memory and traffic.
"""

from __future__ import annotations

import torch

# With uniform rows the longest 64 x 128 scatter tile holds 1.05-1.2x the mean at 70-95% zeros, 1.3x
# at 98%; a slice of 8 rows at 95% of a 4096-wide matrix, about 1.1x.
FIXED_CAPACITY_SLACK = 1.25


def fixed_capacity(lengths: torch.Tensor, *, spare: int = 0) -> int:
    """The one length every list is padded to (``lengths``: each list's, already rounded as the
    format stores them), or 0 where the longest exceeds ``FIXED_CAPACITY_SLACK`` times the mean, or
    where the offsets of ``spare`` lists past the last (a kernel computing bounds ahead, masked off)
    would not fit 31 bits."""
    if lengths.numel() == 0:
        return 0
    longest = int(lengths.max())
    if longest == 0 or longest > FIXED_CAPACITY_SLACK * float(lengths.float().mean()):
        return 0
    return longest if longest * (lengths.numel() + spare) < 2**31 else 0
