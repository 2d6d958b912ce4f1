"""The public operations: validate inputs, choose a config, launch.

Under ``torch.compile`` an op whose sparse operand was built outside the compiled function is one
custom operator (``stuning.ops.compiled``), and the sparse layers one each (``stuning.nn.compiled``):
Dynamo cannot trace a launch (the tuning database's lookup, caches on the sparse operand, host-built
TMA descriptors). Anything else runs eagerly as a graph break.
"""

from stuning.ops.sddmm import sddmm
from stuning.ops.semi24 import semi24_mm
from stuning.ops.spmm import spmm

__all__ = ["spmm", "sddmm", "semi24_mm"]
