"""The 2:4 format: Semi24Matrix, its metadata and pruning (plain PyTorch, no kernels)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import random_24

from stuning import Semi24Matrix
from stuning.formats.semi24 import masks_from_packed_positions, masks_from_positions, unpack_masks

FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
PROPERTY = settings(deadline=None, max_examples=30)


# =========================================================================================== 2:4
class TestSemi24:
    @pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
    @pytest.mark.parametrize("partial", [False, True])
    @pytest.mark.parametrize("shape", [(7, 32), (16, 64), (3, 4), (5, 100)])
    def test_round_trip(self, gen, dtype, partial, shape):
        m, k = shape
        dense = random_24(m, k, dtype, gen, partial=partial)
        w = Semi24Matrix.from_dense(dense)
        assert w.shape == (m, k) and w.k_stored == k
        assert w.dtype == dtype
        assert w.values.shape == (m, k // 2)
        assert w.masks.shape == (m, math.ceil(k / 32)) and w.masks.dtype == torch.int32
        w.validate()
        assert torch.equal(w.to_dense(), dense)

    def test_values_in_column_order(self):
        dense = torch.tensor([[0.0, 5.0, 0.0, 6.0, 7.0, 0.0, 0.0, 0.0]])
        w = Semi24Matrix.from_dense(dense)
        assert w.values.tolist() == [[5.0, 6.0, 7.0, 0.0]]
        assert w.positions().tolist() == [[1, 3, 0, 1]]
        # Group 0 keeps columns 1 and 3 (mask 0b1010), group 1 columns 0 and 1 (0b0011).
        assert w.masks.tolist() == [[0b1010 | 0b0011 << 4]]

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
    def test_prune_keeps_two_largest_magnitudes(self, gen, dtype):
        m, k = 12, 40
        # Distinct magnitudes within every group, random signs: the two kept entries are unambiguous.
        mags = torch.rand(m, k // 4, 4, generator=gen).argsort(-1).float() + 1.0
        signs = torch.where(torch.rand(m, k // 4, 4, generator=gen) < 0.5, -1.0, 1.0)
        dense = (mags * signs).reshape(m, k).to(dtype)
        w = Semi24Matrix.from_dense(dense, prune=True)
        top = mags.topk(2, dim=-1).indices
        keep = torch.zeros(m, k // 4, 4, dtype=torch.bool).scatter_(-1, top, True).reshape(m, k)
        expect = torch.where(keep, dense, torch.zeros((), dtype=dtype))
        assert torch.equal(w.to_dense(), expect)

    def test_prune_of_a_24_matrix_is_identity(self, gen):
        dense = random_24(9, 24, torch.float16, gen)
        assert torch.equal(Semi24Matrix.from_dense(dense, prune=True).to_dense(), dense)

    def test_not_24_names_first_offending_group(self, gen):
        dense = random_24(8, 32, torch.float32, gen)
        dense[5, 0:4] = 1.0  # 4 nonzeros, found second
        dense[3, 9] = dense[3, 10] = dense[3, 11] = 2.0  # at least 3 nonzeros in columns 8..11
        with pytest.raises(ValueError, match=r"not 2:4 sparse: row 3, columns 8\.\.11 hold [34] nonzeros"):
            Semi24Matrix.from_dense(dense)
        assert Semi24Matrix.from_dense(dense, prune=True).to_dense().ne(0).reshape(8, 8, 4).sum(-1).max() <= 2

    def test_k_not_multiple_of_4_needs_pad(self, gen):
        dense = random_24(6, 12, torch.float16, gen)[:, :10]
        with pytest.raises(ValueError, match="multiple of 4, got K = 10"):
            Semi24Matrix.from_dense(dense)

    @pytest.mark.parametrize("k", [1, 2, 3, 5, 10, 31, 33])
    def test_pad(self, gen, k):
        dense = random_24(6, (k + 3) // 4 * 4, torch.float16, gen)[:, :k].contiguous()
        w = Semi24Matrix.from_dense(dense, pad=True)
        assert w.shape == (6, k)
        assert w.k_stored == (k + 3) // 4 * 4
        assert w.values.shape == (6, w.k_stored // 2)
        out = w.to_dense()
        assert out.shape == (6, k)
        assert torch.equal(out, dense)

    def test_pad_still_checks_last_group(self):
        dense = torch.zeros(2, 7)
        dense[1, 4:7] = 1.0
        with pytest.raises(ValueError, match=r"row 1, columns 4\.\.7"):
            Semi24Matrix.from_dense(dense, pad=True)

    @pytest.mark.parametrize("k", [32, 64, 96, 4096])
    def test_metadata_is_an_eighth_byte_per_element(self, k):
        w = Semi24Matrix.from_dense(torch.zeros(3, k, dtype=torch.float16))
        meta_bytes = w.masks.numel() * w.masks.element_size()
        assert meta_bytes <= 3 * k / 8
        assert w.nbytes() == 3 * k // 2 * 2 + meta_bytes

    @pytest.mark.parametrize("k", [4, 36, 100])
    def test_metadata_rounds_up_to_a_word(self, k):
        w = Semi24Matrix.from_dense(torch.zeros(3, k, dtype=torch.float16))
        assert w.masks.numel() * 4 == 3 * 4 * math.ceil(k / 32)

    def test_masks_pack_and_unpack(self, gen):
        pos = torch.sort(torch.rand(5, 19, 4, generator=gen).argsort(-1)[..., :2], dim=-1).values
        pos[:, 7] = torch.tensor([2, 3])  # mask 0b1100 reaches the sign bit of the first word
        words = masks_from_positions(pos)
        assert words.dtype == torch.int32 and words.shape == (5, 3)
        nibbles = unpack_masks(words, 19)
        assert torch.equal(nibbles, (1 << pos).sum(-1))
        assert (unpack_masks(words, 24)[:, 19:] == 0).all()

    def test_masks_from_the_old_position_layout(self, gen):
        dense = random_24(6, 72, torch.float16, gen, partial=True)
        w = Semi24Matrix.from_dense(dense)
        # stuning 0.1 packed each kept value's 2-bit position, 16 to an int32 word.
        pos = w.positions()
        padded = torch.zeros(6, 48, dtype=torch.int64)
        padded[:, :36] = pos
        words = (padded.reshape(6, 3, 16) << (2 * torch.arange(16))).sum(-1)
        words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
        assert torch.equal(masks_from_packed_positions(words, 72), w.masks)

    @pytest.mark.parametrize("corrupt", ["three kept", "one kept", "bits past the end"])
    def test_validate_names_corrupt_masks(self, gen, corrupt):
        w = Semi24Matrix.from_dense(random_24(4, 40, torch.float32, gen))
        masks = w.masks.clone()
        if corrupt == "three kept":
            masks[2, 1] = (masks[2, 1] & ~(0xF << 4)) | (0b0111 << 4)  # group 9: word 1, second nibble
            match = r"row 2, group 9 \(columns 36\.\.39\) keeps 3"
        elif corrupt == "one kept":
            masks[0, 0] = (masks[0, 0] & ~0xF) | 0b0100
            match = r"row 0, group 0 \(columns 0\.\.3\) keeps 1"
        else:
            masks[3, 1] |= 0b0011 << 12
            match = "past the last group"
        with pytest.raises(ValueError, match=match):
            Semi24Matrix(w.values, masks, w.shape, validate=True)

    def test_from_dense_errors(self):
        with pytest.raises(TypeError, match="torch.Tensor"):
            Semi24Matrix.from_dense([[1.0, 0, 0, 0]])
        with pytest.raises(ValueError, match="2-D"):
            Semi24Matrix.from_dense(torch.zeros(8))
        with pytest.raises(TypeError, match="floating"):
            Semi24Matrix.from_dense(torch.zeros(2, 8, dtype=torch.int32))

    def test_constructor_checks_shapes(self):
        with pytest.raises(ValueError, match="values must be"):
            Semi24Matrix(torch.zeros(2, 3), torch.zeros(2, 1, dtype=torch.int32), (2, 8))
        with pytest.raises(ValueError, match="masks must be int32"):
            Semi24Matrix(torch.zeros(2, 4), torch.zeros(2, 1, dtype=torch.int64), (2, 8))

    def test_to(self, gen):
        dense = random_24(4, 16, torch.float32, gen)
        w = Semi24Matrix.from_dense(dense).to(dtype=torch.bfloat16)
        assert w.dtype == torch.bfloat16
        assert torch.equal(w.to_dense(), dense.bfloat16())


@st.composite
def pattern_24(draw):
    m = draw(st.integers(1, 6))
    k = draw(st.integers(1, 24))
    groups = (k + 3) // 4
    dense = torch.zeros(m, groups * 4, dtype=torch.float32)
    for i in range(m):
        for g in range(groups):
            width = min(4, k - 4 * g)
            cols = draw(st.lists(st.integers(0, width - 1), unique=True, max_size=min(2, width)))
            for c in cols:
                dense[i, 4 * g + c] = draw(st.floats(-8, 8, width=16).filter(lambda v: v != 0))
    return dense[:, :k].contiguous()


@PROPERTY
@given(dense=pattern_24(), dtype=st.sampled_from([torch.float16, torch.bfloat16, torch.float32]))
def test_property_semi24_round_trip(dense, dtype):
    dense = dense.to(dtype)
    k = dense.shape[1]
    if k % 4:
        with pytest.raises(ValueError, match="multiple of 4"):
            Semi24Matrix.from_dense(dense)
    w = Semi24Matrix.from_dense(dense, pad=True)
    assert w.shape == dense.shape
    assert torch.equal(w.to_dense(), dense)
    assert torch.equal(Semi24Matrix.from_dense(dense, prune=True, pad=True).to_dense(), dense)


@PROPERTY
@given(
    m=st.integers(1, 5),
    groups=st.integers(1, 6),
    data=st.data(),
)
def test_property_prune_is_24_and_keeps_largest(m, groups, data):
    vals = data.draw(st.lists(st.floats(-50, 50, width=16), min_size=m * groups * 4, max_size=m * groups * 4))
    dense = torch.tensor(vals, dtype=torch.float32).reshape(m, groups * 4)
    out = Semi24Matrix.from_dense(dense, prune=True).to_dense().reshape(m, groups, 4)
    src = dense.reshape(m, groups, 4)
    kept = out != 0
    assert int(kept.sum(-1).max()) <= 2
    # Kept entries are the input's; every dropped magnitude is at most every kept one.
    assert torch.equal(torch.where(kept, src, 0.0), out)
    dropped = torch.where(kept, torch.full_like(src, -1.0), src.abs()).amax(-1)
    smallest_kept = torch.where(kept, src.abs(), torch.full_like(src, float("inf"))).amin(-1)
    has_kept = kept.any(-1)
    assert (dropped[has_kept] <= smallest_kept[has_kept]).all()
