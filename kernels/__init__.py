"""Triton kernels of stuning (installed as ``stuning.kernels``).

One module per kernel family: the ``@triton.jit`` kernel, its launcher, its config dataclass, the
config space valid for a problem and a default heuristic. Nothing here imports the tuner, the
database or the CLI; sparse formats arrive as plain tensors.
"""
