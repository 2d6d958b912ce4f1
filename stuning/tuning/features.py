"""Problem features: what keys the tuning database and what the cost model reads.

The same numbers serve both, so a database entry can be re-ranked by the model and a model can be
fitted from entries. Key features are bucketed (tokens to powers of two, density on a log grid,
row-length variation to tenths) so that nearby problems share an entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from stuning.db.entry import RATIO
from stuning.formats import CSRMatrix, nonempty_tile_counts
from stuning.kernels.sddmm_tiled import BLOCK_MS, BLOCK_NS

DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# Coarse row-length histogram: fraction of rows whose length / mean falls under each edge.
HIST_EDGES = (0.25, 0.5, 1.0, 2.0, 4.0)
# The features nearest-neighbour lookup compares, per op, and how (``stuning.db.feature_distance``;
# a tuple: log2(1 + x) of each), with the distance past which the cost model answers instead.
# SpMM compares sizes and density as ratios and row skew by difference (0.25 counts as a doubling):
# in a leave-one-out replay of the shipped database on the H200 (BENCHMARKS.md 7q) its neighbours'
# configs ran at 1.004x the tuned ones (geomean over 134 entries; worst 2.2x), where log2(1 + x)
# within 1.0 ran at 1.053x (worst 3.2x: it took a 98% entry's config for a 95% problem, the two
# densities 0.04 apart in log2(1 + x)) and the cost model alone at 1.068x.
# SDDMM compares the same way, within 1.0. In log2(1 + x) a mask thresholded at random (row lengths
# binomial: cv 0.14 at L = 1024, 95% zeros) was nearer the even-row 98% entry than its own density's,
# whose config ran up to 1.49x faster; the same replays on the H200 (BENCHMARKS.md 8x), log2(1 + x)
# against this: 1.016x -> 1.000x for such masks, 1.177x -> 1.122x (worst 3.07x -> 1.73x) leaving
# each even-row entry out. A with K strided (``a_t``) counts as half the reach away from A with K
# contiguous: an entry of the caller's layout answers first, the other's where none is near.
_DENSITY_AND_SKEW = {"density": RATIO, "row_cv": 0.25}
NEAREST_FEATURES = {
    "spmm": {"m": RATIO, "k": RATIO, "n": RATIO, **_DENSITY_AND_SKEW},
    "sddmm": {"m": RATIO, "n": RATIO, "k": RATIO, **_DENSITY_AND_SKEW, "a_t": 2.0},
    "semi24": ("m", "k", "n"),
}
NEAREST_MAX_DISTANCE = {"spmm": 2.0, "sddmm": 1.0, "semi24": 1.0}


def dtype_name(dtype: torch.dtype | str) -> str:
    if isinstance(dtype, str):
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(DTYPE_BYTES)}")
        return dtype
    if dtype not in DTYPE_NAMES:
        raise TypeError(f"unsupported dtype {dtype}; use one of {list(DTYPE_NAMES)}")
    return DTYPE_NAMES[dtype]


def alignment(n: int, cap: int = 16) -> int:
    """The largest power of two up to ``cap`` dividing ``n``."""
    a = 1
    while a < cap and n % (2 * a) == 0:
        a *= 2
    return a


def bucket_tokens(n: int) -> int:
    """Powers of two above 16; exact below, where decode shapes differ most."""
    return n if n <= 16 else 1 << math.ceil(math.log2(n))


def bucket_density(d: float) -> float:
    """Density on a grid of quarter-octaves (1, 0.84, 0.71, 0.59, 0.5, ...), 3 significant digits."""
    if d <= 0:
        return 0.0
    return float(f"{2 ** (round(math.log2(d) * 4) / 4):.3g}")


@dataclass(frozen=True)
class ProblemFeatures:
    op: str
    dtype: str
    values: dict = field(default_factory=dict)  # numeric features, all JSON numbers

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    def key_features(self) -> dict:
        v = self.values
        if self.op == "spmm":
            key = {
                "m": v["m"], "k": v["k"], "n": bucket_tokens(v["n"]), "n_align": v["n_align"],
                "density": bucket_density(v["density"]), "cv": round(v["row_cv"], 1),
            }
            if v.get("b_t"):  # B gathered from a transposed view: other sectors, other winners
                key["bt"] = 1
            return key
        if self.op == "sddmm":
            key = {
                "m": v["m"], "n": v["n"], "k": bucket_tokens(v["k"]), "k_align": v["k_align"],
                "density": bucket_density(v["density"]), "cv": round(v["row_cv"], 1),
            }
            if v.get("a_t"):  # A copied K-contiguous for some kernels, not for others: other winners
                key["at"] = 1
            return key
        key = {"m": v["m"], "k": v["k"], "n": bucket_tokens(v["n"]), "n_align": v["n_align"]}
        if v.get("b_t"):  # X^T read in place by the warpgroup kernel, copied for the others
            key["bt"] = 1
        return key

    def with_values(self, **changes) -> ProblemFeatures:
        return ProblemFeatures(self.op, self.dtype, {**self.values, **changes})


def _row_features(a: CSRMatrix) -> dict:
    s = a.stats()
    m, k = a.shape
    out = {
        "nnz": a.nnz,
        "density": a.density,  # padding excluded: a padded weight keys as its unpadded problem
        "row_mean": s.mean,
        "row_max": s.max,
        "row_cv": s.cv,
        "empty_rows": s.empty,
        "pad_to": a.pad_to,
        "idx_bytes": a.col.element_size(),
    }
    lengths = a.row_lengths().to("cpu", torch.float64)
    if s.mean > 0 and lengths.numel():
        ratio = lengths / s.mean
        prev = 0.0
        for edge in HIST_EDGES:
            out[f"hist_lt_{edge}"] = float((ratio < edge).double().mean() - prev)
            prev += out[f"hist_lt_{edge}"]
    return out


def spmm_features(a: CSRMatrix, n: int, dtype=None, *, b_transposed: bool = False) -> ProblemFeatures:
    """``b_transposed``: B is read through a transposed view (column-major, as ``SparseLinear``
    passes X^T at small token counts), a different problem for the kernel than a row-major B."""
    m, k = a.shape
    values = {"m": m, "k": k, "n": n, "n_align": alignment(n), **_row_features(a)}
    features = ProblemFeatures("spmm", dtype_name(dtype or a.dtype), values)
    return with_transposed_b(features) if b_transposed else features


def with_transposed_b(features: ProblemFeatures) -> ProblemFeatures:
    """The same SpMM or 2:4 problem with B read through a transposed view (keyed apart: ``bt=1``)."""
    return features.with_values(b_t=1)


def is_transposed(b) -> bool:
    """Whether a 2-D tensor is laid out column-major (a transposed view of a row-major one): its
    rows are gathered element by element, not as contiguous runs."""
    return b.dim() == 2 and b.shape[0] > 1 and b.shape[1] > 1 and b.stride(0) == 1 and b.stride(1) != 1


def tile_feature(block_m: int, block_n: int) -> str:
    """The feature counting a mask's nonempty block_m x block_n tiles (the tiled SDDMM's programs)."""
    return f"tiles_{block_m}x{block_n}"


def _tile_features(mask: CSRMatrix) -> dict:
    # Counted, not estimated from the density: a structured mask (local windows, blocks) leaves most
    # tiles empty where a uniform one of the same density fills them all.
    counts = nonempty_tile_counts(mask, [(bm, bn) for bm in BLOCK_MS for bn in BLOCK_NS])
    return {tile_feature(bm, bn): c for (bm, bn), c in (counts or {}).items()}


def sddmm_features(mask: CSRMatrix, k: int, dtype=None, *, a_transposed: bool = False) -> ProblemFeatures:
    """``a_transposed``: A has K strided (a weight gradient's dY^T, a transposed view), which costs
    the gather kernel a copy of it, the tiled kernel one only where M is not whole tiles, and the
    dense kernel nothing (``kernels/sddmm.copies_for``; keyed apart: ``at=1``). B's layout is not
    keyed: it costs only the gather kernel (and fp32 tiles) a copy, and such problems are tuned with
    B row-major, as a weight gradient's X is."""
    m, n = mask.shape
    values = {"m": m, "n": n, "k": k, "k_align": alignment(k), "a_t": int(a_transposed), **_row_features(mask),
              **_tile_features(mask)}
    return ProblemFeatures("sddmm", dtype_name(dtype or mask.dtype), values)


def semi24_features(m: int, k: int, n: int, dtype, *, b_transposed: bool = False) -> ProblemFeatures:
    """``b_transposed``: X is read through a transposed view (``SparseLinear``'s X^T)."""
    values = {"m": m, "k": k, "n": n, "n_align": alignment(n), "density": 0.5}
    features = ProblemFeatures("semi24", dtype_name(dtype), values)
    return with_transposed_b(features) if b_transposed else features


def synthetic_spmm_features(m: int, k: int, n: int, density: float, dtype, row_cv: float = 0.0) -> ProblemFeatures:
    """Features of a problem described by numbers alone (model-only tuning, no matrix at hand)."""
    mean = density * k
    values = {
        "m": m, "k": k, "n": n, "n_align": alignment(n), "nnz": int(round(mean * m)), "density": density,
        "row_mean": mean, "row_max": min(k, int(math.ceil(mean * (1 + 3 * row_cv)))), "row_cv": row_cv,
        "empty_rows": 0, "pad_to": 1, "idx_bytes": 4,
    }
    return ProblemFeatures("spmm", dtype_name(dtype), values)


def synthetic_sddmm_features(m: int, n: int, k: int, density: float, dtype, row_cv: float = 0.0) -> ProblemFeatures:
    f = synthetic_spmm_features(m, n, k, density, dtype, row_cv)
    values = {**f.values, "m": m, "n": n, "k": k, "k_align": alignment(k), "a_t": 0}
    values.pop("n_align")
    return ProblemFeatures("sddmm", f.dtype, values)
