"""The tiled SDDMM kernel's mask preprocessing (``stuning.formats.output_tiles``): every nonzero in
exactly one tile at its own position, runs of tiles within a band, and the nonempty-tile counts the
cost model reads."""

from __future__ import annotations

import pytest
import torch
from naive import randn, random_sparse

from stuning import CSRMatrix
from stuning.formats import nonempty_tile_counts, output_tiles
from stuning.formats import tiles as tiles_module
from stuning.formats.tiles import tile_position


def check_tiles(mask: CSRMatrix, t) -> None:
    """Every nonzero exactly once, at its own position, in CSR order within its tile; padding masked."""
    bm, bn, chunk = t.block_m, t.block_n, t.chunk
    rows, cols = mask.row_ids().long().cpu(), mask.col.long().cpu()
    ptr = t.tile_ptr.long().cpu()
    dest, local = t.dest.long().cpu(), t.local.long().cpu()
    tm, tn = t.tile_m.long().cpu(), t.tile_n.long().cpu()
    assert t.tile_ptr.dtype == torch.int32 and t.dest.dtype == mask.col.dtype
    assert ptr[0] == 0 and ptr[-1] == t.entries == dest.numel() == local.numel()
    assert bool((ptr % chunk == 0).all()) and bool((ptr[1:] > ptr[:-1]).all())  # no empty tile listed
    ids = tm * max(1, -(-mask.shape[1] // bn)) + tn
    assert bool((ids[1:] > ids[:-1]).all()), "tiles must be unique and in row-major order"
    real = dest >= 0
    assert sorted(dest[real].tolist()) == list(range(mask.nnz))
    assert bool((local[~real] == 0).all())
    for i in range(t.count):
        d, pos = dest[ptr[i] : ptr[i + 1]], local[ptr[i] : ptr[i + 1]]
        n_real = int((d >= 0).sum())
        assert n_real > 0 and bool((d[:n_real] >= 0).all()), "padding only after a tile's nonzeros"
        assert ptr[i + 1] - ptr[i] == -(-n_real // chunk) * chunk, "padded to the next whole chunk only"
        d, pos = d[:n_real], pos[:n_real]
        assert bool((d[1:] > d[:-1]).all()), "CSR order within a tile"
        assert torch.equal(tile_position(rows[d] - tm[i] * bm, cols[d] - tn[i] * bn, bn), pos)
        assert bool(((rows[d] - tm[i] * bm) < bm).all()) and bool(((cols[d] - tn[i] * bn) < bn).all())


def test_tile_positions_are_the_8x8_block_order():
    # A 16 x 24 tile: positions follow its 8 x 8 blocks (2 x 3 of them), each row-major.
    r, c = torch.meshgrid(torch.arange(16), torch.arange(24), indexing="ij")
    pos = tile_position(r, c, 24)
    assert sorted(pos.flatten().tolist()) == list(range(16 * 24))
    assert pos[0, :9].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 64]
    assert pos[1, 0].item() == 8 and pos[8, 0].item() == 3 * 64 and pos[15, 23].item() == 16 * 24 - 1
    with pytest.raises(ValueError, match="multiple of 8"):
        output_tiles(CSRMatrix.from_dense(torch.eye(4)), 12, 16, 8)


@pytest.mark.parametrize("bm,bn,chunk", [(32, 32, 32), (64, 32, 16), (32, 128, 64), (16, 16, 8)])
def test_tiles_cover_every_nonzero_once_ragged_edges(gen, bm, bn, chunk):
    dense = random_sparse(37, 45, 0.3, torch.float32, gen)  # 37 x 45: no tile size divides either
    dense[5] = 0  # an empty row
    mask = CSRMatrix.from_dense(dense)
    t = output_tiles(mask, bm, bn, chunk)
    check_tiles(mask, t)
    expect = {(r // bm, c // bn) for r, c in zip(mask.row_ids().tolist(), mask.col.tolist(), strict=True)}
    assert set(zip(t.tile_m.tolist(), t.tile_n.tolist(), strict=True)) == expect


def test_tiles_of_an_empty_mask():
    mask = CSRMatrix.from_dense(torch.zeros(20, 30))
    t = output_tiles(mask, 32, 32, 16)
    assert t.count == 0 and t.entries == 0 and t.tile_ptr.tolist() == [0]
    check_tiles(mask, t)


def test_tiles_all_nonzeros_in_one_tile(gen):
    dense = torch.zeros(100, 90)
    dense[40:60, 33:60] = randn(20, 27, dtype=torch.float32, gen=gen)
    mask = CSRMatrix.from_dense(dense)
    t = output_tiles(mask, 64, 64, 32)
    assert t.count == 1 and (t.tile_m.item(), t.tile_n.item()) == (0, 0)
    assert t.entries == -(-mask.nnz // 32) * 32
    check_tiles(mask, t)


def test_tiles_are_cached_per_tiling_and_local_dtype(gen):
    mask = CSRMatrix.from_dense(random_sparse(70, 300, 0.1, torch.float32, gen))
    t = output_tiles(mask, 32, 64, 32)
    assert output_tiles(mask, 32, 64, 32) is t
    assert output_tiles(mask, 32, 64, 64) is not t
    assert t.local.dtype == torch.int16
    wide = output_tiles(mask, 256, 256, 32)  # 65536 positions: past int16
    assert wide.local.dtype == torch.int32
    check_tiles(mask, wide)
    with pytest.raises(ValueError, match="chunk must be positive"):
        output_tiles(mask, 32, 32, 0)


@pytest.mark.parametrize("length", [1, 2, 4, 16])
def test_runs_cover_every_tile_once_within_one_band(gen, length):
    dense = random_sparse(150, 300, 0.02, torch.float32, gen)
    dense[40:64] = 0  # a band of rows with no tile at all
    dense[100, :] = 1.0  # a band whose every tile is nonempty
    t = output_tiles(CSRMatrix.from_dense(dense), 32, 32, 32)
    ptr = t.runs(length).long()
    assert t.runs(length) is t.runs(length) and t.runs(length).dtype == torch.int32
    assert ptr[0] == 0 and ptr[-1] == t.count and bool((ptr[1:] > ptr[:-1]).all())
    assert int((ptr[1:] - ptr[:-1]).max()) <= length
    tm = t.tile_m.long()
    for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist(), strict=True):
        assert bool((tm[a:b] == tm[a]).all()), "a run crosses into another band of rows"
        assert b == t.count or tm[b] != tm[a] or b - a == length, "a run stopped short inside its band"
    with pytest.raises(ValueError, match="length must be positive"):
        t.runs(0)


def test_runs_of_an_empty_mask():
    t = output_tiles(CSRMatrix.from_dense(torch.zeros(5, 7)), 32, 32, 32)
    assert t.runs(4).tolist() == [0]


def test_nonempty_tile_counts_match_the_tiles(gen, monkeypatch):
    dense = random_sparse(150, 200, 0.01, torch.float32, gen)
    dense[:40, :70] = 1.0  # a dense block, so counts differ from what the density suggests
    mask = CSRMatrix.from_dense(dense)
    sizes = [(32, 32), (64, 32), (128, 64), (128, 128)]
    counts = nonempty_tile_counts(mask, sizes)
    assert counts == {s: output_tiles(mask, *s, 32).count for s in sizes}
    assert nonempty_tile_counts(CSRMatrix.from_dense(torch.zeros(5, 7)), sizes) == dict.fromkeys(sizes, 0)
    with pytest.raises(ValueError, match="not a multiple of 32"):
        nonempty_tile_counts(mask, [(48, 32)])
    monkeypatch.setattr(tiles_module, "MAX_OCCUPANCY_CELLS", 10)
    assert nonempty_tile_counts(mask, sizes) is None
