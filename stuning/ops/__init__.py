"""The public operations: validate inputs, choose a config, launch."""

from stuning.ops.sddmm import sddmm
from stuning.ops.semi24 import semi24_mm
from stuning.ops.spmm import spmm

__all__ = ["spmm", "sddmm", "semi24_mm"]
