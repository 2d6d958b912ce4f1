"""Sparse layers for PyTorch models: ``SparseLinear``, ``sparsify`` (dense -> sparse, in place) and
``pretune`` (tune a model's sparse products into the tuning database ahead of serving)."""

from stuning.nn.linear import SparseLinear
from stuning.nn.pretune import PretuneReport, pretune
from stuning.nn.sparsify import LayerReport, SparsifyReport, sparsify

__all__ = ["SparseLinear", "sparsify", "pretune", "SparsifyReport", "LayerReport", "PretuneReport"]
