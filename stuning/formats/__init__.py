"""Sparse formats in plain PyTorch: no Triton here, so they work wherever torch does."""

from stuning.formats.csr import CSRMatrix, RowStats
from stuning.formats.pruning import magnitude_prune
from stuning.formats.sell import SlicedELLMatrix
from stuning.formats.semi24 import Semi24Matrix

__all__ = ["CSRMatrix", "RowStats", "Semi24Matrix", "SlicedELLMatrix", "magnitude_prune"]
