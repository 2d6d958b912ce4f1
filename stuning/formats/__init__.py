"""Sparse formats in plain PyTorch: no Triton here, so they work wherever torch does."""

from stuning.formats.csr import CSRMatrix, RowStats
from stuning.formats.pruning import magnitude_prune
from stuning.formats.scatter import ScatterTiles
from stuning.formats.sell import SlicedELLMatrix
from stuning.formats.semi24 import Semi24Matrix
from stuning.formats.tiles import OutputTiles, nonempty_tile_counts, output_tiles

__all__ = [
    "CSRMatrix", "OutputTiles", "RowStats", "ScatterTiles", "Semi24Matrix", "SlicedELLMatrix", "magnitude_prune",
    "nonempty_tile_counts", "output_tiles",
]
