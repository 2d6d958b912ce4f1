"""Scatter tiles: A cut into (block_m x block_k) tiles, each a list of its nonzeros ready to be stored
into a dense tile in shared memory.

The scatter SpMM kernel (``stuning.kernels.spmm_scatter``) builds each tile of A densely in shared
memory, one 2-byte store a nonzero, and multiplies it with X's rows on the tensor cores ("load as
sparse, compute as dense"). So each entry is one int32: the byte offset of its element in the
tile's shared-memory image (high 16 bits) and the value's 16 bits (low). The image is NVMMA's
128-byte swizzle for 16-bit values, the layout the warpgroup MMA reads: the tile is ``block_k / 64``
blocks of (block_m x 64) one after another, and in a block the 16-byte chunk j of row r sits at
chunk j ^ (r % 8). Computing it here, once per weight, leaves the kernel one shift and one add a
nonzero.

Tiles are in row-major order (the K tiles of a band of rows are consecutive), each list is padded
to a multiple of 4 with entries of offset 0xFFFF (never a real offset: real ones are even), so that
the kernel loads entries 16 bytes at a time, and ``tile_ptr`` counts fours. Values are 16-bit; an
fp32 matrix is stored as its fp16 parts [A_hi | A_hi | A_lo] (M x 3K, ``fp16_parts``; the product
they make is ``stuning.kernels.fp16_split``'s), with the rows' factors its epilogue scales by.

Where the lists are about equally long (uniform sparsity: the longest padded list at most
``capacity.FIXED_CAPACITY_SLACK`` times the mean), every list is padded to the longest, ``capacity``
entries: tile t's list then starts at ``t * capacity``, and the kernel starts copying a program's
first entries without first reading where they are (one trip to DRAM fewer before its first MMA).
Uneven lists (skewed or blocky matrices) keep their own lengths (``capacity`` 0), where padding
would cost memory.

Within a tile the entries are ordered for the kernel's stores, which shared memory serves one bank
conflict at a time: a thread holds four consecutive entries, so one warp's store takes the entries
at positions 128 b + 4 t + v (t = 0..31, for block b and register v). Entries are dealt into those
stores round robin by bank (``(offset // 4) % 32``), one of each bank before a second of any, so a
store meets at most two entries of a bank where list order (row-major) met about four.
"""

from __future__ import annotations

import torch

from stuning.formats.capacity import fixed_capacity
from stuning.formats.csr import CSRMatrix

PADDING = 0xFFFF  # the offset of a padding entry
_SWIZZLE_COLUMNS = 64  # 128 bytes of 16-bit values: one swizzle block's row
_BANKS = 32  # of four bytes each
_STORE_BLOCK = 128  # entries one warp stores in four instructions: 32 threads x 4 (module docstring)
# The kernel computes the bounds of up to 32 tiles past a program's last (four steps of eight
# splits), masked off: their offsets must fit its int32 arithmetic too.
_BOUNDS_AHEAD = 64
# An fp32 matrix's fp16 parts (``fp16_parts``): three K blocks, lo holding the 11 bits after hi's.
PARTS = 3
LO_SCALE = 2048.0


def slot_offsets(rows: torch.Tensor, cols: torch.Tensor, block_m: int) -> torch.Tensor:
    """Byte offsets of the elements (rows, cols) of a (block_m x block_k) 16-bit tile in NVMMA's
    128-byte swizzle (the module docstring says how)."""
    block, c = cols // _SWIZZLE_COLUMNS, cols % _SWIZZLE_COLUMNS
    return block * (block_m * 128) + rows * 128 + (((c >> 3) ^ (rows & 7)) << 4) + (c & 7) * 2


def _rank_in_group(group: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Each element's rank among those of its ``group`` (groups and keys non-negative int64), by
    ``key`` then index."""
    order = torch.argsort(group * (int(key.max()) + 1 if key.numel() else 1) + key, stable=True)
    g = group[order]
    first = torch.ones_like(g, dtype=torch.bool)
    first[1:] = g[1:] != g[:-1]
    idx = torch.arange(g.numel(), device=g.device)
    start = torch.cummax(torch.where(first, idx, torch.zeros_like(idx)), 0).values
    rank = torch.empty_like(idx)
    rank[order] = idx - start
    return rank


def store_positions(tile: torch.Tensor, offsets: torch.Tensor, counts: torch.Tensor,
                    padded: torch.Tensor) -> torch.Tensor:
    """Where each entry goes in its tile's list (``tile`` sorted; ``counts`` and ``padded`` entries a
    tile): dealt round robin by bank into the kernel's warp stores (module docstring)."""
    if tile.numel() == 0:
        return tile.clone()
    bank = (offsets // 4) % _BANKS
    # The k-th entry of a bank in its tile goes out in round k: rounds in order, banks within one.
    round_ = _rank_in_group(tile * _BANKS + bank, torch.zeros_like(tile))
    order = _rank_in_group(tile, round_ * _BANKS + bank)
    # Order r -> position: store (block, register) by store, threads in order; the last block of a
    # tile holds lanes = its entries / 4.
    size = padded[tile]
    full = size // _STORE_BLOCK * _STORE_BLOCK
    block, r = order // _STORE_BLOCK, order % _STORE_BLOCK
    lanes = torch.where(order < full, torch.full_like(size, _STORE_BLOCK // 4), (size - full) // 4)
    return block * _STORE_BLOCK + 4 * (r % lanes) + r // lanes


def fp16_parts(csr: CSRMatrix) -> tuple[CSRMatrix, torch.Tensor]:
    """An fp32 ``csr`` (M x K) as fp16 parts: [A_hi | A_hi | A_lo] (M x 3K) of its rows scaled by
    powers of two into |a| < 16, and the rows' factors 2^-11 / r the product is scaled back by
    (``stuning.kernels.fp16_split``, which scales X's columns the same way). Cached on ``csr``."""
    hit = csr.cache.get("fp16_parts")
    if hit is not None:
        return hit
    m, k = csr.shape
    rows = csr.row_ids().to(torch.int64)
    cols = csr.col.to(torch.int64)
    values = csr.values.float()
    amax = torch.zeros(m, dtype=torch.float32, device=values.device)
    amax.scatter_reduce_(0, rows, values.abs(), "amax")
    # As the kernel scales X's columns: 2^(130 - E) for amax's biased exponent E (under 16), at most
    # 2^126, and 1 where a row holds inf or NaN.
    e = (amax.view(torch.int32) >> 23) & 0xFF
    scale_exp = torch.where(e == 255, 127, torch.clamp(257 - e, max=253))
    scale = (scale_exp << 23).view(torch.float32)
    scaled = values * scale[rows]
    hi = scaled.half()
    rest = scaled - hi.float()
    lo = torch.where(rest == rest, rest * LO_SCALE, 0.0).half()  # inf - inf: inf's lo is 0
    # Each row's three blocks follow each other, so the row's entries stay in column order.
    part_cols = torch.cat([cols + p * k for p in range(PARTS)])
    part_rows = rows.repeat(PARTS)
    order = torch.argsort(part_rows * (PARTS * k) + part_cols, stable=True)
    crow = csr.crow.to(torch.int64) * PARTS
    idx = torch.int32 if PARTS * max(csr.nnz, k) < 2**31 else torch.int64
    parts = CSRMatrix(crow.to(idx), part_cols[order].to(idx), torch.cat([hi, hi, lo])[order], (m, PARTS * k),
                      validate=False)
    factor = ((254 - scale_exp) << 23).view(torch.float32) / LO_SCALE
    csr.cache["fp16_parts"] = hit = (parts, factor)
    return hit


class ScatterTiles:
    """An M x K sparse matrix as scatter tiles, built from a ``CSRMatrix`` by ``from_csr``:
    ``tile_ptr`` (tiles + 1, int32, in fours) and ``entries`` (int32: byte offset << 16 | value bits);
    ``capacity``: the length of every tile's list where all are padded alike, else 0. An fp32 matrix's
    tiles are those of its fp16 parts (``parts`` = 3 K blocks) with ``row_factor``, its rows' factors,
    and ``lo_scale``, what its lo parts are scaled by."""

    def __init__(self, tile_ptr: torch.Tensor, entries: torch.Tensor, shape: tuple[int, int], *, block_m: int,
                 block_k: int, dtype: torch.dtype, nnz: int, capacity: int = 0, parts: int = 1,
                 row_factor: torch.Tensor | None = None, lo_scale: float = 0.0):
        self.tile_ptr = tile_ptr
        self.entries = entries
        self.shape = (int(shape[0]), int(shape[1]))
        self.block_m = int(block_m)
        self.block_k = int(block_k)
        self.dtype = dtype
        self.nnz = int(nnz)
        self.capacity = int(capacity)
        self.parts = int(parts)
        self.row_factor = row_factor
        self.lo_scale = float(lo_scale)  # X's lo parts are scaled alike (kernels.fp16_split)

    @property
    def tile_k(self) -> int:
        """K of the tiles: the matrix's, or its three fp16 blocks' for fp32."""
        return self.parts * self.shape[1]

    @property
    def device(self) -> torch.device:
        return self.entries.device

    @staticmethod
    def cache_key(block_m: int, block_k: int) -> tuple:
        return ("scatter", int(block_m), int(block_k))

    @classmethod
    def from_csr(cls, csr: CSRMatrix, block_m: int, block_k: int) -> ScatterTiles:
        """The scatter tiles of ``csr`` (cached in ``csr.cache``: built once per tile shape); of its
        fp16 parts where it is fp32 (``fp16_parts``)."""
        if csr.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise TypeError(f"ScatterTiles: values must be fp32, fp16 or bf16, got {csr.dtype}")
        if block_k < 1 or block_k % _SWIZZLE_COLUMNS or block_m < 1 or block_m % 8:
            raise ValueError(f"ScatterTiles: block_k must be a multiple of 64 and block_m of 8, got "
                             f"({block_m}, {block_k})")
        if block_m * block_k * 2 > PADDING:
            raise ValueError(f"ScatterTiles: a {block_m} x {block_k} tile's offsets do not fit 16 bits")
        key = cls.cache_key(block_m, block_k)
        hit = csr.cache.get(key)
        if hit is None:
            if csr.dtype == torch.float32:
                parts, factor = fp16_parts(csr)
                hit = cls._build(parts, block_m, block_k)
                hit.shape, hit.dtype, hit.parts = csr.shape, csr.dtype, PARTS
                hit.row_factor, hit.lo_scale = factor, LO_SCALE
            else:
                hit = cls._build(csr, block_m, block_k)
            csr.cache[key] = hit
        return hit

    @classmethod
    def _build(cls, csr: CSRMatrix, block_m: int, block_k: int) -> ScatterTiles:
        m, k = csr.shape
        dev = csr.device
        k_tiles = -(-k // block_k)
        tiles = -(-m // block_m) * k_tiles
        rows = csr.row_ids().to(torch.int64)
        cols = csr.col.to(torch.int64)
        # Padding of the CSR rows (pad_to) stores explicit zeros: storing them is harmless, but they
        # are dropped here, where they would only be stores.
        real = csr.values != 0
        rows, cols, values = rows[real], cols[real], csr.values[real]
        tile = (rows // block_m) * k_tiles + cols // block_k
        order = torch.argsort(tile, stable=True)  # CSR order within a tile: row-major
        tile, rows, cols, values = tile[order], rows[order], cols[order], values[order]
        counts = torch.bincount(tile, minlength=tiles)
        padded = (counts + 3) // 4 * 4
        capacity = fixed_capacity(padded, spare=_BOUNDS_AHEAD)
        if capacity:
            padded = torch.full_like(padded, capacity)
        ptr = torch.zeros(tiles + 1, dtype=torch.int64, device=dev)
        ptr[1:] = torch.cumsum(padded, 0)
        offsets = slot_offsets(rows % block_m, cols % block_k, block_m)
        position = store_positions(tile, offsets, counts, padded)
        entries = torch.full((int(ptr[-1]),), PADDING << 16, dtype=torch.int64, device=dev)
        bits = values.view(torch.int16).to(torch.int64) & 0xFFFF
        entries[ptr[:-1][tile] + position] = (offsets << 16) | bits
        # As int32: the offset's top bit may be set (tiles of 32 KB and more); the kernel masks it.
        entries = torch.where(entries >= 2**31, entries - 2**32, entries).to(torch.int32)
        if int(ptr[-1]) // 4 > 2**31 - 1:
            raise ValueError("ScatterTiles: more than 2**33 entries")
        return cls((ptr // 4).to(torch.int32), entries, csr.shape, block_m=block_m, block_k=block_k,
                   dtype=csr.dtype, nnz=int(real.sum()), capacity=capacity)

    # ---------------------------------------------------------------------------------- queries
    @property
    def padded_entries(self) -> int:
        return self.entries.numel()

    def to_dense(self) -> torch.Tensor:
        """The matrix, decoded from the entries (for tests and debugging); an fp32 matrix's is its
        fp16 parts [A_hi | A_hi | A_lo] (``fp16_parts``)."""
        m, k = self.shape[0], self.tile_k
        bm, bk = self.block_m, self.block_k
        dtype = torch.float16 if self.parts > 1 else self.dtype
        out = torch.zeros(m, k, dtype=dtype, device=self.device)
        k_tiles = -(-k // bk)
        counts = (self.tile_ptr[1:].to(torch.int64) - self.tile_ptr[:-1].to(torch.int64)) * 4
        tile = torch.repeat_interleave(torch.arange(counts.numel(), device=self.device), counts)
        e = self.entries.to(torch.int64) & 0xFFFFFFFF
        offsets, bits = e >> 16, e & 0xFFFF
        keep = offsets != PADDING
        # Offset -> (row, column) in the tile: the inverse of slot_offsets over the whole tile.
        r, c = torch.meshgrid(torch.arange(bm, device=self.device), torch.arange(bk, device=self.device),
                              indexing="ij")
        where = torch.full((bm * bk * 2,), -1, dtype=torch.int64, device=self.device)
        where[slot_offsets(r.reshape(-1), c.reshape(-1), bm)] = torch.arange(bm * bk, device=self.device)
        local = where[offsets[keep]]
        rows = (tile[keep] // k_tiles) * bm + local // bk
        cols = (tile[keep] % k_tiles) * bk + local % bk
        b = bits[keep]
        values = torch.where(b >= 2**15, b - 2**16, b).to(torch.int16).view(dtype)
        out[rows, cols] = values
        return out

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.tile_ptr, self.entries))

    def __repr__(self) -> str:
        m, k = self.shape
        return (f"ScatterTiles(shape=({m}, {k}), tiles={self.block_m}x{self.block_k}, nnz={self.nnz}, "
                f"entries={self.padded_entries}, capacity={self.capacity}, dtype={self.dtype}, device={self.device})")
