"""The CSR format: CSRMatrix (plain PyTorch, no kernels). The 2:4 format is in test_semi24_format.py."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import random_sparse, skewed_sparse

from stuning import CSRMatrix

FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def csr(crow, col, values, shape, **kw) -> CSRMatrix:
    return CSRMatrix(
        torch.tensor(crow, dtype=torch.int32),
        torch.tensor(col, dtype=torch.int32),
        torch.tensor(values, dtype=torch.float32),
        shape,
        **kw,
    )


def reference_lengths(dense: torch.Tensor) -> torch.Tensor:
    return (dense != 0).sum(1)


# =========================================================================================== CSR
class TestCSRConstruction:
    @pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
    @pytest.mark.parametrize("shape", [(13, 17), (1, 9), (9, 1), (0, 5), (5, 0), (40, 3)])
    def test_from_dense_round_trip(self, gen, dtype, shape):
        dense = random_sparse(*shape, 0.3, dtype, gen)
        a = CSRMatrix.from_dense(dense)
        assert a.shape == shape
        assert a.dtype == dtype
        assert a.nnz == int((dense != 0).sum())
        assert a.crow.dtype == torch.int32 and a.col.dtype == torch.int32
        assert a.crow.numel() == shape[0] + 1 and int(a.crow[0]) == 0
        assert torch.equal(a.row_lengths(), reference_lengths(dense))
        assert a.pad_to == 1
        a.validate()
        assert torch.equal(a.to_dense(), dense)

    def test_from_dense_keeps_order_and_values(self):
        dense = torch.tensor([[0.0, 2.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0], [5.0, 0.0, -1.0, 0.0]])
        a = CSRMatrix.from_dense(dense)
        assert a.crow.tolist() == [0, 2, 2, 4]
        assert a.col.tolist() == [1, 3, 0, 2]
        assert a.values.tolist() == [2.0, 3.0, 5.0, -1.0]
        assert a.row_ids().tolist() == [0, 0, 2, 2]
        assert a.density == pytest.approx(4 / 12)

    def test_all_zero(self):
        a = CSRMatrix.from_dense(torch.zeros(6, 7))
        assert a.nnz == 0
        assert a.crow.tolist() == [0] * 7
        assert torch.equal(a.to_dense(), torch.zeros(6, 7))
        assert a.stats().empty == 6 and a.stats().max == 0 and a.stats().mean == 0.0

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
    def test_from_torch_csr(self, gen, dtype):
        dense = random_sparse(11, 23, 0.25, dtype, gen)
        a = CSRMatrix.from_torch(dense.to_sparse_csr())
        assert a.crow.dtype == torch.int32 and a.col.dtype == torch.int32
        assert torch.equal(a.to_dense(), dense)
        b = CSRMatrix.from_dense(dense)
        assert torch.equal(a.crow, b.crow) and torch.equal(a.col, b.col) and torch.equal(a.values, b.values)

    def test_from_torch_coo(self, gen):
        dense = random_sparse(9, 14, 0.3, torch.float32, gen)
        a = CSRMatrix.from_torch(dense.to_sparse())
        assert torch.equal(a.to_dense(), dense)

    def test_from_torch_uncoalesced_coo_sums_duplicates(self):
        idx = torch.tensor([[2, 0, 2, 1], [3, 1, 3, 0]])
        vals = torch.tensor([1.0, 2.0, 4.0, 8.0])
        coo = torch.sparse_coo_tensor(idx, vals, (3, 5))
        assert not coo.is_coalesced()
        a = CSRMatrix.from_torch(coo)
        a.validate()
        assert a.nnz == 3
        assert torch.equal(a.to_dense(), coo.to_dense())

    def test_to_torch_round_trip(self, gen):
        dense = random_sparse(10, 12, 0.3, torch.float32, gen)
        a = CSRMatrix.from_dense(dense, pad_to=4)
        t = a.to_torch()
        assert t.layout == torch.sparse_csr
        assert torch.equal(t.to_dense(), dense)
        assert torch.equal(CSRMatrix.from_dense(dense).to_torch().to_dense(), dense)

    def test_int32_indices(self, gen):
        a = CSRMatrix.from_dense(random_sparse(20, 30, 0.2, torch.float16, gen), pad_to=8)
        assert a.crow.dtype == torch.int32 and a.col.dtype == torch.int32
        assert a.row_ids().dtype == torch.int32
        assert a.row_order().dtype == torch.int32

    def test_int64_indices_accepted(self, gen):
        dense = random_sparse(8, 8, 0.4, torch.float32, gen)
        a = CSRMatrix.from_dense(dense)
        b = CSRMatrix(a.crow.long(), a.col.long(), a.values, a.shape)
        assert torch.equal(b.to_dense(), dense)

    def test_to_casts_values_keeps_indices(self, gen):
        dense = random_sparse(8, 9, 0.4, torch.float32, gen)
        a = CSRMatrix.from_dense(dense, pad_to=2)
        h = a.to(dtype=torch.float16)
        assert h.dtype == torch.float16 and h.pad_to == 2
        assert h.crow.dtype == torch.int32
        assert torch.equal(h.to_dense(), dense.half())

    def test_nbytes_and_repr(self, gen):
        a = CSRMatrix.from_dense(random_sparse(8, 9, 0.4, torch.float16, gen))
        assert a.nbytes() == a.nnz * 2 + a.nnz * 4 + 9 * 4
        assert "CSRMatrix(shape=(8, 9)" in repr(a)


class TestCSRStats:
    def check_stats(self, dense):
        a = CSRMatrix.from_dense(dense)
        s = a.stats()
        lengths = reference_lengths(dense).double()
        assert s.mean == pytest.approx(float(lengths.mean()))
        assert s.max == int(lengths.max())
        assert s.empty == int((lengths == 0).sum())
        expect_cv = float(lengths.std(unbiased=False) / lengths.mean()) if lengths.mean() > 0 else 0.0
        assert s.cv == pytest.approx(expect_cv)
        assert s.as_dict() == {"mean": s.mean, "max": s.max, "cv": s.cv, "empty": s.empty}
        return s

    def test_uniform(self, gen):
        s = self.check_stats(random_sparse(50, 60, 0.2, torch.float32, gen))
        assert s.cv < 0.5

    def test_skewed(self, gen):
        s = self.check_stats(skewed_sparse(400, 300, 40.0, torch.float32, gen, cv=0.4))
        assert 0.25 < s.cv < 0.55  # the generator's CV is what the suite's skewed tests rely on
        assert s.mean == pytest.approx(40.0, rel=0.15)

    def test_empty_rows(self, gen):
        s = self.check_stats(skewed_sparse(50, 40, 10.0, torch.float32, gen, empty_rows=7))
        assert s.empty >= 7

    def test_even_rows_have_zero_cv(self):
        s = self.check_stats(torch.ones(5, 4))
        assert s.cv == 0.0 and s.mean == 4.0 and s.max == 4 and s.empty == 0

    def test_no_rows(self):
        s = CSRMatrix.from_dense(torch.zeros(0, 4)).stats()
        assert (s.mean, s.max, s.cv, s.empty) == (0.0, 0, 0.0, 0)

    def test_padded_stats_count_stored_entries(self):
        dense = torch.tensor([[1.0, 0, 0, 0, 0], [1.0, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
        s = CSRMatrix.from_dense(dense, pad_to=4).stats()
        assert s.max == 4 and s.mean == pytest.approx(8 / 3) and s.empty == 1


class TestRowOrder:
    def test_longest_first_permutation(self, gen):
        dense = skewed_sparse(64, 50, 12.0, torch.float32, gen, empty_rows=5)
        a = CSRMatrix.from_dense(dense)
        order = a.row_order()
        assert order.dtype == torch.int32
        assert sorted(order.tolist()) == list(range(64))
        lengths = reference_lengths(dense)[order.long()]
        assert (lengths[:-1] >= lengths[1:]).all()

    def test_ties_keep_row_order(self):
        dense = torch.tensor([[1.0, 0], [1, 1], [0, 1], [0, 0], [1, 1]])
        assert CSRMatrix.from_dense(dense).row_order().tolist() == [1, 4, 0, 2, 3]


class TestPadded:
    @pytest.mark.parametrize("pad_to", [2, 4, 8, 16])
    def test_padded_keeps_dense_and_aligns(self, gen, pad_to):
        dense = skewed_sparse(37, 45, 9.0, torch.float32, gen, empty_rows=4)
        a = CSRMatrix.from_dense(dense)
        p = a.padded(pad_to)
        assert p.pad_to == pad_to
        assert (p.crow.long() % pad_to == 0).all()
        lengths = a.row_lengths()
        assert torch.equal(p.row_lengths(), (lengths + pad_to - 1) // pad_to * pad_to)
        assert p.crow.dtype == torch.int32 and p.col.dtype == torch.int32
        assert p.col.min() >= 0 and p.col.max() < 45
        p.validate()
        assert torch.equal(p.to_dense(), dense)
        # The padding holds explicit zeros: the sum of the stored values is unchanged.
        assert float(p.values.double().sum()) == pytest.approx(float(a.values.double().sum()))
        assert int((p.values != 0).sum()) == a.nnz
        from_dense = CSRMatrix.from_dense(dense, pad_to=pad_to)
        assert torch.equal(from_dense.crow, p.crow) and torch.equal(from_dense.col, p.col)
        assert torch.equal(from_dense.values, p.values)

    def test_density_counts_nonzeros_not_padding(self, gen):
        dense = skewed_sparse(37, 45, 9.0, torch.float32, gen, empty_rows=4)
        a = CSRMatrix.from_dense(dense)
        p = a.padded(4)
        assert p.nnz > a.nnz
        assert p.nonzeros() == a.nonzeros() == a.nnz == int((dense != 0).sum())
        assert p.density == a.density == pytest.approx(a.nnz / (37 * 45))

    def test_padding_repeats_last_column(self):
        dense = torch.tensor([[0.0, 3, 0, 4, 0], [0, 0, 0, 0, 0], [7, 0, 0, 0, 0]])
        p = CSRMatrix.from_dense(dense, pad_to=4)
        assert p.crow.tolist() == [0, 4, 4, 8]
        assert p.col.tolist() == [1, 3, 3, 3, 0, 0, 0, 0]
        assert p.values.tolist() == [3.0, 4.0, 0, 0, 7.0, 0, 0, 0]

    def test_repad(self, gen):
        dense = random_sparse(20, 30, 0.2, torch.float32, gen)
        p = CSRMatrix.from_dense(dense, pad_to=4).padded(8)
        assert p.pad_to == 8 and (p.crow.long() % 8 == 0).all()
        p.validate()
        assert torch.equal(p.to_dense(), dense)

    def test_padded_noop(self, gen):
        a = CSRMatrix.from_dense(random_sparse(5, 6, 0.4, torch.float32, gen))
        assert a.padded(1) is a
        p = a.padded(4)
        assert p.padded(4) is p

    def test_padded_all_zero(self):
        p = CSRMatrix.from_dense(torch.zeros(3, 4), pad_to=4)
        assert p.nnz == 0 and torch.equal(p.to_dense(), torch.zeros(3, 4))

    @pytest.mark.parametrize("pad_to", [0, 3, 6, -2])
    def test_pad_to_must_be_power_of_two(self, pad_to):
        a = CSRMatrix.from_dense(torch.eye(4))
        with pytest.raises(ValueError, match="power of two"):
            a.padded(pad_to)


class TestCSRValidation:
    def test_valid(self):
        csr([0, 2, 2, 3], [0, 3, 1], [1.0, 2.0, 3.0], (3, 4))

    def test_non_monotone_crow(self):
        with pytest.raises(ValueError, match=r"decrease at row 1.*not monotone"):
            csr([0, 3, 1, 3], [0, 1, 2], [1.0, 2.0, 3.0], (3, 4))

    def test_crow_must_start_at_zero(self):
        with pytest.raises(ValueError, match=r"crow\[0\] must be 0"):
            csr([1, 2, 3], [0, 1, 2], [1.0, 2.0, 3.0], (2, 4))

    def test_crow_must_end_at_nnz(self):
        with pytest.raises(ValueError, match=r"crow\[-1\] = 2 but there are 3 entries"):
            csr([0, 1, 2], [0, 1, 2], [1.0, 2.0, 3.0], (2, 4))

    @pytest.mark.parametrize("bad", [4, 9, -1])
    def test_column_out_of_range(self, bad):
        with pytest.raises(ValueError, match=rf"column index {bad} at entry 1 is out of range \[0, 4\)"):
            csr([0, 2, 3], [0, bad, 2], [1.0, 2.0, 3.0], (2, 4))

    def test_unsorted_columns(self):
        with pytest.raises(ValueError, match=r"row 1 are not sorted.*3 then 1"):
            csr([0, 1, 3], [2, 3, 1], [1.0, 2.0, 3.0], (2, 4))

    def test_duplicate_columns(self):
        with pytest.raises(ValueError, match=r"row 2 are not sorted and unique.*2 then 2"):
            csr([0, 1, 1, 3], [0, 2, 2], [1.0, 2.0, 3.0], (3, 4))

    def test_duplicate_columns_not_hidden_by_empty_rows(self):
        # Row 0 ends with column 3 and row 2 starts with column 0: decreasing across rows is fine.
        csr([0, 2, 2, 4], [1, 3, 0, 3], [1.0, 2.0, 3.0, 4.0], (3, 4))

    def test_crow_wrong_length(self):
        with pytest.raises(ValueError, match=r"crow has 3 entries, expected M \+ 1 = 4"):
            csr([0, 1, 2], [0, 1], [1.0, 2.0], (3, 4))

    def test_values_wrong_length(self):
        with pytest.raises(ValueError, match="2 values but 3 column indices"):
            csr([0, 1, 3], [0, 1, 2], [1.0, 2.0], (2, 4))

    def test_not_one_dimensional(self):
        with pytest.raises(ValueError, match="col must be 1-D"):
            CSRMatrix(torch.tensor([0, 2]), torch.tensor([[0, 1]]), torch.ones(2), (1, 4))

    def test_negative_shape(self):
        with pytest.raises(ValueError, match="non-negative"):
            csr([0], [], [], (-1, 4))

    @pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.complex64])
    def test_non_float_values(self, dtype):
        with pytest.raises(TypeError, match="values must be a floating dtype"):
            CSRMatrix(torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1, dtype=dtype), (1, 2))

    def test_float_indices(self):
        with pytest.raises(TypeError, match="crow must be int32 or int64"):
            CSRMatrix(torch.tensor([0.0, 1.0]), torch.tensor([0]), torch.ones(1), (1, 2))

    def test_not_a_tensor(self):
        with pytest.raises(TypeError, match="col must be a torch.Tensor, got list"):
            CSRMatrix(torch.tensor([0, 1]), [0], torch.ones(1), (1, 2))

    def test_mismatched_devices(self):
        # A second device on a CPU-only machine: the meta device (no data, only the check matters).
        with pytest.raises(ValueError, match="different devices"):
            CSRMatrix(torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1, device="meta"), (1, 2))

    def test_padded_crow_not_aligned(self):
        with pytest.raises(ValueError, match="padded to 4 but a row pointer is not a multiple"):
            csr([0, 4, 6], [0, 1, 1, 1, 0, 1], [1.0, 1.0, 0.0, 0.0, 1.0, 1.0], (2, 4), pad_to=4)

    def test_padded_allows_repeated_last_column(self):
        a = csr([0, 4], [0, 2, 2, 2], [1.0, 2.0, 0.0, 0.0], (1, 4), pad_to=4)
        assert a.to_dense().tolist() == [[1.0, 0.0, 2.0, 0.0]]

    def test_padded_still_rejects_unsorted(self):
        with pytest.raises(ValueError, match="not sorted"):
            csr([0, 4], [2, 0, 0, 0], [1.0, 2.0, 0.0, 0.0], (1, 4), pad_to=4)

    def test_validate_false_skips_checks(self):
        csr([0, 3, 1, 3], [0, 1, 2], [1.0, 2.0, 3.0], (3, 4), validate=False)

    def test_from_dense_errors(self):
        with pytest.raises(TypeError, match="torch.Tensor"):
            CSRMatrix.from_dense([[1.0]])
        with pytest.raises(ValueError, match="2-D"):
            CSRMatrix.from_dense(torch.ones(3))
        with pytest.raises(TypeError, match="floating"):
            CSRMatrix.from_dense(torch.ones(3, 3, dtype=torch.int64))

    def test_from_torch_errors(self):
        with pytest.raises(TypeError, match="layout"):
            CSRMatrix.from_torch(torch.ones(3, 3))
        with pytest.raises(TypeError, match="torch.Tensor"):
            CSRMatrix.from_torch("not a tensor")
        with pytest.raises(ValueError, match="2-D"):
            CSRMatrix.from_torch(torch.ones(2, 3, 3).to_sparse())

    def test_from_torch_unsorted_columns_rejected(self):
        t = torch.sparse_csr_tensor(
            torch.tensor([0, 2]),
            torch.tensor([3, 1]),
            torch.tensor([1.0, 2.0]),
            (1, 4),
            check_invariants=False,
        )
        with pytest.raises(ValueError, match="not sorted"):
            CSRMatrix.from_torch(t)


# ==================================================================================== properties
PROPERTY = settings(deadline=None, max_examples=30)


@st.composite
def sparse_dense(draw):
    """A small dense matrix with a drawn sparsity pattern and drawn (nonzero) values."""
    m = draw(st.integers(0, 9))
    k = draw(st.integers(0, 9))
    cells = [(i, j) for i in range(m) for j in range(k)]
    chosen = draw(st.lists(st.sampled_from(cells), unique=True, max_size=len(cells))) if cells else []
    vals = draw(
        st.lists(
            st.floats(-100, 100, allow_nan=False, width=16).filter(lambda v: v != 0),
            min_size=len(chosen),
            max_size=len(chosen),
        )
    )
    dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.float64]))
    dense = torch.zeros(m, k, dtype=dtype)
    for (i, j), v in zip(chosen, vals, strict=True):
        dense[i, j] = v
    return dense


@PROPERTY
@given(dense=sparse_dense(), pad_to=st.sampled_from([1, 2, 4, 8]))
def test_property_csr_round_trip(dense, pad_to):
    a = CSRMatrix.from_dense(dense, pad_to=pad_to)
    a.validate()
    assert a.pad_to == pad_to
    assert torch.equal(a.to_dense(), dense)
    assert (a.crow.long() % pad_to == 0).all()
    assert int((a.values != 0).sum()) == int((dense != 0).sum())
    # Through torch's own formats and back.
    assert torch.equal(a.to_torch().to_dense(), dense)
    b = CSRMatrix.from_torch(dense.to_sparse_csr())
    assert torch.equal(b.to_dense(), dense)
    c = CSRMatrix.from_torch(dense.to_sparse())
    assert torch.equal(c.to_dense(), dense)
    order = a.row_order().tolist()
    assert sorted(order) == list(range(dense.shape[0]))
