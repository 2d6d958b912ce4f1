"""A CSR mask seen as dense output tiles: what the tiled SDDMM kernel walks instead of nonzeros.

The mask's M x N positions are cut into BLOCK_M x BLOCK_N tiles. ``output_tiles`` lists the tiles
holding at least one nonzero, in row-major tile order (consecutive tiles share a band of rows of A,
which then stays in L2), and for each tile its nonzeros, in CSR order, padded with dummies to a
multiple of ``chunk`` so a kernel can take ``chunk`` of them at a time without a bound check:

- ``tile_m``, ``tile_n`` (tiles,) int32: tile row and column of each nonempty tile;
- ``tile_ptr`` (tiles + 1,) int32: where each tile's entries start in the two arrays below;
- ``local`` (entries,) int16 (int32 for tiles over 32767 positions): the nonzero's position in its
  tile in 8 x 8 blocks (``tile_position``; 0 for padding): the order in which the kernel lays the
  tile out in shared memory without bank conflicts;
- ``dest`` (entries,) the mask's index dtype: the nonzero's index in the CSR values, -1 for padding.

A kernel program may take a *run* of consecutive tiles of one band of rows (``runs``): it then
reads that band of A once for all of them instead of once per tile.

Building it sorts the nonzeros by tile once; the result is cached on the mask (``mask.cache``),
keyed by the tile shape and chunk, so a mask used many times pays once per tiling.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from stuning.formats.csr import CSRMatrix

_INT16_POSITIONS = 2**15  # flat positions below this fit int16: 2 bytes per nonzero instead of 4
# Occupancy grids above this many cells are not built (features fall back to an estimate).
MAX_OCCUPANCY_CELLS = 1 << 26


@dataclass(frozen=True)
class OutputTiles:
    block_m: int
    block_n: int
    chunk: int
    tile_m: torch.Tensor
    tile_n: torch.Tensor
    tile_ptr: torch.Tensor
    local: torch.Tensor
    dest: torch.Tensor
    _runs: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def count(self) -> int:
        """Nonempty tiles: one program each."""
        return self.tile_m.numel()

    @property
    def entries(self) -> int:
        """Nonzeros plus padding."""
        return self.dest.numel()

    def runs(self, length: int) -> torch.Tensor:
        """``run_ptr`` (runs + 1,) int32: the tiles cut into runs of up to ``length`` consecutive
        tiles that share a tile row (a run never crosses into the next band of rows), as offsets into
        the tile list. Cached per length."""
        if int(length) < 1:
            raise ValueError(f"OutputTiles.runs: length must be positive, got {length}")
        hit = self._runs.get(int(length))
        if hit is None:
            hit = _run_ptr(self.tile_m, int(length))
            self._runs[int(length)] = hit
        return hit


def tile_position(r: torch.Tensor, c: torch.Tensor, block_n: int) -> torch.Tensor:
    """The position of row ``r``, column ``c`` of a tile ``block_n`` wide, counted in 8 x 8 blocks
    (blocks row-major, each block row-major), as the tiled SDDMM kernel flattens its accumulator."""
    return ((r // 8) * (block_n // 8) + c // 8) * 64 + (r % 8) * 8 + c % 8


def output_tiles(mask: CSRMatrix, block_m: int, block_n: int, chunk: int) -> OutputTiles:
    """The nonempty ``block_m`` x ``block_n`` tiles of ``mask`` and their nonzeros (cached)."""
    for name, v in (("block_m", block_m), ("block_n", block_n), ("chunk", chunk)):
        if int(v) < 1:
            raise ValueError(f"output_tiles: {name} must be positive, got {v}")
    for name, v in (("block_m", block_m), ("block_n", block_n)):
        if int(v) % 8:
            raise ValueError(f"output_tiles: {name} must be a multiple of 8 (tiles are laid out in 8 x 8 blocks), "
                             f"got {v}")
    key = ("output_tiles", int(block_m), int(block_n), int(chunk))
    hit = mask.cache.get(key)
    if hit is None:
        hit = _build(mask, int(block_m), int(block_n), int(chunk))
        mask.cache[key] = hit
    return hit


def _build(mask: CSRMatrix, bm: int, bn: int, chunk: int) -> OutputTiles:
    dev = mask.device
    n_cols = mask.shape[1]
    tiles_n = max(1, -(-n_cols // bn))
    local_dtype = torch.int16 if bm * bn <= _INT16_POSITIONS else torch.int32
    rows = mask.row_ids().to(torch.int64)
    cols = mask.col.to(torch.int64)
    nnz = cols.numel()
    if nnz == 0:
        i32 = torch.zeros(0, dtype=torch.int32, device=dev)
        return OutputTiles(bm, bn, chunk, i32, i32, torch.zeros(1, dtype=torch.int32, device=dev),
                           torch.zeros(0, dtype=local_dtype, device=dev), mask.col[:0].clone())
    tile_id = (rows // bm) * tiles_n + cols // bn
    # Stable: within a tile the nonzeros keep their CSR order (row by row, columns increasing).
    order = torch.sort(tile_id, stable=True).indices
    ids, counts = torch.unique_consecutive(tile_id[order], return_counts=True)
    padded = (counts + chunk - 1) // chunk * chunk
    tile_ptr = torch.zeros(ids.numel() + 1, dtype=torch.int64, device=dev)
    tile_ptr[1:] = torch.cumsum(padded, 0)
    first = torch.zeros_like(counts)
    first[1:] = torch.cumsum(counts, 0)[:-1]
    which = torch.repeat_interleave(torch.arange(ids.numel(), device=dev), counts)
    slot = tile_ptr[:-1][which] + torch.arange(nnz, device=dev) - first[which]

    entries = int(tile_ptr[-1])
    if entries > torch.iinfo(torch.int32).max:
        raise ValueError(f"output_tiles: {entries} padded entries do not fit int32 offsets")
    local = torch.zeros(entries, dtype=local_dtype, device=dev)
    local[slot] = tile_position(rows[order] % bm, cols[order] % bn, bn).to(local_dtype)
    dest = torch.full((entries,), -1, dtype=mask.col.dtype, device=dev)
    dest[slot] = order.to(mask.col.dtype)
    return OutputTiles(
        bm, bn, chunk, (ids // tiles_n).to(torch.int32), (ids % tiles_n).to(torch.int32),
        tile_ptr.to(torch.int32), local, dest,
    )


def _run_ptr(tile_m: torch.Tensor, length: int) -> torch.Tensor:
    count = tile_m.numel()
    idx = torch.arange(count, device=tile_m.device)
    new_band = torch.ones(count, dtype=torch.bool, device=tile_m.device)
    new_band[1:] = tile_m[1:] != tile_m[:-1]
    # Position of each tile within its band: its index minus the index of the band's first tile.
    band_first = torch.cummax(torch.where(new_band, idx, torch.zeros_like(idx)), 0).values
    starts = idx[(idx - band_first) % length == 0]
    end = torch.tensor([count], dtype=starts.dtype, device=tile_m.device)
    return torch.cat([starts, end]).to(torch.int32)


def nonempty_tile_counts(mask: CSRMatrix, sizes: list[tuple[int, int]], base: int = 32) -> dict | None:
    """How many (bm, bn) tiles of ``mask`` hold a nonzero, for each size in ``sizes``.

    One scatter of the nonzeros into a ``base`` x ``base`` occupancy grid, then each size pools it
    (every size must be a multiple of ``base``): O(nnz) once, cheap beside the other features.
    None when the grid would be too large to hold (a caller then estimates from the density).
    """
    m, n = mask.shape
    gm, gn = max(1, -(-m // base)), max(1, -(-n // base))
    if gm * gn > MAX_OCCUPANCY_CELLS:
        return None
    grid = torch.zeros(gm * gn, dtype=torch.bool, device=mask.device)
    if mask.nnz:
        rows = mask.row_ids().to(torch.int64) // base
        grid[rows * gn + mask.col.to(torch.int64) // base] = True
    grid = grid.view(1, 1, gm, gn).float()
    out = {}
    for bm, bn in sizes:
        if bm % base or bn % base:
            raise ValueError(f"nonempty_tile_counts: tile {bm} x {bn} is not a multiple of {base}")
        fm, fn = bm // base, bn // base
        pooled = torch.nn.functional.max_pool2d(grid, (fm, fn), ceil_mode=True) if fm * fn > 1 else grid
        out[(bm, bn)] = int((pooled > 0).sum())
    return out
