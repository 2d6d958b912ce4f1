"""``SparseLinear``: an ``nn.Linear`` whose weight is stored sparse and multiplied by stuning's kernels."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from stuning.kernels.target import interpreting
from stuning.nn.weights import SparseWeight, weight_format

BACKENDS = ("auto", "triton", "torch")
_warned: set[str] = set()


def warn_once(message: str) -> None:
    """One warning per distinct message per process: a forward runs thousands of times."""
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


class SparseLinear(nn.Module):
    """``y = x @ W^T + b`` with W sparse: a drop-in replacement for ``nn.Linear`` at inference.

    ``format``: ``"csr"`` (unstructured, ``stuning.spmm``) or ``"2:4"`` (``stuning.semi24_mm``, fp16
    and bf16 only). The product is computed as ``(W @ x^T)^T`` with W the left, sparse operand; x may
    have any leading dimensions. The weight's tensors are buffers (``weight_values`` and the format's
    index tensors): nothing here is trained, and no gradient flows through the Triton kernels.

    ``backend``: ``"triton"`` runs the kernels (CUDA tensors, or CPU tensors under Triton's
    interpreter); ``"torch"`` runs PyTorch's sparse CSR product on the same weight; ``"auto"`` (the
    default) takes the kernels wherever they support the device and dtype, else PyTorch, with a
    warning once. A 2:4 layer in fp32 thus runs through PyTorch under ``"auto"`` (convert the model
    with ``.half()``/``.bfloat16()`` to use the kernel) and raises a ``TypeError`` under ``"triton"``.

    The kernel config is looked up per token bucket on the first call at that bucket and cached on
    the weight, so a forward does no host synchronization and can be captured in a CUDA graph (run it
    once at each token count before capturing).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, format: str = "csr",
                 backend: str = "auto", pad_to: int = 1, device=None, dtype=None):
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"SparseLinear: unknown backend {backend!r}; use one of {BACKENDS}")
        if in_features <= 0 or out_features <= 0:
            raise ValueError(f"SparseLinear: features must be positive, got {in_features} -> {out_features}")
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.format = format
        self.backend = backend
        kind = weight_format(format)
        self._format_options = {"pad_to": pad_to} if format == "csr" else {}
        dtype = dtype or torch.get_default_dtype()
        empty = kind.empty((out_features, in_features), dtype=dtype, device=device, **self._format_options)
        for name, tensor in empty.items():
            self.register_buffer(f"weight_{name}", tensor)
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device) if bias else None)
        self._rebuild()

    # ------------------------------------------------------------------------------ construction
    @classmethod
    def from_linear(cls, linear: nn.Linear, format: str = "csr", *, sparsity: float | None = None,
                    backend: str = "auto", pad_to: int = 1) -> SparseLinear:
        """The layer ``linear`` computes, its weight in ``format``: magnitude-pruned to ``sparsity``
        (for 2:4: 0.5, two of every four kept) or, with ``sparsity=None``, keeping the zeros it has."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"SparseLinear.from_linear expects an nn.Linear, got {type(linear).__name__}")
        weight = linear.weight.detach()
        return cls.from_dense(weight, None if linear.bias is None else linear.bias.detach(), format=format,
                              sparsity=sparsity, backend=backend, pad_to=pad_to)

    @classmethod
    def from_dense(cls, weight: torch.Tensor, bias: torch.Tensor | None = None, *, format: str = "csr",
                   sparsity: float | None = None, backend: str = "auto", pad_to: int = 1) -> SparseLinear:
        """From a dense (out_features x in_features) weight and optional bias; see ``from_linear``."""
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            raise ValueError(f"SparseLinear: the weight must be a 2-D tensor, got {getattr(weight, 'shape', weight)}")
        out_features, in_features = weight.shape
        if bias is not None and tuple(bias.shape) != (out_features,):
            raise ValueError(f"SparseLinear: bias has shape {tuple(bias.shape)}, expected ({out_features},)")
        layer = cls(in_features, out_features, bias is not None, format=format, backend=backend, pad_to=pad_to,
                    device=weight.device, dtype=weight.dtype)
        options = layer._format_options
        for name, tensor in weight_format(format).compress(weight, sparsity=sparsity, **options).items():
            setattr(layer, f"weight_{name}", tensor)
        if bias is not None:
            layer.bias = bias.to(weight.dtype).clone()
        layer._rebuild()
        return layer

    def _rebuild(self, validate: bool = False) -> None:
        """Wrap the buffers again after they changed (construction, ``.to()``, ``load_state_dict``)."""
        kind = weight_format(self.format)
        tensors = {name: getattr(self, f"weight_{name}") for name in kind.buffer_names}
        options = {**self._format_options, "validate": validate} if self.format == "csr" else {}
        self.sparse_weight: SparseWeight = kind(tensors, (self.out_features, self.in_features), **options)
        self._sparsity: float | None = None
        self._use_triton, self._why_not_triton = self._choose_backend()

    def _choose_backend(self) -> tuple[bool, str | None]:
        w = self.sparse_weight
        why = None
        if w.dtype not in w.kernel_dtypes:
            why = (f"the {self.format} kernel takes {', '.join(str(d) for d in w.kernel_dtypes)}, "
                   f"and this layer is {w.dtype}")
        elif not (w.device.type == "cuda" or (w.device.type == "cpu" and interpreting())):
            why = f"the Triton kernels need a CUDA device (or TRITON_INTERPRET=1), and this layer is on {w.device}"
        if self.backend == "torch":
            return False, None
        if self.backend == "triton":
            return True, why
        return why is None, why

    def _apply(self, fn, recurse=True):
        out = super()._apply(fn, recurse)
        self._rebuild()
        return out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        kind = weight_format(self.format)
        keys = {name: f"{prefix}weight_{name}" for name in kind.buffer_names}
        dense = state_dict.get(prefix + "weight")
        if dense is not None and not any(k in state_dict for k in keys.values()):
            # A dense nn.Linear checkpoint: compress it to this layer's format, keeping its zeros.
            del state_dict[prefix + "weight"]
            if tuple(dense.shape) != (self.out_features, self.in_features):
                error_msgs.append(f"{prefix}weight: shape {tuple(dense.shape)} does not match this layer's "
                                  f"({self.out_features}, {self.in_features})")
                return
            compressed = kind.compress(dense.to(self.sparse_weight.device, self.sparse_weight.dtype),
                                       sparsity=None, **self._format_options)
            state_dict.update({keys[name]: t for name, t in compressed.items()})
        for name, key in keys.items():
            # The number of stored entries differs from weight to weight: take the loaded sizes.
            loaded, held = state_dict.get(key), self._buffers[f"weight_{name}"]
            if isinstance(loaded, torch.Tensor) and loaded.shape != held.shape:
                dtype = held.dtype if held.is_floating_point() else loaded.dtype
                self._buffers[f"weight_{name}"] = torch.empty(loaded.shape, dtype=dtype, device=held.device)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        self._rebuild(validate=True)

    # ---------------------------------------------------------------------------------- queries
    @property
    def dtype(self) -> torch.dtype:
        return self.sparse_weight.dtype

    @property
    def device(self) -> torch.device:
        return self.sparse_weight.device

    @property
    def sparsity(self) -> float:
        """Fraction of the weight's entries that are zero (computed once; it reads the device)."""
        if self._sparsity is None:
            self._sparsity = 1.0 - self.sparse_weight.nonzeros() / (self.in_features * self.out_features)
        return self._sparsity

    def dense_weight(self) -> torch.Tensor:
        """The weight as a dense (out_features x in_features) tensor, zeros included."""
        return self.sparse_weight.to_dense()

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"format={self.format!r}, sparsity={self.sparsity:.1%}, backend={self.backend!r}")

    # -------------------------------------------------------------------------------- computing
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"SparseLinear: input of shape {tuple(x.shape)} does not end in "
                             f"in_features = {self.in_features}")
        if x.dtype != self.dtype:
            if not torch.is_autocast_enabled(x.device.type):
                raise TypeError(f"SparseLinear: input is {x.dtype} but the layer's weight is {self.dtype}")
            x = x.to(self.dtype)  # under autocast the input follows the sparse weight, stored (and tuned) in one dtype
        lead = x.shape[:-1]
        xt = x.reshape(-1, self.in_features).t()
        if self._use_triton:
            if self._why_not_triton is not None:
                raise TypeError(f"SparseLinear(backend='triton'): {self._why_not_triton}; use backend='auto' "
                                "or 'torch' to run it through PyTorch")
            if x.requires_grad and torch.is_grad_enabled():
                warn_once("SparseLinear: no gradient flows through the Triton kernels (inference only); "
                          "run the model under torch.no_grad() or torch.inference_mode()")
            # The kernels gather rows of X^T: make them contiguous (a no-op for a single token).
            y = torch.empty(xt.shape[1], self.out_features, dtype=x.dtype, device=x.device)
            yt = self.sparse_weight.matmul(xt.contiguous())
            if self.bias is None:
                y.copy_(yt.t())
            else:
                torch.add(yt.t(), self.bias, out=y)  # transposes and adds the bias in one pass
        else:
            if self._why_not_triton is not None and self.backend == "auto":
                warn_once(f"SparseLinear: not using stuning's Triton kernels ({self._why_not_triton}); "
                          "computing through PyTorch's sparse product instead")
            yt = self.sparse_weight.torch_matmul(xt)
            y = yt.t() if self.bias is None else yt.t() + self.bias
            y = y.to(x.dtype).contiguous()
        return y.view(*lead, self.out_features)
