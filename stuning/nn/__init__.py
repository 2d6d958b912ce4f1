"""Sparse layers for PyTorch models: ``SparseLinear``, ``SparseConv2d``, ``sparsify`` (dense -> sparse, in
place) and ``pretune`` (tune a model's sparse products into the tuning database ahead of serving)."""

from stuning.nn.conv import SparseConv2d
from stuning.nn.linear import SparseLinear
from stuning.nn.pretune import PretuneReport, pretune
from stuning.nn.sparsify import LayerReport, SparsifyReport, set_dense_fallback, sparsify

__all__ = ["SparseLinear", "SparseConv2d", "sparsify", "pretune", "set_dense_fallback", "SparsifyReport",
           "LayerReport", "PretuneReport"]
