"""A layer's sparse weight in one format: its tensors, its kernel, its tuning problems, its PyTorch twin.

Layers (``SparseLinear``; ``SparseConv2d``, whose M x K is its GEMM view) hold their weight as plain
tensors (module buffers) and wrap them in a ``SparseWeight``, which knows, for its format, how to
compress a dense weight, how to run ``W @ X`` through the Triton kernel and through PyTorch, and
what the tuner's features are for ``W @ X`` with N columns. Everything a forward needs per call is computed here once.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod

import torch

from stuning.formats import CSRMatrix, Semi24Matrix, magnitude_prune
from stuning.formats.semi24 import GROUPS_PER_MASK_WORD, VALUES_PER_META_WORD, masks_from_packed_positions
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels import spmm as spmm_kernel
from stuning.ops import semi24_mm, spmm
from stuning.ops.inputs import dense_is_faster, tuned_config
from stuning.tuning.features import (
    ProblemFeatures,
    alignment,
    is_transposed,
    semi24_features,
    spmm_features,
    with_transposed_b,
)


class SparseWeight(ABC):
    """An M x K weight in one sparse format, built on the tensors a module holds as buffers."""

    format: str  # the name users pass: "csr", "2:4"
    op: str  # the tuning database's op for W @ X
    buffer_names: tuple[str, ...]
    kernel_dtypes: tuple[torch.dtype, ...]

    def __init__(self, tensors: dict[str, torch.Tensor], shape: tuple[int, int]):
        self.shape = (int(shape[0]), int(shape[1]))
        self.matrix = self._wrap(tensors)
        self._torch_operand: torch.Tensor | None = None
        self._dense: torch.Tensor | None = None

    # ------------------------------------------------------------------------------ construction
    @classmethod
    @abstractmethod
    def compress(cls, dense: torch.Tensor, *, sparsity: float | None, **options) -> dict[str, torch.Tensor]:
        """The buffers of ``dense`` in this format, magnitude-pruned first if ``sparsity`` is given."""

    @classmethod
    @abstractmethod
    def empty(cls, shape: tuple[int, int], *, dtype, device, **options) -> dict[str, torch.Tensor]:
        """The buffers of an all-zero weight (what ``load_state_dict`` fills)."""

    @abstractmethod
    def _wrap(self, tensors: dict[str, torch.Tensor]):
        """The stuning matrix over the buffers (no copy)."""

    # ---------------------------------------------------------------------------------- queries
    @property
    def dtype(self) -> torch.dtype:
        return self.matrix.dtype

    @property
    def device(self) -> torch.device:
        return self.matrix.device

    def nonzeros(self) -> int:
        """Stored values that are not zero (padding and the zeros of sparse 2:4 groups excluded)."""
        return int((self.matrix.values != 0).sum())

    def sparse_bytes(self) -> int:
        return self.matrix.nbytes()

    def dense_bytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.matrix.values.element_size()

    def to_dense(self) -> torch.Tensor:
        return self.matrix.to_dense()

    # -------------------------------------------------------------------------------- computing
    @abstractmethod
    def features(self, n: int, dtype: torch.dtype | None = None, *, x_transposed: bool = False) -> ProblemFeatures:
        """The tuner's features of ``W @ X`` for X with ``n`` columns (no host synchronization);
        ``x_transposed``: X read through a transposed view (where the format's kernel cares)."""

    @abstractmethod
    def _launch(self, x: torch.Tensor, config, out: torch.Tensor | None, bias: torch.Tensor | None) -> torch.Tensor:
        """``W @ X (+ bias)`` into ``out`` through the stuning op with an explicit config."""

    def matmul(self, x: torch.Tensor, *, out: torch.Tensor | None = None,
               bias: torch.Tensor | None = None) -> torch.Tensor:
        """``W @ X`` (X: K x N) with the Triton kernel, plus ``bias`` per row, into ``out`` (M x N,
        any strides) if given; the config is chosen once per token bucket."""
        n, xt = x.shape[1], is_transposed(x)
        config = tuned_config(self.matrix, self.op, n, self.dtype, lambda: self.features(n, x_transposed=xt),
                              transposed=xt)
        return self._launch(x, config, out, bias)

    def dense_is_faster(self, n: int, *, x_transposed: bool = False) -> bool:
        """Whether the tuning database timed ``W @ X`` (N = ``n``) faster as a dense product."""
        return dense_is_faster(self.matrix, self.op, n, self.dtype, lambda: self.features(n, x_transposed=x_transposed),
                               transposed=x_transposed)

    def dense(self) -> torch.Tensor:
        """W stored dense (zeros included), made on first use and kept: the dense layer's bytes again."""
        if self._dense is None:
            self._dense = self.to_dense()
        return self._dense

    def release_dense(self) -> None:
        """Free the dense copy (the next ``dense()`` makes it again)."""
        self._dense = None

    def torch_matmul(self, x: torch.Tensor) -> torch.Tensor:
        """``W @ X`` with PyTorch's sparse CSR product, fp32 where the device has none in this dtype.

        Returns fp32 or the weight's dtype; the caller rounds once, as the kernels do.
        """
        operand = self._torch_operand
        if operand is None:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Sparse", UserWarning)  # "beta", "invariant checks"
                operand = self._torch_operand = self._to_torch_csr()
        # Autocast would cast the operands back down (to bf16 on a CPU, where MKL has no such product):
        # the dtype chosen here is the one the device can do.
        with torch.autocast(x.device.type, enabled=False):
            return torch.sparse.mm(operand, x.to(operand.dtype))

    def _to_torch_csr(self) -> torch.Tensor:
        return self.to_dense().to(torch_compute_dtype(self.dtype, self.device)).to_sparse_csr()

    def tuning_problem(self, n: int, *, dtype: torch.dtype | None = None, device=None, seed: int = 0,
                       x_transposed: bool = False, y_transposed: bool = False):
        """A ``stuning.tuning.problems.Problem`` of ``W @ X`` on this very weight: random X (K x N;
        ``x_transposed``: a transposed view of an N x K tensor, as a layer passes it), a run per config
        through the public op (``y_transposed``: into a transposed view of a fresh N x M tensor, as
        ``SparseLinear`` writes), an fp32 reference, and the dense product it replaces: the dense
        layer's own ``F.linear`` on X^T (N x K), which ``dense_fallback`` runs."""
        from stuning.tuning.problems import Problem

        dtype = dtype or self.dtype
        weight = self.cast(dtype=dtype, device=device)
        gen = torch.Generator(device=weight.device).manual_seed(seed)
        shape = (n, self.shape[1]) if x_transposed else (self.shape[1], n)
        x = torch.randn(shape, generator=gen, device=weight.device, dtype=torch.float32).to(dtype)
        x = x.t() if x_transposed else x
        dense = weight.to_dense()
        reference = dense.float() @ x.float()

        def new_output():
            if y_transposed:
                return torch.empty(n, self.shape[0], dtype=dtype, device=weight.device).t()
            return torch.empty(self.shape[0], n, dtype=dtype, device=weight.device)

        def run(config, out=None):
            return weight._launch(x, config, new_output() if out is None else out, None)

        # The product the layer would run instead, so that pretune compares the two it chooses
        # between. X^T is a view where X is contiguous: cuBLAS reads either layout within 2%
        # (scripts/probe_dense_baselines.py), and a copy would hold another X for the whole search.
        return Problem(None, weight.features(n, x_transposed=x_transposed), run, reference, {"w": weight, "x": x},
                       lambda: torch.nn.functional.linear(x.t(), dense), new_output)

    def cast(self, *, dtype=None, device=None) -> SparseWeight:
        """This weight with its values in ``dtype`` on ``device`` (itself when nothing changes)."""
        dtype, device = dtype or self.dtype, torch.device(device) if device is not None else self.device
        here = self.device
        if dtype == self.dtype and device.type == here.type and device.index in (None, here.index):
            return self
        tensors = {name: getattr(self.matrix, name).to(device) for name in self.buffer_names}
        tensors["values"] = tensors["values"].to(dtype)
        return type(self)(tensors, self.shape, **self._options())

    def _options(self) -> dict:
        return {}

    @classmethod
    def upgrade_state_dict(cls, state_dict: dict, prefix: str) -> None:
        """Rewrite, in place, the buffers an older stuning saved under ``prefix`` into this format's
        (a hook: most formats never changed)."""
        return None


class CSRWeight(SparseWeight):
    """Unstructured sparsity: rows in CSR, multiplied by ``stuning.spmm``."""

    format = "csr"
    op = "spmm"
    buffer_names = ("crow", "col", "values")
    kernel_dtypes = spmm_kernel.SUPPORTED_DTYPES

    def __init__(self, tensors, shape, *, pad_to: int = 1, validate: bool = False):
        self.pad_to = pad_to
        self._validate = validate
        super().__init__(tensors, shape)

    @classmethod
    def compress(cls, dense, *, sparsity=None, pad_to: int = 1):
        if sparsity is not None:
            dense = magnitude_prune(dense, sparsity)
        a = CSRMatrix.from_dense(dense, pad_to=pad_to)
        return {"crow": a.crow, "col": a.col, "values": a.values}

    @classmethod
    def empty(cls, shape, *, dtype, device, pad_to: int = 1):
        return {
            "crow": torch.zeros(shape[0] + 1, dtype=torch.int32, device=device),
            "col": torch.zeros(0, dtype=torch.int32, device=device),
            "values": torch.zeros(0, dtype=dtype, device=device),
        }

    def _wrap(self, tensors):
        a = CSRMatrix(tensors["crow"], tensors["col"], tensors["values"], self.shape, pad_to=self.pad_to,
                      validate=self._validate)
        a.row_order()  # computed now, on the device, so no forward (or graph capture) has to
        # Row statistics read the row lengths on the host: once here, never in a forward.
        self._base_features = spmm_features(a, 1) if a.dtype in spmm_kernel.SUPPORTED_DTYPES else None
        return a

    def features(self, n, dtype=None, *, x_transposed=False):
        if self._base_features is None or (dtype is not None and dtype != self.dtype):
            return spmm_features(self.matrix, n, dtype, b_transposed=x_transposed)
        features = self._base_features.with_values(n=n, n_align=alignment(n))
        return with_transposed_b(features) if x_transposed else features

    def _launch(self, x, config, out, bias):
        return spmm(self.matrix, x, config=config, out=out, bias=bias)

    def _to_torch_csr(self):
        a = self.matrix
        values = a.values.to(torch_compute_dtype(self.dtype, self.device))
        return torch.sparse_csr_tensor(a.crow, a.col, values, self.shape)

    def _options(self):
        return {"pad_to": self.pad_to}


class Semi24Weight(SparseWeight):
    """2:4 semi-structured sparsity, multiplied by ``stuning.semi24_mm`` (fp16 and bf16)."""

    format = "2:4"
    op = "semi24"
    buffer_names = ("values", "masks")
    kernel_dtypes = semi24_kernel.SUPPORTED_DTYPES

    def __init__(self, tensors, shape, *, validate: bool = False):
        self._validate = validate
        super().__init__(tensors, shape)

    @classmethod
    def compress(cls, dense, *, sparsity=None):
        if sparsity not in (None, 0.5):
            raise ValueError(f"2:4 keeps 2 of every 4 weights (sparsity 0.5); got sparsity={sparsity}")
        try:
            w = Semi24Matrix.from_dense(dense, prune=sparsity is not None, pad=True)
        except ValueError as e:
            raise ValueError(f"{e} (or sparsity=0.5 to prune to 2:4 by magnitude)") from None
        return {"values": w.values, "masks": w.masks}

    @classmethod
    def empty(cls, shape, *, dtype, device):
        k_stored = (shape[1] + 3) // 4 * 4
        words = (k_stored // 2 + VALUES_PER_META_WORD - 1) // VALUES_PER_META_WORD
        # Columns 0 and 1 of every group kept (as zeros): a valid 2:4 matrix of zeros.
        full = sum(0x3 << (4 * g) for g in range(GROUPS_PER_MASK_WORD))  # 0x33333333 fits an int32
        masks = torch.full((shape[0], words), full, dtype=torch.int32, device=device)
        groups_in_last = (k_stored // 4) % GROUPS_PER_MASK_WORD
        if groups_in_last:
            masks[:, -1] = sum(0x3 << (4 * g) for g in range(groups_in_last))
        return {"values": torch.zeros(shape[0], k_stored // 2, dtype=dtype, device=device), "masks": masks}

    @classmethod
    def upgrade_state_dict(cls, state_dict, prefix):
        # stuning 0.1 stored 2-bit positions as "weight_meta"; the masks say the same in 4 bits a group.
        old = state_dict.pop(prefix + "weight_meta", None)
        values = state_dict.get(prefix + "weight_values")
        if old is not None and values is not None and prefix + "weight_masks" not in state_dict:
            state_dict[prefix + "weight_masks"] = masks_from_packed_positions(old, 2 * values.shape[1])

    def _wrap(self, tensors):
        return Semi24Matrix(tensors["values"], tensors["masks"], self.shape, validate=self._validate)

    def features(self, n, dtype=None, *, x_transposed=False):
        return semi24_features(self.shape[0], self.shape[1], n, dtype or self.dtype, b_transposed=x_transposed)

    def _launch(self, x, config, out, bias):
        return semi24_mm(self.matrix, x, config=config, out=out, bias=bias)


def torch_compute_dtype(dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype PyTorch's sparse product runs in: CPU sparse kernels (MKL) have no fp16/bf16 one."""
    return torch.float32 if device.type == "cpu" and dtype in (torch.float16, torch.bfloat16) else dtype


FORMATS: dict[str, type[SparseWeight]] = {"csr": CSRWeight, "2:4": Semi24Weight}
PATTERN_FORMATS = {"unstructured": "csr", "csr": "csr", "2:4": "2:4"}


def weight_format(name: str) -> type[SparseWeight]:
    if name not in FORMATS:
        raise ValueError(f"unknown sparse format {name!r}; use one of {sorted(FORMATS)}")
    return FORMATS[name]
