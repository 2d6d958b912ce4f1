"""The public operations: validate inputs, choose a config, launch.

Under ``torch.compile`` each op is a graph break (``torch.compiler.disable``): Dynamo cannot trace a
launch (the tuning database's lookup, caches on the sparse operand, host-built TMA descriptors), and
tracing into one failed. The op runs eagerly between the compiled graphs, at ~0.4 us more a call in
eager mode. The sparse layers compile without a break: they call one custom operator each
(``stuning.nn.compiled``).
"""

from stuning.ops.sddmm import sddmm
from stuning.ops.semi24 import semi24_mm
from stuning.ops.spmm import spmm

__all__ = ["spmm", "sddmm", "semi24_mm"]
