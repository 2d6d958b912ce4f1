"""What every sparse format shares: its dtype and device are those of its stored values, and the
matrices users pass to the ops carry a handle for ``torch.compile``."""

from __future__ import annotations

import torch

from stuning.formats.handles import Handles

MATRICES = Handles("sparse matrix")


class StoredValues:
    """Mixin for a format that keeps its nonzeros in a ``values`` tensor."""

    values: torch.Tensor

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device


class CompilableMatrix(StoredValues):
    """Mixin for a matrix the ops take: ``_handle`` names it to the ops' compiled operators.

    Registered when built (``_register`` ends ``__init__``) and again when copied or unpickled, so a
    copy never answers to its original's handle. One built while Dynamo traces (SDDMM's result inside
    a compiled function) gets none: registering there would break the graph, and such a matrix is
    new at every call, so an op given it under compile runs eagerly instead.
    """

    _handle: str | None = None

    def _register(self) -> None:
        self._handle = None if torch.compiler.is_compiling() else MATRICES.register(self)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_handle", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._register()
