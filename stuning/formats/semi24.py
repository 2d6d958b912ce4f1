"""2:4 semi-structured matrices: at most two nonzeros in every group of four along a row."""

from __future__ import annotations

import torch

from stuning.formats.stored import CompilableMatrix

# One int32 word holds the 4-bit masks of 8 groups (32 dense columns), so the masks cost K / 8 bytes
# per row: 1/8 of a byte per dense element, as 2-bit positions would. A mask rather than positions
# because the kernel rebuilds a group with bit tests and shifts of the value pair, with no compares.
GROUPS_PER_MASK_WORD = 8
VALUES_PER_META_WORD = 2 * GROUPS_PER_MASK_WORD
COLS_PER_META_WORD = 4 * GROUPS_PER_MASK_WORD


class Semi24Matrix(CompilableMatrix):
    """An M x K matrix with at most 2 nonzeros in each aligned group of 4 columns of a row.

    Stored as ``values`` (M, K/2), the two kept entries of each group in column order, and ``masks``
    (M, ceil(K/32)) int32: group ``g`` of a row has its 4-bit mask in bits ``4*(g % 8)`` and up of
    word ``g // 8``, bit ``t`` set when column ``4g + t`` is kept; every stored group has exactly two
    bits set (a group with fewer than two nonzeros keeps zeros) and the bits past the last group are 0.
    If K is not a multiple of 4 and ``pad=True`` was asked for, the stored K is rounded up with zero
    columns (``k_stored``) while ``shape`` keeps the logical K.
    """

    def __init__(self, values: torch.Tensor, masks: torch.Tensor, shape: tuple[int, int], *, validate: bool = False):
        m, k = int(shape[0]), int(shape[1])
        k_stored = (k + 3) // 4 * 4
        if values.shape != (m, k_stored // 2):
            raise ValueError(f"Semi24Matrix: values must be ({m}, {k_stored // 2}), got {tuple(values.shape)}")
        n_words = (k_stored // 2 + VALUES_PER_META_WORD - 1) // VALUES_PER_META_WORD
        if masks.shape != (m, n_words) or masks.dtype != torch.int32:
            raise ValueError(
                f"Semi24Matrix: masks must be int32 ({m}, {n_words}), got {masks.dtype} {tuple(masks.shape)}"
            )
        if values.device != masks.device:
            raise ValueError(f"Semi24Matrix: values on {values.device} but masks on {masks.device}")
        self.values = values
        self.masks = masks
        self.shape = (m, k)
        self.k_stored = k_stored
        # Layers above keep what they derive from this matrix here (e.g. the configs chosen for it).
        self.cache: dict = {}
        self._register()
        if validate:
            self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` unless every stored group keeps exactly two columns and the bits past
        the last group are clear (reads the masks on the host)."""
        groups = self.k_stored // 4
        nibbles = unpack_masks(self.masks, self.masks.shape[1] * GROUPS_PER_MASK_WORD)
        kept = sum((nibbles >> t) & 1 for t in range(4))
        bad = kept[:, :groups] != 2
        if bad.any():
            row, group = (int(v) for v in torch.nonzero(bad)[0])
            raise ValueError(
                f"Semi24Matrix: corrupt masks: row {row}, group {group} (columns {4 * group}..{4 * group + 3}) "
                f"keeps {int(kept[row, group])} columns; every group must keep exactly 2"
            )
        if (nibbles[:, groups:] != 0).any():
            raise ValueError("Semi24Matrix: corrupt masks: bits set past the last group of a row")

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
        return cls(values, masks_from_positions(keep_pos), (m, k))

    # ---------------------------------------------------------------------------------- queries
    def positions(self) -> torch.Tensor:
        """The position (0..3) within its group of every kept value, (M, K/2) int64."""
        nibbles = unpack_masks(self.masks, self.k_stored // 4)
        bits = (nibbles.unsqueeze(-1) >> torch.arange(4, device=nibbles.device)) & 1
        # The two set bits of each group, lowest first (a stable sort puts kept columns first).
        order = torch.sort(1 - bits, dim=-1, stable=True).indices[..., :2]
        return order.reshape(self.shape[0], self.k_stored // 2)

    def to_dense(self) -> torch.Tensor:
        m, k = self.shape
        pos = self.positions()
        cols = torch.arange(self.k_stored // 2, device=pos.device) // 2 * 4 + pos
        out = torch.zeros(m, self.k_stored, dtype=self.values.dtype, device=self.values.device)
        out.scatter_(1, cols, self.values)
        return out[:, :k]

    def to(self, device=None, dtype: torch.dtype | None = None) -> Semi24Matrix:
        values = self.values.to(device=device, dtype=dtype)
        return Semi24Matrix(values, self.masks.to(values.device), self.shape)

    def nbytes(self) -> int:
        return self.values.numel() * self.values.element_size() + self.masks.numel() * 4

    def mma_metadata(self) -> torch.Tensor:
        """The masks as the sparse tensor-core MMA reads them (``sparse_mma_metadata``), built on first
        use and kept while the masks stay the same tensor, unmodified (in-place changes are seen
        through the tensor's version counter, which inference-mode tensors do not keep)."""
        return self._derived("mma_metadata", lambda: sparse_mma_metadata(self.masks, *self.shape))

    def wgmma_metadata(self, ks: int) -> torch.Tensor:
        """The masks as the sparse warpgroup MMA kernel reads them for steps of 64 ``ks`` columns
        (``wgmma_metadata``), built and kept as ``mma_metadata`` is."""
        return self._derived(f"wgmma_metadata{ks}", lambda: wgmma_metadata(self.masks, *self.shape, ks))

    def _derived(self, name: str, build):
        version = None if self.masks.is_inference() else self.masks._version
        key = (self.masks.data_ptr(), version, self.masks.shape)
        held = self.cache.get(name)
        if held is None or held[0] != key:
            held = (key, build())
            self.cache[name] = held
        return held[1]

    def __repr__(self) -> str:
        return f"Semi24Matrix(shape={self.shape}, dtype={self.dtype}, device={self.device})"


# The sparse MMA (m16n8k32) takes a kept pair's positions a < b as the nibble a | b << 2; a group past
# K (mask 0: its values and X's rows are zero) gets positions (0, 1), a valid nibble.
_MMA_NIBBLE = {0b0011: 0x4, 0b0101: 0x8, 0b1001: 0xC, 0b0110: 0x9, 0b1010: 0xD, 0b1100: 0xE, 0: 0x4}
MMA_TILE_ROWS = 16
MMA_STEP_COLS = 64


def sparse_mma_metadata(masks: torch.Tensor, m: int, k: int) -> torch.Tensor:
    """4-bit group masks -> the metadata registers of ``stuning.kernels.semi24_sparse_mma``:
    (ceil(M/16), ceil(K/64), 32) int32, as many bytes as the masks (rounded up to whole tiles).

    Word [t, s, 4 g + q] is lane (g, q)'s register for rows 16 t .. 16 t + 15 and columns
    64 s .. 64 s + 63: it serves the step's MMA kk = q // 2 (sparsity selector kk) with its groups
    4 u .. 4 u + 3 (u = q % 2), row 16 t + g in nibbles 0-3 and row 16 t + g + 8 in nibbles 4-7 (the
    lane layout measured on the H200, scripts/probe_mma_sp.py). The kernel feeds the MMAs W's groups
    out of order: group 4 u + i of MMA kk is the step's group 4 i + 2 kk + u.
    """
    tiles, steps = -(-m // MMA_TILE_ROWS), -(-k // MMA_STEP_COLS)
    nib = _mma_nibbles(masks, m, k, tiles * MMA_TILE_ROWS, steps * MMA_STEP_COLS // 4)
    nib = nib.reshape(tiles, 2, 8, steps, 4, 2, 2)  # [t, h, g, s, i, kk, u]: row 16 t + 8 h + g, group 4 i + 2 kk + u
    return _lane_words(nib.permute(0, 1, 2, 3, 5, 6, 4)).contiguous()


def wgmma_metadata(masks: torch.Tensor, m: int, k: int, ks: int) -> torch.Tensor:
    """4-bit group masks -> the metadata of ``stuning.kernels.semi24_wgmma_sp``, which feeds the MMAs
    W's groups in column order: (16 ceil(M/256), 64 ceil(K/128)) int32, row t holding the words of
    rows 16 t .. 16 t + 15, 32 words per 64-column step.

    The words are ``sparse_mma_metadata``'s (the same lanes: the sparse warpgroup MMA reads them as
    mma.sp does) but group j of a step's MMA kk is the step's group 8 kk + j. The array is padded to
    16 tiles (the tallest TMA box) and to an even number of steps with the valid nibble 0x4, so no
    box reads past it (TMA's zero fill would name no valid pair). With ``ks`` 2 a lane's words of the
    two steps of a 128-column stage are adjacent, so the lane loads both at once.
    """
    if ks not in (1, 2):
        raise ValueError(f"wgmma_metadata: ks must be 1 or 2 (64-column steps a stage), got {ks}")
    tiles, steps = 16 * -(-m // 256), 2 * -(-k // 128)
    nib = _mma_nibbles(masks, m, k, tiles * MMA_TILE_ROWS, steps * MMA_STEP_COLS // 4)
    word = _lane_words(nib.reshape(tiles, 2, 8, steps, 2, 2, 4))  # [t, h, g, s, kk, u, i]: group 8 kk + 4 u + i
    if ks == 2:
        word = word.reshape(tiles, steps // 2, 2, 32).transpose(2, 3)
    return word.reshape(tiles, steps * 32).contiguous()


def _mma_nibbles(masks: torch.Tensor, m: int, k: int, rows: int, groups: int) -> torch.Tensor:
    """(rows, groups) int64 MMA nibbles of the masks, padded with the valid nibble 0x4."""
    lut = torch.zeros(16, dtype=torch.int64, device=masks.device)
    for mask, nibble in _MMA_NIBBLE.items():
        lut[mask] = nibble
    nib = torch.full((rows, groups), 0x4, dtype=torch.int64, device=masks.device)
    stored = (k + 3) // 4
    nib[:m, :stored] = lut[unpack_masks(masks, stored)]
    return nib


def _lane_words(nib: torch.Tensor) -> torch.Tensor:
    """[t, h, g, s, kk, u, i] nibbles (row 16 t + 8 h + g; group i of lane u's four for selector kk)
    -> (t, s, 32) int32 words, lane 4 g + 2 kk + u: row g in nibbles 0-3, row g + 8 in nibbles 4-7."""
    half = (nib << (4 * torch.arange(4, device=nib.device))).sum(-1)  # [t, h, g, s, kk, u]: a row's 16 bits
    word = half[:, 0] | (half[:, 1] << 16)  # [t, g, s, kk, u]
    word = word.permute(0, 2, 1, 3, 4).reshape(nib.shape[0], nib.shape[3], 32)
    return torch.where(word >= 2**31, word - 2**32, word).to(torch.int32)


def masks_from_positions(keep_pos: torch.Tensor) -> torch.Tensor:
    """(M, G, 2) kept positions (0..3) of each group -> (M, ceil(G/8)) int32 words of 4-bit masks."""
    m, g = keep_pos.shape[0], keep_pos.shape[1]
    nibbles = (1 << keep_pos.to(torch.int64)).sum(-1)
    return _pack_nibbles(nibbles.reshape(m, g))


def masks_from_packed_positions(words: torch.Tensor, k_stored: int) -> torch.Tensor:
    """Masks from the layout of stuning <= 0.1 (2-bit positions, 16 per int32 word), for old checkpoints."""
    m = words.shape[0]
    shifts = 2 * torch.arange(VALUES_PER_META_WORD, device=words.device, dtype=torch.int64)
    pos = ((words.to(torch.int64) & 0xFFFFFFFF).unsqueeze(-1) >> shifts) & 3
    pos = pos.reshape(m, words.shape[1] * VALUES_PER_META_WORD)[:, : k_stored // 2]
    return masks_from_positions(pos.reshape(m, k_stored // 4, 2))


def unpack_masks(words: torch.Tensor, groups: int) -> torch.Tensor:
    """(M, W) int32 words -> the (M, groups) 4-bit masks, int64."""
    m = words.shape[0]
    shifts = 4 * torch.arange(GROUPS_PER_MASK_WORD, device=words.device, dtype=torch.int64)
    nibbles = ((words.to(torch.int64) & 0xFFFFFFFF).unsqueeze(-1) >> shifts) & 0xF
    return nibbles.reshape(m, words.shape[1] * GROUPS_PER_MASK_WORD)[:, :groups]


def _pack_nibbles(nibbles: torch.Tensor) -> torch.Tensor:
    m, g = nibbles.shape
    n_words = (g + GROUPS_PER_MASK_WORD - 1) // GROUPS_PER_MASK_WORD
    padded = torch.zeros(m, n_words * GROUPS_PER_MASK_WORD, dtype=torch.int64, device=nibbles.device)
    padded[:, :g] = nibbles
    shifts = 4 * torch.arange(GROUPS_PER_MASK_WORD, device=nibbles.device, dtype=torch.int64)
    words = (padded.reshape(m, n_words, GROUPS_PER_MASK_WORD) << shifts).sum(-1)
    # Wrap into int32's range: the top group's mask reaches the sign bit.
    words = torch.where(words >= 2**31, words - 2**32, words)
    return words.to(torch.int32)
