"""Compressed sparse row matrices, the input format of SpMM and the mask format of SDDMM."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from stuning.formats.stored import CompilableMatrix

_INT32_MAX = 2**31 - 1
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


@dataclass(frozen=True)
class RowStats:
    """Row-length statistics: what load balance and the tuner's cost model depend on."""

    mean: float
    max: int
    cv: float  # coefficient of variation (std / mean); 0 for perfectly even rows
    empty: int  # rows with no stored entry

    def as_dict(self) -> dict:
        return {"mean": self.mean, "max": self.max, "cv": self.cv, "empty": self.empty}


def _index_dtype(nnz: int) -> torch.dtype:
    # int32 halves index traffic; int64 only when the offsets would overflow it.
    return torch.int32 if nnz <= _INT32_MAX else torch.int64


class CSRMatrix(CompilableMatrix):
    """An M x K sparse matrix in CSR form: ``crow`` (M + 1), ``col`` (nnz), ``values`` (nnz).

    Columns are sorted within each row. A matrix may be *padded*: every row's stored length is a
    multiple of ``pad_to``, the extra entries holding explicit zeros (at the row's last column), so a
    kernel can load ``pad_to`` values at a time from an aligned offset.
    """

    def __init__(
        self,
        crow: torch.Tensor,
        col: torch.Tensor,
        values: torch.Tensor,
        shape: tuple[int, int],
        *,
        pad_to: int = 1,
        validate: bool = True,
    ):
        self.crow = crow
        self.col = col
        self.values = values
        self.shape = (int(shape[0]), int(shape[1]))
        self.pad_to = int(pad_to)
        self._row_order: torch.Tensor | None = None
        self._row_ids: torch.Tensor | None = None
        self._stats: RowStats | None = None
        # Layers above keep what they derive from this matrix here (e.g. the configs chosen for it).
        self.cache: dict = {}
        self._register()
        if validate:
            self.validate()

    # ----------------------------------------------------------------------------------- checks
    def validate(self) -> None:
        """Raise ``ValueError``/``TypeError`` naming the first thing that is not a valid CSR matrix."""
        m, k = self.shape
        if m < 0 or k < 0:
            raise ValueError(f"CSRMatrix: shape must be non-negative, got {self.shape}")
        if self.pad_to < 1 or self.pad_to & (self.pad_to - 1):
            raise ValueError(f"CSRMatrix: pad_to must be a power of two, got {self.pad_to}")
        for name, t in (("crow", self.crow), ("col", self.col), ("values", self.values)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"CSRMatrix: {name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dim() != 1:
                raise ValueError(f"CSRMatrix: {name} must be 1-D, got shape {tuple(t.shape)}")
        for name, t in (("crow", self.crow), ("col", self.col)):
            if t.dtype not in (torch.int32, torch.int64):
                raise TypeError(f"CSRMatrix: {name} must be int32 or int64, got {t.dtype}")
        if self.values.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"CSRMatrix: values must be a floating dtype, got {self.values.dtype}")
        devices = {self.crow.device, self.col.device, self.values.device}
        if len(devices) != 1:
            raise ValueError(f"CSRMatrix: crow, col and values are on different devices: {devices}")
        if self.crow.numel() != m + 1:
            raise ValueError(f"CSRMatrix: crow has {self.crow.numel()} entries, expected M + 1 = {m + 1}")
        nnz = self.col.numel()
        if self.values.numel() != nnz:
            raise ValueError(f"CSRMatrix: {self.values.numel()} values but {nnz} column indices")
        crow = self.crow.to("cpu", torch.int64)
        if int(crow[0]) != 0:
            raise ValueError(f"CSRMatrix: crow[0] must be 0, got {int(crow[0])}")
        if int(crow[-1]) != nnz:
            raise ValueError(f"CSRMatrix: crow[-1] = {int(crow[-1])} but there are {nnz} entries")
        steps = crow[1:] - crow[:-1]
        if (steps < 0).any():
            row = int(torch.nonzero(steps < 0)[0])
            raise ValueError(f"CSRMatrix: row pointers decrease at row {row} (crow is not monotone)")
        if nnz == 0:
            return
        col = self.col.to("cpu", torch.int64)
        bad = (col < 0) | (col >= k)
        if bad.any():
            i = int(torch.nonzero(bad)[0])
            raise ValueError(f"CSRMatrix: column index {int(col[i])} at entry {i} is out of range [0, {k})")
        # Columns must increase within a row (padding repeats the last column with a zero value).
        same_row = torch.ones(nnz, dtype=torch.bool)
        same_row[crow[1:-1][crow[1:-1] < nnz]] = False
        same_row[0] = False
        diff = col[1:] - col[:-1]
        unsorted = same_row[1:] & ((diff < 0) if self.pad_to > 1 else (diff <= 0))
        if unsorted.any():
            i = int(torch.nonzero(unsorted)[0]) + 1
            row = int(torch.searchsorted(crow, torch.tensor([i]), right=True)[0]) - 1
            raise ValueError(
                f"CSRMatrix: column indices of row {row} are not sorted and unique "
                f"(entry {i}: {int(col[i - 1])} then {int(col[i])})"
            )
        if self.pad_to > 1:
            # A repeated column is padding, and padding holds zeros.
            repeats = same_row[1:] & (diff == 0) & (self.values[1:].to("cpu") != 0)
            if repeats.any():
                i = int(torch.nonzero(repeats)[0]) + 1
                raise ValueError(f"CSRMatrix: entry {i} repeats column {int(col[i])} with a nonzero value")
        if self.pad_to > 1 and (crow % self.pad_to != 0).any():
            raise ValueError(f"CSRMatrix: padded to {self.pad_to} but a row pointer is not a multiple of it")

    # ------------------------------------------------------------------------------ construction
    @classmethod
    def from_dense(cls, dense: torch.Tensor, *, pad_to: int = 1) -> CSRMatrix:
        """Keep the nonzeros of a 2-D tensor."""
        if not isinstance(dense, torch.Tensor):
            raise TypeError(f"from_dense expects a torch.Tensor, got {type(dense).__name__}")
        if dense.dim() != 2:
            raise ValueError(f"from_dense expects a 2-D tensor, got shape {tuple(dense.shape)}")
        if dense.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"from_dense expects a floating tensor, got {dense.dtype}")
        mask = dense != 0
        nnz = int(mask.sum())
        idx = _index_dtype(nnz)
        rows, cols = torch.nonzero(mask, as_tuple=True)
        counts = torch.bincount(rows, minlength=dense.shape[0])
        crow = torch.zeros(dense.shape[0] + 1, dtype=torch.int64, device=dense.device)
        crow[1:] = torch.cumsum(counts, 0)
        out = cls(crow.to(idx), cols.to(idx), dense[rows, cols].contiguous(), tuple(dense.shape), validate=False)
        return out.padded(pad_to) if pad_to > 1 else out

    @classmethod
    def from_torch(cls, sparse: torch.Tensor) -> CSRMatrix:
        """From a torch sparse CSR or COO tensor (COO is coalesced first)."""
        if not isinstance(sparse, torch.Tensor):
            raise TypeError(f"from_torch expects a torch.Tensor, got {type(sparse).__name__}")
        if sparse.dim() != 2:
            raise ValueError(f"from_torch expects a 2-D sparse tensor, got {sparse.dim()} dimensions")
        if sparse.layout == torch.sparse_coo:
            sparse = sparse.coalesce().to_sparse_csr()
        if sparse.layout != torch.sparse_csr:
            raise TypeError(f"from_torch expects a sparse CSR or COO tensor, got layout {sparse.layout}")
        nnz = sparse.values().numel()
        idx = _index_dtype(nnz)
        return cls(
            sparse.crow_indices().to(idx),
            sparse.col_indices().to(idx),
            sparse.values().contiguous(),
            tuple(sparse.shape),
        )

    def padded(self, pad_to: int) -> CSRMatrix:
        """A copy whose rows are padded with explicit zeros to a multiple of ``pad_to`` entries."""
        if pad_to < 1 or pad_to & (pad_to - 1):
            raise ValueError(f"pad_to must be a power of two, got {pad_to}")
        if pad_to == 1 or pad_to == self.pad_to:
            return self
        dev = self.values.device
        crow = self.crow.to(torch.int64)
        lengths = crow[1:] - crow[:-1]
        new_lengths = (lengths + pad_to - 1) // pad_to * pad_to
        new_crow = torch.zeros_like(crow)
        new_crow[1:] = torch.cumsum(new_lengths, 0)
        total = int(new_crow[-1])
        idx = _index_dtype(total)
        rows = torch.repeat_interleave(torch.arange(self.shape[0], device=dev), new_lengths)
        offset = torch.arange(total, device=dev) - new_crow[:-1][rows]
        real = offset < lengths[rows]
        # A padding entry repeats its row's last column (in range, still sorted) with a zero value.
        src = (crow[:-1][rows] + torch.minimum(offset, lengths[rows] - 1)).clamp(min=0)
        col = self.col.to(torch.int64)[src] if total else torch.zeros(0, dtype=torch.int64, device=dev)
        zero = torch.zeros((), dtype=self.values.dtype, device=dev)
        values = torch.where(real, self.values[src], zero) if total else self.values[:0]
        return CSRMatrix(new_crow.to(idx), col.to(idx), values, self.shape, pad_to=pad_to, validate=False)

    # ---------------------------------------------------------------------------------- queries
    @property
    def nnz(self) -> int:
        return self.col.numel()

    def nonzeros(self) -> int:
        """The stored entries that are not row padding: ``nnz``, or with rows padded the nonzero values
        counted (once; cached). Padding adds up to ``pad_to - 1`` zeros a row: 2-3% more entries at
        98% zeros, which moved a padded weight's density into another database key than the one its
        unpadded problem was tuned under (BENCHMARKS.md 7s)."""
        if self.pad_to == 1:
            return self.nnz
        if "nonzeros" not in self.cache:
            self.cache["nonzeros"] = int(torch.count_nonzero(self.values))
        return self.cache["nonzeros"]

    @property
    def density(self) -> float:
        """Nonzeros (padding excluded) over m * k."""
        m, k = self.shape
        return self.nonzeros() / (m * k) if m * k else 0.0

    def row_lengths(self) -> torch.Tensor:
        crow = self.crow.to(torch.int64)
        return crow[1:] - crow[:-1]

    def stats(self) -> RowStats:
        """Mean, max and coefficient of variation of the stored row lengths (cached)."""
        if self._stats is None:
            lengths = self.row_lengths().to("cpu", torch.float64)
            if lengths.numel() == 0:
                self._stats = RowStats(0.0, 0, 0.0, 0)
            else:
                mean = float(lengths.mean())
                std = float(lengths.std(unbiased=False))
                self._stats = RowStats(
                    mean=mean,
                    max=int(lengths.max()),
                    cv=std / mean if mean > 0 else 0.0,
                    empty=int((lengths == 0).sum()),
                )
        return self._stats

    def row_order(self) -> torch.Tensor:
        """Row indices sorted by length, longest first (Sputnik's row swizzle), as int32 (cached).

        Programs that take consecutive entries of this order get rows of similar length, and the
        longest rows start first, so the tail of the launch is made of short rows.
        """
        if self._row_order is None:
            lengths = self.row_lengths()
            order = torch.sort(lengths, descending=True, stable=True).indices
            self._row_order = order.to(torch.int32)
        return self._row_order

    def row_ids(self) -> torch.Tensor:
        """The row of every stored entry (COO rows), same index dtype as ``col`` (cached)."""
        if self._row_ids is None:
            rows = torch.arange(self.shape[0], device=self.device)
            self._row_ids = torch.repeat_interleave(rows, self.row_lengths()).to(self.col.dtype)
        return self._row_ids

    def to_dense(self) -> torch.Tensor:
        m, k = self.shape
        out = torch.zeros(m, k, dtype=self.dtype, device=self.device)
        if self.nnz:
            out.index_put_((self.row_ids().to(torch.int64), self.col.to(torch.int64)), self.values, accumulate=True)
        return out

    def to_torch(self) -> torch.Tensor:
        """A torch sparse CSR tensor with the same entries (padding zeros included)."""
        return torch.sparse_csr_tensor(
            self.crow.to(torch.int64), self.col.to(torch.int64), self.values, self.shape
        )

    def to(self, device=None, dtype: torch.dtype | None = None) -> CSRMatrix:
        """Move to a device and/or cast the values; indices keep their dtype."""
        values = self.values.to(device=device, dtype=dtype) if (device or dtype) else self.values
        dev = values.device
        return CSRMatrix(
            self.crow.to(dev), self.col.to(dev), values, self.shape, pad_to=self.pad_to, validate=False
        )

    def nbytes(self) -> int:
        """Bytes of the stored arrays: values, column indices and row pointers."""
        return sum(t.numel() * t.element_size() for t in (self.values, self.col, self.crow))

    def __repr__(self) -> str:
        m, k = self.shape
        pad = f", pad_to={self.pad_to}" if self.pad_to > 1 else ""
        return (
            f"CSRMatrix(shape=({m}, {k}), nnz={self.nnz}, density={self.density:.4f}, "
            f"dtype={self.dtype}, device={self.device}{pad})"
        )

