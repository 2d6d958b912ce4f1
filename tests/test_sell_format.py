"""SlicedELLMatrix: the sliced-ELL form of a CSR matrix (plain PyTorch, no kernels)."""

from __future__ import annotations

import pytest
import torch
from naive import random_sparse, skewed_sparse, sparse_from_lengths

from stuning import CSRMatrix, SlicedELLMatrix
from stuning.formats.sell import CUT_MAX_SLICE_ROWS, CUT_SLACK, column_dtype


def sell(dense, slice_rows=4, sort_rows=True, step=4, pad_to=1):
    return SlicedELLMatrix.from_csr(CSRMatrix.from_dense(dense, pad_to=pad_to), slice_rows, sort_rows, step)


def entries(s: SlicedELLMatrix):
    """Every stored entry as (slot of its slice, position j, value, column), read through the layout."""
    out = []
    ptr = s.slice_ptr.tolist()
    for sl in range(s.n_slices):
        length = (ptr[sl + 1] - ptr[sl]) // s.slice_rows
        for j in range(length):
            for r in range(s.slice_rows):
                at = ptr[sl] + j * s.slice_rows + r  # column-major inside the slice
                out.append((sl * s.slice_rows + r, j, float(s.values[at]), int(s.cols[at])))
    return out


@pytest.mark.parametrize("step", [1, 4, 8])
@pytest.mark.parametrize("sort_rows", [False, True], ids=["inorder", "sorted"])
@pytest.mark.parametrize("slice_rows", [1, 4, 8])
def test_round_trip_ragged_last_slice_and_empty_rows(gen, slice_rows, sort_rows, step):
    dense = skewed_sparse(37, 45, 6, torch.float32, gen, cv=0.6, empty_rows=5)  # 37 rows: a ragged last slice
    s = sell(dense, slice_rows, sort_rows, step)
    assert torch.equal(s.to_dense(), dense)
    assert s.nnz == int((dense != 0).sum()) and s.shape == (37, 45)
    assert s.row_ids.numel() == s.n_slices * slice_rows
    assert sorted(set(s.row_ids.tolist()) - {-1}) == list(range(37))  # every row has a slot
    if not s.cut:
        assert s.n_slices == -(-37 // slice_rows)
    assert s.cut == (sort_rows and slice_rows > 1 and slice_rows <= CUT_MAX_SLICE_ROWS)  # cv 0.6: rows to cut


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_padding_is_zeros_at_columns_the_row_reads(gen, dtype):
    lengths = torch.tensor([3, 0, 9, 1, 5, 5, 2, 0, 7, 4, 6])
    dense = sparse_from_lengths(lengths, 20, dtype, gen)
    s = sell(dense, slice_rows=4, sort_rows=False, step=4)
    assert s.dtype == dtype
    # Each slice is padded to its longest row, rounded up to whole steps: 9 -> 12, 7 -> 8, 7 -> 8.
    assert s.slice_lengths().tolist() == [12, 8, 8]
    assert s.padded_entries == 4 * (12 + 8 + 8) and s.padding_ratio == pytest.approx(112 / int(lengths.sum()))
    assert all(int(p) % (4 * 4) == 0 for p in s.slice_ptr)  # every slice starts on a whole (S x step) block
    rows = s.row_ids.tolist()
    for slot, j, value, col in entries(s):
        row = rows[slot]
        length = int(lengths[row]) if row >= 0 else 0
        if j < length:
            assert dense[row, col] == value != 0
        else:
            assert value == 0
            last = int(torch.nonzero(dense[row])[-1]) if length else 0
            assert col == last  # in range, and the row's own last column (0 for empty rows)


def test_slices_take_one_capacity_only_where_they_are_even(gen):
    # Rows of 9 to 12 entries: every slice of 4 rows has a row of 12, the last (3 rows and padding) too.
    lengths = torch.tensor([9, 12, 10, 11, 12, 9, 10, 9, 11, 10, 12])
    even = sparse_from_lengths(lengths, 40, torch.float32, gen)
    s = sell(even, slice_rows=4, sort_rows=False, step=4)
    assert s.capacity == 4 * 12  # the longest slice's 12 entries a row (the last slice's too)
    assert s.slice_lengths().tolist() == [12, 12, 12]
    assert s.slice_ptr.tolist() == [0, 48, 96, 144]  # slice s starts at s * capacity
    assert torch.equal(s.to_dense(), even) and s.nnz == int(lengths.sum())
    # The padding test's rows: slices of 48, 32, 32 entries, and 48 > 1.25 x their mean of 37.3.
    uneven = sparse_from_lengths(torch.tensor([3, 0, 9, 1, 5, 5, 2, 0, 7, 4, 6]), 20, torch.float32, gen)
    assert sell(uneven, slice_rows=4, sort_rows=False, step=4).capacity == 0
    assert sell(torch.zeros(8, 8), slice_rows=4, sort_rows=False, step=4).capacity == 0


def test_sorting_is_the_csr_row_order(gen):
    dense = skewed_sparse(37, 40, 8, torch.float16, gen, cv=0.8, empty_rows=4)
    a = CSRMatrix.from_dense(dense)
    s = SlicedELLMatrix.from_csr(a, 16, True, 8)  # slices of 16 rows: sorted, not cut
    assert s.sorted_rows and not s.cut
    assert s.row_ids[:37].tolist() == a.row_order().tolist()
    assert s.row_ids[37:].tolist() == [-1] * 11  # the last slice's padding slots
    lengths = s.slice_lengths().tolist()
    assert lengths == sorted(lengths, reverse=True) and lengths[-1] == 0  # empty rows sort last
    unsorted = SlicedELLMatrix.from_csr(a, 16, False, 8)
    assert unsorted.row_ids[:37].tolist() == list(range(37))
    assert s.padded_entries <= unsorted.padded_entries  # what sorting is for
    cut = SlicedELLMatrix.from_csr(a, 8, True, 8)
    assert cut.cut
    firsts = list(dict.fromkeys(r for r in cut.row_ids.tolist() if r >= 0))
    assert firsts == a.row_order().tolist()  # the pieces keep the sorted order


def pieces(s: SlicedELLMatrix) -> dict[int, list[tuple[int, int]]]:
    """Every row's slots as (slice, slot in the slice), in slot order."""
    out: dict[int, list[tuple[int, int]]] = {}
    for slot, row in enumerate(s.row_ids.tolist()):
        if row >= 0:
            out.setdefault(row, []).append(divmod(slot, s.slice_rows))
    return out


def test_long_rows_cut_into_pieces_of_one_slice():
    # Rows of 45, 30, 26, 8, 6, 5, 4, 0 entries, slices of 4, steps of 4: 1.25 x the mean is 19.4 and
    # the longest / 4 is 11.25, so the share is 20. 45 -> 3 pieces of 15, 30 -> 2 of 15, 26 -> 2 of 13.
    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([8, 45, 6, 30, 0, 26, 5, 4])
    dense = sparse_from_lengths(lengths, 64, torch.float32, gen)
    s = sell(dense, slice_rows=4, sort_rows=True, step=4)
    assert s.cut and torch.equal(s.to_dense(), dense)
    # Slice 0: row 1's three pieces and a padding slot (row 3's two would not fit); slice 1: the
    # pieces of rows 3 and 5; then the whole rows, longest first.
    assert s.row_ids.tolist() == [1, 1, 1, -1, 3, 3, 5, 5, 0, 2, 6, 7, 4, -1, -1, -1]
    assert s.slice_lengths().tolist() == [16, 16, 8, 0] and s.capacity == 0
    for slots in pieces(s).values():
        assert len({sl for sl, _ in slots}) == 1  # one slice
        assert [r for _, r in slots] == list(range(slots[0][1], slots[0][1] + len(slots)))  # consecutive


@pytest.mark.parametrize("slice_rows", [2, 4, 8])
def test_cut_pieces_stay_within_the_share(gen, slice_rows):
    dense = skewed_sparse(200, 300, 30, torch.float32, gen, cv=0.8, empty_rows=7)
    a = CSRMatrix.from_dense(dense)
    lengths = a.row_lengths().float()
    share = max(CUT_SLACK * float(lengths.mean()), float(lengths.max()) / slice_rows)
    s = SlicedELLMatrix.from_csr(a, slice_rows, True, 8)
    assert s.cut and torch.equal(s.to_dense(), dense)
    assert int(s.slice_lengths().max()) <= -(-int(share + 0.5) // 8) * 8 + 8
    assert int(s.slice_lengths().max()) < int(lengths.max())  # what cutting is for
    for slots in pieces(s).values():
        assert len({sl for sl, _ in slots}) == 1 and len(slots) <= slice_rows


def test_uniform_unsorted_and_tall_slices_are_not_cut(gen):
    even = sparse_from_lengths(torch.randint(14, 19, (64,), generator=gen), 80, torch.float32, gen)
    assert not sell(even, slice_rows=4, sort_rows=True, step=8).cut  # within CUT_SLACK of the mean
    skewed = skewed_sparse(64, 80, 12, torch.float32, gen, cv=0.8)
    assert sell(skewed, slice_rows=4, sort_rows=True, step=8).cut
    assert not sell(skewed, slice_rows=4, sort_rows=False, step=8).cut
    assert not sell(skewed, slice_rows=16, sort_rows=True, step=8).cut  # past CUT_MAX_SLICE_ROWS
    assert not sell(skewed, slice_rows=1, sort_rows=True, step=8).cut


def test_column_index_width():
    assert column_dtype(1) == column_dtype(32767) == torch.int16
    assert column_dtype(32768) == column_dtype(2**20) == torch.int32
    for k, expected in ((32767, torch.int16), (32768, torch.int32)):
        dense = torch.zeros(3, k)
        dense[0, k - 1] = 1.5
        dense[2, [0, k // 2, k - 1]] = torch.tensor([2.0, -1.0, 4.0])
        s = sell(dense, slice_rows=2, step=2)
        assert s.cols.dtype == expected
        assert int(s.cols.max()) == k - 1  # no wrap-around at the type's edge
        assert torch.equal(s.to_dense(), dense)


@pytest.mark.parametrize("shape", [(9, 11), (0, 5), (5, 0)])
def test_all_zero_and_empty(shape):
    s = sell(torch.zeros(shape), slice_rows=4, step=8)
    assert s.padded_entries == 0 and s.padding_ratio == 1.0
    assert s.slice_ptr.tolist() == [0] * (s.n_slices + 1)
    assert sorted(r for r in s.row_ids.tolist() if r >= 0) == list(range(shape[0]))  # every row is written
    assert torch.equal(s.to_dense(), torch.zeros(shape))


def test_from_padded_csr(gen):
    dense = skewed_sparse(21, 30, 5, torch.float32, gen, empty_rows=2)
    s = sell(dense, slice_rows=4, step=8, pad_to=4)  # the CSR's explicit zeros are entries like any other
    assert torch.equal(s.to_dense(), dense)


def test_cached_on_the_csr_matrix(gen):
    a = CSRMatrix.from_dense(random_sparse(16, 16, 0.3, torch.float32, gen))
    s = SlicedELLMatrix.from_csr(a, 4, True, 8)
    assert SlicedELLMatrix.from_csr(a, 4, True, 8) is s
    assert a.cache[SlicedELLMatrix.cache_key(4, True, 8)] is s
    others = {SlicedELLMatrix.from_csr(a, *p) for p in ((8, True, 8), (4, False, 8), (4, True, 16))}
    assert s not in others and len(others) == 3


def test_nbytes_counts_narrow_indices(gen):
    dense = random_sparse(64, 100, 0.2, torch.float16, gen)
    a = CSRMatrix.from_dense(dense)
    s = SlicedELLMatrix.from_csr(a, 8, True, 8)
    assert s.nbytes() == s.padded_entries * (2 + 2) + s.slice_ptr.numel() * 4 + s.row_ids.numel() * 4
    assert "int16" in repr(s) and "slice_rows=8" in repr(s)


@pytest.mark.parametrize("bad", [0, 3, 6, -4, 2.0])
def test_slice_rows_and_step_must_be_powers_of_two(bad):
    a = CSRMatrix.from_dense(torch.eye(4))
    with pytest.raises(ValueError, match="slice_rows must be a power of two"):
        SlicedELLMatrix.from_csr(a, bad, True, 4)
    with pytest.raises(ValueError, match="step must be a power of two"):
        SlicedELLMatrix.from_csr(a, 4, True, bad)
