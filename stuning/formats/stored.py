"""What every sparse format shares: its dtype and device are those of its stored values."""

from __future__ import annotations

import torch


class StoredValues:
    """Mixin for a format that keeps its nonzeros in a ``values`` tensor."""

    values: torch.Tensor

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device
