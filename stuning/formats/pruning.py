"""Magnitude pruning: how users turn dense weights into the sparse formats."""

from __future__ import annotations

import torch


def magnitude_prune(dense: torch.Tensor, sparsity: float) -> torch.Tensor:
    """A copy of ``dense`` with the ``sparsity`` fraction of entries of smallest magnitude set to 0."""
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
    if not dense.dtype.is_floating_point:
        raise TypeError(f"magnitude_prune expects a floating tensor, got {dense.dtype}")
    if torch.isnan(dense).any():
        raise ValueError("magnitude_prune: the tensor holds NaN, whose magnitude cannot be ranked")
    n_zero = int(round(sparsity * dense.numel()))
    if n_zero == 0:
        return dense.clone()
    flat = dense.reshape(-1)
    drop = torch.topk(flat.abs().float(), n_zero, largest=False).indices
    out = flat.clone()
    out[drop] = 0
    return out.reshape(dense.shape)
