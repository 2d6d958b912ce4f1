"""2:4 semi-structured matrices: at most two nonzeros in every group of four along a row."""

from __future__ import annotations

import torch

# One int32 metadata word holds the 2-bit positions of 16 kept values (8 groups, 32 dense columns),
# so the metadata costs K / 8 bytes per row: 1/8 of a byte per dense element.
VALUES_PER_META_WORD = 16
COLS_PER_META_WORD = 2 * VALUES_PER_META_WORD


class Semi24Matrix:
    """An M x K matrix with at most 2 nonzeros in each aligned group of 4 columns of a row.

    Stored as ``values`` (M, K/2), the two kept entries of each group in column order, and ``meta``
    (M, ceil(K/32)) int32, where kept value ``c`` of a row has its position in its group (0..3) in
    bits ``2*(c % 16)`` and up of word ``c // 16``. A group with fewer than two nonzeros keeps zeros.
    If K is not a multiple of 4 and ``pad=True`` was asked for, the stored K is rounded up with zero
    columns (``k_stored``) while ``shape`` keeps the logical K.
    """

    def __init__(self, values: torch.Tensor, meta: torch.Tensor, shape: tuple[int, int]):
        m, k = int(shape[0]), int(shape[1])
        k_stored = (k + 3) // 4 * 4
        if values.shape != (m, k_stored // 2):
            raise ValueError(f"Semi24Matrix: values must be ({m}, {k_stored // 2}), got {tuple(values.shape)}")
        n_words = (k_stored // 2 + VALUES_PER_META_WORD - 1) // VALUES_PER_META_WORD
        if meta.shape != (m, n_words) or meta.dtype != torch.int32:
            raise ValueError(f"Semi24Matrix: meta must be int32 ({m}, {n_words}), got {meta.dtype} {tuple(meta.shape)}")
        if values.device != meta.device:
            raise ValueError(f"Semi24Matrix: values on {values.device} but meta on {meta.device}")
        self.values = values
        self.meta = meta
        self.shape = (m, k)
        self.k_stored = k_stored
        # Layers above keep what they derive from this matrix here (e.g. the configs chosen for it).
        self.cache: dict = {}

    # ------------------------------------------------------------------------------ construction
    @classmethod
    def from_dense(cls, dense: torch.Tensor, *, prune: bool = False, pad: bool = False) -> Semi24Matrix:
        """Compress a matrix that is already 2:4, or, with ``prune=True``, keep the two entries of
        largest magnitude in each group. K must be a multiple of 4 unless ``pad=True``."""
        if not isinstance(dense, torch.Tensor):
            raise TypeError(f"Semi24Matrix.from_dense expects a torch.Tensor, got {type(dense).__name__}")
        if dense.dim() != 2:
            raise ValueError(f"Semi24Matrix.from_dense expects a 2-D tensor, got shape {tuple(dense.shape)}")
        if not dense.dtype.is_floating_point:
            raise TypeError(f"Semi24Matrix.from_dense expects a floating tensor, got {dense.dtype}")
        m, k = dense.shape
        if k % 4:
            if not pad:
                raise ValueError(
                    f"2:4 sparsity needs K (columns) to be a multiple of 4, got K = {k}; "
                    "pass pad=True to pad with zero columns"
                )
            dense = torch.nn.functional.pad(dense, (0, 4 - k % 4))
        groups = dense.reshape(m, dense.shape[1] // 4, 4)
        nonzero = groups != 0
        if prune:
            keep_pos = torch.topk(groups.abs().float(), 2, dim=-1).indices
        else:
            counts = nonzero.sum(-1)
            bad = counts > 2
            if bad.any():
                row, group = (int(v) for v in torch.nonzero(bad)[0])
                raise ValueError(
                    f"matrix is not 2:4 sparse: row {row}, columns {4 * group}..{4 * group + 3} hold "
                    f"{int(counts[row, group])} nonzeros (at most 2 of every 4 allowed); "
                    "pass prune=True to prune by magnitude"
                )
            # Nonzeros first, then the lowest-numbered zero positions, to make exactly two per group.
            rank = (~nonzero).to(torch.int8) * 4 + torch.arange(4, device=dense.device, dtype=torch.int8)
            keep_pos = torch.topk(rank, 2, dim=-1, largest=False).indices
        keep_pos = torch.sort(keep_pos, dim=-1).values
        values = torch.gather(groups, -1, keep_pos).reshape(m, groups.shape[1] * 2).contiguous()
        meta = pack_positions(keep_pos.reshape(m, groups.shape[1] * 2))
        return cls(values, meta, (m, k))

    # ---------------------------------------------------------------------------------- queries
    def positions(self) -> torch.Tensor:
        """The position (0..3) within its group of every kept value, (M, K/2) int64."""
        return unpack_positions(self.meta, self.k_stored // 2)

    def to_dense(self) -> torch.Tensor:
        m, k = self.shape
        pos = self.positions()
        cols = torch.arange(self.k_stored // 2, device=pos.device) // 2 * 4 + pos
        out = torch.zeros(m, self.k_stored, dtype=self.values.dtype, device=self.values.device)
        out.scatter_(1, cols, self.values)
        return out[:, :k]

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device

    def to(self, device=None, dtype: torch.dtype | None = None) -> Semi24Matrix:
        values = self.values.to(device=device, dtype=dtype)
        return Semi24Matrix(values, self.meta.to(values.device), self.shape)

    def nbytes(self) -> int:
        return self.values.numel() * self.values.element_size() + self.meta.numel() * 4

    def __repr__(self) -> str:
        return f"Semi24Matrix(shape={self.shape}, dtype={self.dtype}, device={self.device})"


def pack_positions(pos: torch.Tensor) -> torch.Tensor:
    """Pack (M, C) positions in 0..3 into (M, ceil(C/16)) int32 words, 2 bits each."""
    m, c = pos.shape
    n_words = (c + VALUES_PER_META_WORD - 1) // VALUES_PER_META_WORD
    padded = torch.zeros(m, n_words * VALUES_PER_META_WORD, dtype=torch.int64, device=pos.device)
    padded[:, :c] = pos
    shifts = 2 * torch.arange(VALUES_PER_META_WORD, device=pos.device, dtype=torch.int64)
    words = (padded.reshape(m, n_words, VALUES_PER_META_WORD) << shifts).sum(-1)
    # Wrap into int32's range: the top position sits in the sign bit.
    words = torch.where(words >= 2**31, words - 2**32, words)
    return words.to(torch.int32)


def unpack_positions(meta: torch.Tensor, count: int) -> torch.Tensor:
    m = meta.shape[0]
    shifts = 2 * torch.arange(VALUES_PER_META_WORD, device=meta.device, dtype=torch.int64)
    words = meta.to(torch.int64) & 0xFFFFFFFF
    pos = (words.unsqueeze(-1) >> shifts) & 3
    return pos.reshape(m, meta.shape[1] * VALUES_PER_META_WORD)[:, :count]
