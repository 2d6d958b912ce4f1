"""stuning: sparse GPU kernels in Triton with a model-driven autotuner."""

import os as _os

if "TRITON_INTERPRET" not in _os.environ:
    import torch as _torch

    # Without a GPU the kernels can only run through Triton's interpreter, which is read when the
    # kernels are defined: choose it before they are imported. Set TRITON_INTERPRET=0 to opt out.
    if not _torch.cuda.is_available():
        _os.environ["TRITON_INTERPRET"] = "1"

from stuning import nn  # noqa: E402
from stuning.formats import CSRMatrix, RowStats, Semi24Matrix, SlicedELLMatrix, magnitude_prune  # noqa: E402
from stuning.nn import pretune, sparsify  # noqa: E402
from stuning.ops import sddmm, semi24_mm, spmm  # noqa: E402

__version__ = "0.2.0.dev0"
__all__ = ["CSRMatrix", "RowStats", "Semi24Matrix", "SlicedELLMatrix", "magnitude_prune", "spmm", "sddmm", "semi24_mm"]
__all__ += ["__version__"]
__all__ += ["nn", "sparsify", "pretune"]
