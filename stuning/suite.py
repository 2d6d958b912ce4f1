"""The standard benchmark suite, as data: the problems every table and the tuner are measured on.

Weight shapes of three model families (Transformer-base, BERT-base, Llama-7B) at the sparsities of
pruned networks, with uniform or skewed row lengths, times the widths N of a batch of tokens (plus
odd N that break alignment). SDDMM adds attention-like masks (L x L, head dimension K) and the
weight-gradient shapes (dY @ X^T sampled at a pruned weight's nonzeros). 2:4 takes the weight
shapes and N values in fp16/bf16.

Every ``*_suite`` function takes optional filters and returns a list of frozen case dataclasses;
``PRESETS`` holds named slices (``quick`` for smoke runs, ``first-table`` for the first benchmark
table) and :func:`preset` expands one.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import torch

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

SPARSITIES = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98)
SKEWS = (0.0, 0.4)  # coefficient of variation of the row lengths: uniform rows, skewed rows
WEIGHT_SHAPES = {  # M x K of the weight matrices (out_features x in_features)
    "transformer": ((512, 512), (2048, 512), (512, 2048)),
    "bert": ((768, 3072), (3072, 768)),
    "llama7b": ((4096, 4096), (11008, 4096), (4096, 11008)),
}
N_VALUES = (16, 128, 512, 2048, 8192)
ODD_NS = (49, 100, 196)
ALL_NS = N_VALUES + ODD_NS
ATTENTION_LS = (1024, 2048, 4096)
ATTENTION_KS = (64, 128)
WGRAD_KS = (256, 2048)
SPMM_DTYPES = ("fp32", "fp16", "bf16")
SDDMM_DTYPES = ("fp32", "fp16", "bf16")
SEMI24_DTYPES = ("fp16", "bf16")


def _pct(s: float) -> str:
    return f"{100 * s:g}"


@dataclass(frozen=True)
class SpMMCase:
    """Y = A @ B, A (m x k) sparse CSR, B (k x n) dense."""

    m: int
    k: int
    n: int
    sparsity: float
    skew_cv: float
    dtype: str

    op = "spmm"

    @property
    def name(self) -> str:
        return f"spmm_{self.m}x{self.k}_n{self.n}_s{_pct(self.sparsity)}_cv{self.skew_cv:g}_{self.dtype}"

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def as_dict(self) -> dict:
        return {"op": self.op, "name": self.name, **asdict(self)}


@dataclass(frozen=True)
class SDDMMCase:
    """(A @ B) at the nonzeros of a mask: mask m x n, A m x k, B k x n. ``family`` is ``attention``
    (m = n = L, k the head dimension) or ``wgrad`` (a weight shape, k the tokens of a batch).
    ``k_strided``: A a transposed view and B row-major, K strided in both, as a weight gradient
    ``dY^T @ X`` hands them; by default both are K-contiguous, as attention's Q and K^T are."""

    m: int
    n: int
    k: int
    sparsity: float
    dtype: str
    family: str = "wgrad"
    k_strided: bool = False

    op = "sddmm"

    @property
    def name(self) -> str:
        shape = f"L{self.m}" if self.family == "attention" else f"{self.m}x{self.n}"
        layout = "_kt" if self.k_strided else ""
        return f"sddmm_{self.family}_{shape}_k{self.k}{layout}_s{_pct(self.sparsity)}_{self.dtype}"

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def as_dict(self) -> dict:
        return {"op": self.op, "name": self.name, **asdict(self)}


@dataclass(frozen=True)
class Semi24Case:
    """Y = W @ X, W (m x k) 2:4 semi-structured, X (k x n) dense."""

    m: int
    k: int
    n: int
    dtype: str

    op = "semi24"

    @property
    def name(self) -> str:
        return f"semi24_{self.m}x{self.k}_n{self.n}_{self.dtype}"

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def as_dict(self) -> dict:
        return {"op": self.op, "name": self.name, **asdict(self)}


# ------------------------------------------------------------------------------------- filters
def _dtype_name(d) -> str:
    if isinstance(d, torch.dtype):
        for name, t in DTYPES.items():
            if t == d:
                return name
        raise ValueError(f"unsupported dtype {d}")
    d = str(d).lower().removeprefix("torch.")
    aliases = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
    d = aliases.get(d, d)
    if d not in DTYPES:
        raise ValueError(f"unknown dtype {d!r}; known: {sorted(DTYPES)}")
    return d


def _fraction(s) -> float:
    s = float(s)
    return s / 100 if s > 1 else s  # 90 and 0.9 both mean 90% zeros


def parse_shape(s) -> tuple[int, int]:
    if isinstance(s, str):
        m, k = s.lower().split("x")
        return int(m), int(k)
    m, k = s
    return int(m), int(k)


def resolve_shapes(shapes: Iterable | None) -> set[tuple[str, tuple[int, int]]] | None:
    """Filter entries -> (family, shape) pairs. An entry is a group name (``transformer``, ``bert``,
    ``llama7b``: weight shapes; ``attention``: the SDDMM attention masks), ``"MxK"`` or an (M, K) pair
    (matching any family). Family ``*`` matches all."""
    if shapes is None:
        return None
    out: set[tuple[str, tuple[int, int]]] = set()
    for s in shapes:
        key = s.lower() if isinstance(s, str) else None
        if key in WEIGHT_SHAPES:
            out |= {("weight", sh) for sh in WEIGHT_SHAPES[key]}
        elif key == "attention":
            out |= {("attention", (L, L)) for L in ATTENTION_LS}
        else:
            out.add(("*", parse_shape(s)))
    return out


def _shape_ok(sel, family: str, shape: tuple[int, int]) -> bool:
    return sel is None or (family, shape) in sel or ("*", shape) in sel


def _in(value, allowed, conv=lambda v: v) -> bool:
    return allowed is None or any(abs(conv(a) - value) < 1e-9 for a in allowed)


def _dtypes_in(names: tuple[str, ...], allowed) -> list[str]:
    """The suite's dtypes ``names`` that the ``allowed`` filter (torch dtypes or names) keeps."""
    if allowed is None:
        return list(names)
    wanted = {_dtype_name(d) for d in allowed}
    return [n for n in names if n in wanted]


def _weight_products(shapes, ns) -> list[tuple[int, int, int]]:
    """(m, k, n) over the weight shapes x N that the filters keep, in suite order."""
    sel = resolve_shapes(shapes)
    return [(m, k, n) for (m, k) in _weight_shapes() if _shape_ok(sel, "weight", (m, k)) for n in ALL_NS
            if _in(n, ns, int)]


def _pick(cases: list, limit: int | None, sample: int | None, seed: int) -> list:
    if sample is not None and sample < len(cases):
        keep = sorted(random.Random(seed).sample(range(len(cases)), sample))
        cases = [cases[i] for i in keep]
    return cases[:limit] if limit is not None else cases


def _weight_shapes() -> list[tuple[int, int]]:
    return [sh for group in WEIGHT_SHAPES.values() for sh in group]


# -------------------------------------------------------------------------------------- suites
def spmm_suite(
    *,
    shapes=None,
    ns=None,
    sparsities=None,
    dtypes=None,
    skews=None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[SpMMCase]:
    """Weight shapes x N x sparsity x row skew x dtype (filters: None keeps all)."""
    cases = [
        SpMMCase(m, k, n, s, cv, dt)
        for (m, k, n) in _weight_products(shapes, ns)
        for s in SPARSITIES
        if _in(s, sparsities, _fraction)
        for cv in SKEWS
        if _in(cv, skews, float)
        for dt in _dtypes_in(SPMM_DTYPES, dtypes)
    ]
    return _pick(cases, limit, sample, seed)


def sddmm_suite(
    *,
    shapes=None,
    ks=None,
    sparsities=None,
    dtypes=None,
    families=None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[SDDMMCase]:
    """Attention masks (L x L, K in ATTENTION_KS) and weight-gradient masks (weight shapes, K in
    WGRAD_KS), x sparsity x dtype. ``ks`` filters the inner dimension K."""
    sel = resolve_shapes(shapes)
    problems = [("attention", (L, L), K) for L in ATTENTION_LS for K in ATTENTION_KS]
    problems += [("wgrad", sh, K) for sh in _weight_shapes() for K in WGRAD_KS]
    cases = [
        SDDMMCase(m, n, k, s, dt, fam)
        for fam, (m, n), k in problems
        if _shape_ok(sel, "attention" if fam == "attention" else "weight", (m, n))
        and (ks is None or k in {int(x) for x in ks})
        and (families is None or fam in families)
        for s in SPARSITIES
        if _in(s, sparsities, _fraction)
        for dt in _dtypes_in(SDDMM_DTYPES, dtypes)
    ]
    return _pick(cases, limit, sample, seed)


def semi24_suite(
    *,
    shapes=None,
    ns=None,
    dtypes=None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[Semi24Case]:
    """Weight shapes x N x dtype (fp16/bf16). Sparsity and skew filters do not apply (2:4 is 50%)."""
    cases = [Semi24Case(m, k, n, dt) for (m, k, n) in _weight_products(shapes, ns)
             for dt in _dtypes_in(SEMI24_DTYPES, dtypes)]
    return _pick(cases, limit, sample, seed)


SUITES = {"spmm": spmm_suite, "sddmm": sddmm_suite, "semi24": semi24_suite}

# Named slices: per op, the keyword filters of its suite function.
PRESETS: dict[str, dict[str, dict]] = {
    # A few minutes' smoke run on a GPU touching every op, dtype, skew and an odd N.
    "quick": {
        "spmm": dict(shapes=["512x2048", "4096x4096"], ns=[16, 100, 128], sparsities=[0.9, 0.98], sample=24),
        "sddmm": dict(shapes=["attention", "4096x4096"], ks=[64, 256], sparsities=[0.9, 0.98], sample=12),
        "semi24": dict(shapes=["512x2048", "4096x4096"], ns=[16, 100, 128]),
    },
    # The first benchmark table: BERT and Llama weights, N in {16, 128, 2048}, 70-98% zeros.
    "first-table": {
        "spmm": dict(shapes=["bert", "llama7b"], ns=[16, 128, 2048], sparsities=[0.7, 0.9, 0.95, 0.98]),
        "sddmm": dict(shapes=["bert", "llama7b"], sparsities=[0.7, 0.9, 0.95, 0.98]),
        "semi24": dict(shapes=["bert", "llama7b"], ns=[16, 128, 2048]),
    },
    "full": {"spmm": {}, "sddmm": {}, "semi24": {}},
}


def preset(name: str, ops: Iterable[str] | None = None, **overrides) -> dict[str, list]:
    """The cases of a named preset, per op; ``overrides`` (non-None) replace the preset's filters
    for every op whose suite function takes them."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {sorted(PRESETS)}")
    out = {}
    for op, filters in PRESETS[name].items():
        if ops is not None and op not in ops:
            continue
        kw = dict(filters)
        fn = SUITES[op]
        accepted = fn.__code__.co_varnames[: fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount]
        kw.update({k: v for k, v in overrides.items() if v is not None and k in accepted})
        out[op] = fn(**kw)
    return out
