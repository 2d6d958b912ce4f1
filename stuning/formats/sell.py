"""Sliced ELL (SELL-C-sigma): rows cut into slices of ``slice_rows``, each slice padded to its longest row.

A program of the sliced-ELL SpMM kernel owns one slice. Because every row of a slice has the same
stored length (the slice's longest row, rounded up to a multiple of ``step``), it walks the slice
``step`` nonzeros at a time with no mask along the nonzero axis: the price is the padding, which
sorting the rows by length first (sigma = the whole matrix, ``CSRMatrix.row_order``) keeps small.

Layout of a slice of S rows and padded length L: column-major, entry ``j`` of the slice's row ``r``
at ``slice_ptr[s] + j * S + r``. Every ``step`` chunk of a slice is then one contiguous block of
``S * step`` values (and indices), so the kernel's (S x step) tile loads are fully coalesced however
small S or step are, and vectorized along the S rows (row-major would read S separate runs of
``step`` entries, half a 32-byte sector each for fp16 and step 8). This is the layout of Kreutzer et
al.'s SELL-C-sigma for the same reason.

Where the slices are about equally long (``capacity.fixed_capacity``: uniform sparsity, rows not
sorted), every slice is padded to the longest, ``capacity`` entries: slice s then starts at
``s * capacity``, which the kernel computes rather than loads before its first loads of A.

The last slice is padded to S rows too, so every slice holds ``S * L`` entries and every offset is a
multiple of ``S * step``. Padding holds the value 0 at the row's last stored column (column 0 for
an empty or padding row): an index in range, so the kernel needs no masks, and a column the row
reads already. Column indices are int16 when K <= 32767 (a quarter less traffic than int32 for
fp16 values), else int32. Weights are static, so ``from_csr`` caches the result on the CSR matrix.
"""

from __future__ import annotations

import torch

from stuning.formats.capacity import fixed_capacity
from stuning.formats.csr import CSRMatrix
from stuning.formats.stored import StoredValues

_INT16_MAX = 2**15 - 1
_INT32_MAX = 2**31 - 1


def column_dtype(k: int) -> torch.dtype:
    """The narrowest index type holding columns 0..K-1: int16 up to K = 32767, else int32."""
    return torch.int16 if k <= _INT16_MAX else torch.int32


class SlicedELLMatrix(StoredValues):
    """An M x K sparse matrix in sliced ELL form, built from a ``CSRMatrix`` by ``from_csr``.

    ``values`` and ``cols`` (padded entries, column-major within each slice), ``slice_ptr``
    (n_slices + 1 offsets into them) and ``row_ids`` (n_slices * slice_rows: the output row of each
    slice row, -1 for the padding rows of the last slice); ``capacity``: the entries of every slice
    where all are padded alike, else 0.
    """

    def __init__(self, values: torch.Tensor, cols: torch.Tensor, slice_ptr: torch.Tensor, row_ids: torch.Tensor,
                 shape: tuple[int, int], *, slice_rows: int, step: int, sorted_rows: bool, nnz: int,
                 capacity: int = 0):
        self.values = values
        self.cols = cols
        self.slice_ptr = slice_ptr
        self.row_ids = row_ids
        self.shape = (int(shape[0]), int(shape[1]))
        self.slice_rows = int(slice_rows)
        self.step = int(step)
        self.sorted_rows = bool(sorted_rows)
        self.nnz = int(nnz)  # stored entries of the CSR matrix it came from (padding excluded)
        self.capacity = int(capacity)

    @staticmethod
    def cache_key(slice_rows: int, sort_rows: bool, step: int) -> tuple:
        return ("sell", int(slice_rows), bool(sort_rows), int(step))

    @classmethod
    def from_csr(cls, csr: CSRMatrix, slice_rows: int, sort_rows: bool, step: int) -> SlicedELLMatrix:
        """The sliced ELL form of ``csr`` (cached in ``csr.cache``: built once per parameters).

        ``slice_rows`` (S) and ``step`` are powers of two; ``sort_rows`` slices the rows longest
        first (``csr.row_order()``) instead of in order.
        """
        for name, v in (("slice_rows", slice_rows), ("step", step)):
            if not isinstance(v, int) or v < 1 or v & (v - 1):
                raise ValueError(f"SlicedELLMatrix: {name} must be a power of two, got {v!r}")
        key = cls.cache_key(slice_rows, sort_rows, step)
        hit = csr.cache.get(key)
        if hit is None:
            hit = cls._build(csr, slice_rows, bool(sort_rows), step)
            csr.cache[key] = hit
        return hit

    @classmethod
    def _build(cls, csr: CSRMatrix, s: int, sort_rows: bool, step: int) -> SlicedELLMatrix:
        m, k = csr.shape
        dev = csr.device
        n_slices = -(-m // s)
        slots = n_slices * s
        lengths = csr.row_lengths()
        order = csr.row_order().to(torch.int64) if sort_rows else torch.arange(m, device=dev)
        # Slot p of the slicing holds row order[p]; the last slice's extra slots hold nothing.
        slot_len = torch.zeros(slots, dtype=torch.int64, device=dev)
        slot_len[:m] = lengths[order]
        slice_len = slot_len.view(n_slices, s).amax(dim=1) if slots else slot_len[:0]
        slice_len = (slice_len + step - 1) // step * step
        capacity = fixed_capacity(slice_len * s)
        if capacity:
            slice_len = torch.full_like(slice_len, capacity // s)
        slice_ptr = torch.zeros(n_slices + 1, dtype=torch.int64, device=dev)
        slice_ptr[1:] = torch.cumsum(slice_len * s, 0)
        total = int(slice_ptr[-1]) if n_slices else 0

        # Every stored position: (slice, j, r) -> flat offset slice_ptr[slice] + j * S + r.
        pos_slice = torch.repeat_interleave(torch.arange(n_slices, device=dev), slice_len * s)
        local = torch.arange(total, device=dev) - slice_ptr[:-1][pos_slice]
        j, r = local // s, local % s
        slot = pos_slice * s + r
        row = order[slot.clamp(max=max(m - 1, 0))]
        row_len = torch.where(slot < m, lengths[row], torch.zeros_like(slot))
        # A real entry reads entry j of its row; padding repeats the row's last entry with value 0
        # (column 0 for empty rows and the last slice's padding rows).
        src = csr.crow.to(torch.int64)[row] + torch.minimum(j, row_len - 1)
        has_any = row_len > 0
        src = torch.where(has_any, src, torch.zeros_like(src))
        cols = torch.where(has_any, csr.col.to(torch.int64)[src], torch.zeros_like(src))
        zero = torch.zeros((), dtype=csr.values.dtype, device=dev)
        values = torch.where(j < row_len, csr.values[src], zero)
        row_ids = torch.full((slots,), -1, dtype=torch.int32, device=dev)
        row_ids[:m] = order.to(torch.int32)
        ptr_dtype = torch.int32 if total <= _INT32_MAX else torch.int64
        return cls(values, cols.to(column_dtype(k)), slice_ptr.to(ptr_dtype), row_ids, csr.shape, slice_rows=s,
                   step=step, sorted_rows=sort_rows, nnz=csr.nnz, capacity=capacity)

    # ---------------------------------------------------------------------------------- queries
    @property
    def n_slices(self) -> int:
        return self.slice_ptr.numel() - 1

    @property
    def padded_entries(self) -> int:
        """Stored entries, padding included: what the kernel loads and multiplies."""
        return self.values.numel()

    @property
    def padding_ratio(self) -> float:
        """Stored entries over the CSR matrix's (1.0: no padding)."""
        return self.padded_entries / self.nnz if self.nnz else 1.0

    def slice_lengths(self) -> torch.Tensor:
        """Padded length of every slice (a multiple of ``step``)."""
        ptr = self.slice_ptr.to(torch.int64)
        return (ptr[1:] - ptr[:-1]) // self.slice_rows

    def to_dense(self) -> torch.Tensor:
        m, k = self.shape
        out = torch.zeros(m, k, dtype=self.dtype, device=self.device)
        if not self.padded_entries:
            return out
        s = self.slice_rows
        ptr = self.slice_ptr.to(torch.int64)
        pos_slice = torch.repeat_interleave(torch.arange(self.n_slices, device=self.device), ptr[1:] - ptr[:-1])
        local = torch.arange(self.padded_entries, device=self.device) - ptr[:-1][pos_slice]
        rows = self.row_ids.to(torch.int64)[pos_slice * s + local % s]
        keep = rows >= 0
        # Padding adds zeros to columns the row reads anyway: accumulating it changes nothing.
        out.index_put_((rows[keep], self.cols.to(torch.int64)[keep]), self.values[keep], accumulate=True)
        return out

    def nbytes(self) -> int:
        """Bytes of the stored arrays: padded values and column indices, slice offsets and row ids."""
        return sum(t.numel() * t.element_size() for t in (self.values, self.cols, self.slice_ptr, self.row_ids))

    def __repr__(self) -> str:
        m, k = self.shape
        return (
            f"SlicedELLMatrix(shape=({m}, {k}), slice_rows={self.slice_rows}, step={self.step}, "
            f"sorted_rows={self.sorted_rows}, nnz={self.nnz}, padding={self.padding_ratio:.3f}x, "
            f"capacity={self.capacity}, "
            f"cols={self.cols.dtype}, dtype={self.dtype}, device={self.device})"
        )
