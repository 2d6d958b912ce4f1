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

Sorted slices still differ as much as the rows do: with skewed rows (lognormal lengths, cv 0.4) the
longest row holds about 3x the mean, and with every program of a launch in flight at once the
program holding it sets the launch's time. So a sorted slicing cuts rows longer than a fair share,
``share = max(CUT_SLACK x mean row, longest row / S)`` rounded up to whole steps, into up to S
pieces of about equal length (``_slots``; ``cuts_rows`` says which slicings cut). A row's pieces
sit in consecutive slots of one slice, each slot naming the row in ``row_ids``; the kernel sums
the slots of a row before storing it once (an S x S x BLOCK_N sum, so only for slices of up to
``CUT_MAX_SLICE_ROWS`` rows). Uniform rows are not cut: the share then covers the longest row.

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

import math

import torch

from stuning.formats.capacity import fixed_capacity
from stuning.formats.csr import CSRMatrix
from stuning.formats.stored import StoredValues

_INT16_MAX = 2**15 - 1
_INT32_MAX = 2**31 - 1
# The kernel sums a slice's pieces of one row as an (S x S x BLOCK_N) product of its partial rows:
# 8 x 8 x 128 fp32 values at most, 128 a thread on two warps.
CUT_MAX_SLICE_ROWS = 8
# Rows up to this many times the mean stay whole: random (binomial) rows spread a few percent about
# the mean, and cutting them would buy that little for a slot and a sum each.
CUT_SLACK = 1.25


def column_dtype(k: int) -> torch.dtype:
    """The narrowest index type holding columns 0..K-1: int16 up to K = 32767, else int32."""
    return torch.int16 if k <= _INT16_MAX else torch.int32


class SlicedELLMatrix(StoredValues):
    """An M x K sparse matrix in sliced ELL form, built from a ``CSRMatrix`` by ``from_csr``.

    ``values`` and ``cols`` (padded entries, column-major within each slice), ``slice_ptr``
    (n_slices + 1 offsets into them) and ``row_ids`` (n_slices * slice_rows: the output row of each
    slot, -1 for padding slots); ``capacity``: the entries of every slice where all are padded alike,
    else 0; ``cut``: whether some row was cut into pieces (consecutive slots of a slice with the
    same row id, which the kernel sums).
    """

    def __init__(self, values: torch.Tensor, cols: torch.Tensor, slice_ptr: torch.Tensor, row_ids: torch.Tensor,
                 shape: tuple[int, int], *, slice_rows: int, step: int, sorted_rows: bool, nnz: int,
                 capacity: int = 0, cut: bool = False):
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
        self.cut = bool(cut)

    @staticmethod
    def cuts_rows(slice_rows: int, sort_rows: bool) -> bool:
        """Whether a slicing cuts rows longer than their share: sorted slices of up to
        ``CUT_MAX_SLICE_ROWS`` rows (unsorted slices mix lengths anyway)."""
        return bool(sort_rows) and 1 < int(slice_rows) <= CUT_MAX_SLICE_ROWS

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
        lengths = csr.row_lengths().to(torch.int64)
        order = csr.row_order().to(torch.int64) if sort_rows else torch.arange(m, device=dev)
        slot_row, slot_start, slot_len = _slots(lengths, order, s, step, cls.cuts_rows(s, sort_rows))
        slots = slot_row.numel()
        n_slices = slots // s
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
        row = slot_row[slot].clamp(min=0)
        piece_len = slot_len[slot]
        # A real entry reads entry j of its piece; padding repeats the piece's last entry with value 0
        # (column 0 for empty rows and padding slots).
        src = csr.crow.to(torch.int64)[row] + slot_start[slot] + torch.minimum(j, piece_len - 1)
        has_any = piece_len > 0
        src = torch.where(has_any, src, torch.zeros_like(src))
        cols = torch.where(has_any, csr.col.to(torch.int64)[src], torch.zeros_like(src))
        zero = torch.zeros((), dtype=csr.values.dtype, device=dev)
        values = torch.where(j < piece_len, csr.values[src], zero)
        row_ids = slot_row.to(torch.int32)
        ptr_dtype = torch.int32 if total <= _INT32_MAX else torch.int64
        return cls(values, cols.to(column_dtype(k)), slice_ptr.to(ptr_dtype), row_ids, csr.shape, slice_rows=s,
                   step=step, sorted_rows=sort_rows, nnz=csr.nnz, capacity=capacity,
                   cut=bool(((slot_row[1:] == slot_row[:-1]) & (slot_row[1:] >= 0)).any()))

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


def cut_share(mean_row: float, longest_row: int, slice_rows: int, step: int) -> int:
    """The longest a cut slicing lets a slot be: rows longer than this are cut into pieces of about
    equal length (CUT_SLACK x the mean row, or the longest row over the slice's rows, whole steps)."""
    share = math.ceil(max(CUT_SLACK * mean_row, longest_row / slice_rows))
    return -(-share // step) * step


def _slots(lengths: torch.Tensor, order: torch.Tensor, s: int, step: int, cut: bool
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The slots of a slicing (a multiple of ``s``): each slot's row (-1: padding), the offset of its
    first entry in the row and its length. Rows are taken in ``order``; with ``cut``, rows longer
    than the share are cut into pieces of about equal length, the pieces of a row in consecutive
    slots of one slice (padding slots end a slice where the next row's pieces would not fit)."""
    m = order.numel()
    dev = order.device
    ordered = lengths[order] if m else lengths[:0]
    pieces = torch.ones_like(ordered)
    if cut and m and int(ordered.max()) > 0:
        share = cut_share(float(ordered.float().mean()), int(ordered.max()), s, step)
        pieces = (ordered + share - 1).div(share, rounding_mode="floor").clamp(min=1)
    if not m or int(pieces.max()) == 1:
        slots = -(-m // s) * s
        slot_row = torch.full((slots,), -1, dtype=torch.int64, device=dev)
        slot_len = torch.zeros(slots, dtype=torch.int64, device=dev)
        slot_row[:m], slot_len[:m] = order, ordered
        return slot_row, torch.zeros_like(slot_len), slot_len
    # Sorted longest first, so the cut rows lead; only they may need padding before them.
    n_cut = int((pieces > 1).sum())
    first = []
    at = 0
    for p in pieces[:n_cut].tolist():
        if at % s + p > s:
            at += s - at % s
        first.append(at)
        at += p
    starts = torch.tensor(first, dtype=torch.int64, device=dev)
    starts = torch.cat([starts, at + torch.arange(m - n_cut, dtype=torch.int64, device=dev)])
    slots = -(-(at + m - n_cut) // s) * s
    # Piece q of a row of L entries cut in p: entries floor(q L / p) .. floor((q + 1) L / p).
    row_of_piece = torch.repeat_interleave(torch.arange(m, device=dev), pieces)
    q = torch.arange(row_of_piece.numel(), device=dev) - torch.repeat_interleave(torch.cumsum(pieces, 0) - pieces,
                                                                                 pieces)
    p, length = pieces[row_of_piece], ordered[row_of_piece]
    begin = q * length // p
    end = (q + 1) * length // p
    where = starts[row_of_piece] + q
    slot_row = torch.full((slots,), -1, dtype=torch.int64, device=dev)
    slot_start = torch.zeros(slots, dtype=torch.int64, device=dev)
    slot_len = torch.zeros(slots, dtype=torch.int64, device=dev)
    slot_row[where], slot_start[where], slot_len[where] = order[row_of_piece], begin, end - begin
    return slot_row, slot_start, slot_len
