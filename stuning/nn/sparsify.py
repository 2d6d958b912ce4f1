"""``stuning.sparsify``: replace a model's dense layers by sparse ones, in place, and say what it saved.

Which layers convert, and how, is the table ``CONVERTERS`` (layer type -> function building its sparse
replacement); ``UNSUPPORTED`` says which layers of a convertible type must stay dense (a grouped
convolution), and why. The report reads every replacement through its ``sparse_weight``, whatever
the layer type.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from torch import nn

from stuning.nn.conv import SparseConv2d
from stuning.nn.linear import SparseLayer, SparseLinear
from stuning.nn.weights import PATTERN_FORMATS

DEFAULT_MIN_SIZE = 1 << 16  # weights smaller than 256 x 256 rarely run faster sparse


def _linear(module: nn.Linear, fmt: str, sparsity: float | None, options: dict) -> nn.Module:
    return SparseLinear.from_linear(module, fmt, sparsity=sparsity, **options)


def _conv2d(module: nn.Conv2d, fmt: str, sparsity: float | None, options: dict) -> nn.Module:
    return SparseConv2d.from_conv(module, fmt, sparsity=sparsity, **options)


# Exact types: subclasses (MultiheadAttention's out_proj, quantized linears) are read by their
# parents as dense weights, so replacing them would break the parent.
CONVERTERS: dict[type, Callable[[nn.Module, str, float | None, dict], nn.Module]] = {
    nn.Linear: _linear, nn.Conv2d: _conv2d}
# Layer type -> why one of its layers cannot convert (None: it can); such a layer is skipped, not an error.
UNSUPPORTED: dict[type, Callable[[nn.Module], str | None]] = {nn.Conv2d: SparseConv2d.unsupported}


@dataclass
class LayerReport:
    name: str
    kind: str  # the replaced layer's class name
    shape: tuple[int, ...]  # the weight's shape
    format: str
    sparsity: float  # fraction of the weight's entries that are zero
    dense_bytes: int  # the weight stored dense (bias excluded: it is the same either way)
    sparse_bytes: int  # values plus indices or metadata

    @property
    def bytes_saved(self) -> int:
        return self.dense_bytes - self.sparse_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "shape": list(self.shape), "bytes_saved": self.bytes_saved}


@dataclass
class SparsifyReport:
    layers: list[LayerReport] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # layer name -> why it was left dense

    @property
    def dense_bytes(self) -> int:
        return sum(r.dense_bytes for r in self.layers)

    @property
    def sparse_bytes(self) -> int:
        return sum(r.sparse_bytes for r in self.layers)

    @property
    def bytes_saved(self) -> int:
        return self.dense_bytes - self.sparse_bytes

    def to_dict(self) -> dict:
        return {
            "layers": [r.to_dict() for r in self.layers],
            "skipped": dict(self.skipped),
            "totals": {"layers": len(self.layers), "dense_bytes": self.dense_bytes,
                       "sparse_bytes": self.sparse_bytes, "bytes_saved": self.bytes_saved},
        }

    def rows(self) -> list[list[str]]:
        """Table rows (the totals last), for ``rich`` or plain text."""
        out = [[r.name, "x".join(map(str, r.shape)), r.format, f"{r.sparsity:.1%}", _size(r.dense_bytes),
                _size(r.sparse_bytes), _size(r.bytes_saved)] for r in self.layers]
        out.append([f"total ({len(self.layers)} layers)", "", "", "", _size(self.dense_bytes),
                    _size(self.sparse_bytes), _size(self.bytes_saved)])
        return out

    COLUMNS = ("layer", "shape", "format", "sparsity", "dense", "sparse", "saved")

    def table(self):
        """A ``rich.table.Table`` of the layers and the totals."""
        from rich.table import Table

        t = Table(title="sparsified layers")
        for c in self.COLUMNS:
            t.add_column(c)
        for row in self.rows():
            t.add_row(*row)
        return t

    def __str__(self) -> str:
        rows = [list(self.COLUMNS), *self.rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.COLUMNS))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def _skip_rule(skip) -> Callable[[str, nn.Module], bool]:
    """Names (glob patterns such as ``"lm_head"`` or ``"*.attention.*"``) or ``(name, module) -> bool``."""
    if skip is None:
        return lambda name, module: False
    rules = [skip] if isinstance(skip, str) or callable(skip) else list(skip)
    for rule in rules:
        if not (isinstance(rule, str) or callable(rule)):
            raise TypeError(f"sparsify: skip takes names, glob patterns or predicates, got {rule!r}")

    def skipped(name: str, module: nn.Module) -> bool:
        return any(fnmatch.fnmatchcase(name, r) if isinstance(r, str) else r(name, module) for r in rules)

    return skipped


def sparsify(model: nn.Module, *, sparsity: float | None = None, pattern: str = "unstructured",
             min_size: int = DEFAULT_MIN_SIZE, skip: str | Callable | Iterable | None = None, backend: str = "auto",
             pad_to: int = 1, dense_fallback: bool = False) -> SparsifyReport:
    """Replace ``model``'s ``nn.Linear`` and ``nn.Conv2d`` layers by ``SparseLinear`` and ``SparseConv2d``
    in place; returns what changed.

    ``pattern``: ``"unstructured"`` (CSR) or ``"2:4"``. ``sparsity``: magnitude-prune each weight to
    this fraction of zeros (2:4 takes 0.5: two of every four kept), or ``None`` to keep the zeros the
    weights already have (a 2:4 weight must then be 2:4 already). Layers whose weight has fewer than
    ``min_size`` entries, or that ``skip`` names, stay dense and are listed in ``report.skipped``.
    A layer shared by several parents is replaced everywhere by the same sparse layer. Grouped and
    depthwise convolutions stay dense, the reason in ``report.skipped``. A convolution's sparsity is
    over its whole weight; 2:4 groups run along its flattened C_in x kh x kw rows.
    ``dense_fallback``: set on every new layer (see ``SparseLinear``): run dense where pretuning
    measured the dense product faster.
    """
    if pattern not in PATTERN_FORMATS:
        raise ValueError(f"sparsify: unknown pattern {pattern!r}; use 'unstructured' or '2:4'")
    fmt = PATTERN_FORMATS[pattern]
    if sparsity is not None and not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsify: sparsity must be a fraction of zeros in [0, 1), got {sparsity}")
    options = {"backend": backend, "pad_to": pad_to}
    if type(model) in CONVERTERS:
        raise ValueError(f"sparsify: the model is a single {type(model).__name__} layer; replace it yourself, "
                         "e.g. with SparseLinear.from_linear or SparseConv2d.from_conv")
    skipped_by_rule = _skip_rule(skip)
    report = SparsifyReport()
    replaced: dict[int, nn.Module] = {}
    for name, module in model.named_modules():
        convert = CONVERTERS.get(type(module))
        if convert is None:
            continue
        weight = module.weight
        if skipped_by_rule(name, module):
            report.skipped[name] = "skip"
            continue
        why = UNSUPPORTED.get(type(module), lambda m: None)(module)
        if why is not None:
            report.skipped[name] = why
            continue
        if weight.numel() < min_size:
            report.skipped[name] = f"{weight.numel()} weights < min_size {min_size}"
            continue
        try:
            sparse = convert(module, fmt, sparsity, options)
        except ValueError as e:
            raise ValueError(f"sparsify: layer {name!r}: {e}") from None
        sparse.train(module.training)
        sparse.dense_fallback = dense_fallback
        replaced[id(module)] = sparse
        w = sparse.sparse_weight
        report.layers.append(LayerReport(name, type(module).__name__, tuple(weight.shape), w.format,
                                         sparse.sparsity, w.dense_bytes(), w.sparse_bytes()))
    for parent in list(model.modules()):
        # Not named_children(): it lists a module held twice by one parent only once.
        for child_name, child in list(parent._modules.items()):
            if id(child) in replaced:
                setattr(parent, child_name, replaced[id(child)])
    return report


def set_dense_fallback(model: nn.Module, enabled: bool = True) -> int:
    """Turn ``dense_fallback`` on (or off) for every sparse layer of ``model`` (see ``SparseLinear``);
    returns how many layers there are. Turning it off frees the dense copies made so far."""
    layers = [m for m in model.modules() if isinstance(m, SparseLayer)]
    for layer in layers:
        layer.dense_fallback = enabled
        if not enabled:
            layer.sparse_weight.release_dense()
    return len(layers)
