"""``SparseConv2d``: an ``nn.Conv2d`` (groups = 1) whose weight is stored sparse, run as one SpMM.

A convolution is a matrix product in its GEMM view: W (C_out x C_in*kh*kw, the dense weight
flattened) times X (C_in*kh*kw x N), N = batch x H_out x W_out, X's column for an output pixel
holding the input patch under the kernel (im2col). Row k = (c, i, j) of X is the input channel c
shifted by (i, j) and sampled at the stride, so X is a strided view of the (padded) input, and one
``reshape`` materializes it. For a 1x1 convolution with stride 1 and no padding X is the input
itself, in the layout the kernel wants after at most one transposing copy (see ``_columns``).

An implicit-im2col kernel (gathering patches inside the SpMM instead of materializing X) would save
X's write and read, kh*kw times the input; it is left for when the GPU shows the copy matters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from stuning.nn.linear import SparseLayer

# nn.Conv2d's padding_mode -> F.pad's mode (nn.Conv2d pads the same way before a non-zeros convolution).
PADDING_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}


def _memory_format(x: torch.Tensor) -> torch.memory_format:
    """The format of a batch (B, C, H, W), which the output keeps: channels-last, or contiguous."""
    channels_last = not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)
    return torch.channels_last if channels_last else torch.contiguous_format


def _pair(value, what: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, int) for v in pair):
        raise ValueError(f"SparseConv2d: {what} must be an int or a pair of ints, got {value!r}")
    return pair


class SparseConv2d(SparseLayer):
    """``y = conv2d(x, W) + b`` with W sparse: a drop-in replacement for ``nn.Conv2d`` (groups = 1)
    at inference, through ``W @ im2col(x)`` with the kernels of ``SparseLinear``.

    ``format``, ``backend`` and ``pad_to`` as for ``SparseLinear``; the tuning problem is the GEMM
    view (M = out channels, K = in channels x kh x kw, N = batch x H_out x W_out), its config looked
    up once per N bucket and cached, so a forward does no host synchronization and can be captured
    in a CUDA graph (or compiled: see ``SparseLinear``). Inputs are (B, C, H, W) or unbatched
    (C, H, W), in the contiguous or the channels-last memory format; the output has the input's
    format. ``padding`` takes ints, pairs, ``"valid"`` and ``"same"`` (stride 1), and ``padding_mode``
    ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"``, as ``nn.Conv2d``, whose positional
    order the arguments keep (``groups`` must be 1).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", *, format: str = "csr",
                 backend: str = "auto", pad_to: int = 1, device=None, dtype=None):
        super().__init__()
        if in_channels <= 0 or out_channels <= 0:
            raise ValueError(f"SparseConv2d: channels must be positive, got {in_channels} -> {out_channels}")
        if groups != 1:
            raise ValueError(f"SparseConv2d: groups={groups}: only groups=1 is supported (keep grouped and "
                             "depthwise convolutions as nn.Conv2d)")
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"SparseConv2d: padding_mode {padding_mode!r}: use one of {tuple(PADDING_MODES)}")
        self.padding_mode = padding_mode
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.dilation = _pair(dilation, "dilation")
        if min(*self.kernel_size, *self.stride, *self.dilation) < 1:
            raise ValueError(f"SparseConv2d: kernel_size {self.kernel_size}, stride {self.stride} and dilation "
                             f"{self.dilation} must be positive")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"SparseConv2d: padding {padding!r}: use 'same', 'valid', an int or a pair")
            if padding == "same" and self.stride != (1, 1):
                raise ValueError("SparseConv2d: padding='same' needs stride 1, as in nn.Conv2d")
            self.padding = padding
        else:
            self.padding = _pair(padding, "padding")
        # F.pad's (left, right, top, bottom); "same" pads the extra row/column at the end, as torch does.
        pads = []
        for k, d, p in zip(reversed(self.kernel_size), reversed(self.dilation),
                           reversed(self.padding) if isinstance(self.padding, tuple) else (self.padding,) * 2,
                           strict=True):
            total = d * (k - 1) if p == "same" else 0 if p == "valid" else 2 * p
            pads += [total // 2, total - total // 2]
        if min(pads) < 0:
            raise ValueError(f"SparseConv2d: padding must not be negative, got {padding!r}")
        self._pads = tuple(pads)
        kh, kw = self.kernel_size
        k = self.in_channels * kh * kw
        self._setup((self.out_channels, k), (self.out_channels, self.in_channels, kh, kw), bias, format=format,
                    backend=backend, pad_to=pad_to, device=device, dtype=dtype)

    # ------------------------------------------------------------------------------ construction
    @staticmethod
    def unsupported(conv: nn.Conv2d) -> str | None:
        """Why ``conv`` cannot become a SparseConv2d (``sparsify`` then leaves it dense), or None."""
        if conv.groups != 1:
            kind = "depthwise" if conv.groups == conv.in_channels else "grouped"
            return (f"groups={conv.groups} ({kind}): only groups=1 is supported; a {kind} convolution is a "
                    f"batch of small products that stays dense")
        if conv.padding_mode not in PADDING_MODES:
            return f"padding_mode={conv.padding_mode!r}: not one of {tuple(PADDING_MODES)}"
        return None

    @classmethod
    def from_conv(cls, conv: nn.Conv2d, format: str = "csr", *, sparsity: float | None = None,
                  backend: str = "auto", pad_to: int = 1) -> SparseConv2d:
        """The convolution ``conv`` computes, its weight in ``format``: magnitude-pruned (over the whole
        weight) to ``sparsity`` (2:4: 0.5, along the flattened C_in x kh x kw rows) or, with
        ``sparsity=None``, keeping the zeros it has. Grouped and depthwise convolutions raise ``ValueError``."""
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"SparseConv2d.from_conv expects an nn.Conv2d, got {type(conv).__name__}")
        why = cls.unsupported(conv)
        if why is not None:
            raise ValueError(f"SparseConv2d: {why}")
        weight = conv.weight.detach()
        layer = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                    1, conv.bias is not None, conv.padding_mode, format=format, backend=backend, pad_to=pad_to,
                    device=weight.device, dtype=weight.dtype)
        layer._fill(weight, None if conv.bias is None else conv.bias.detach(), sparsity)
        return layer

    # ---------------------------------------------------------------------------------- queries
    def _out_hw(self, h: int, w: int) -> tuple[int, int]:
        (kh, kw), (sh, sw), (dh, dw) = self.kernel_size, self.stride, self.dilation
        left, right, top, bottom = self._pads
        return (h + top + bottom - dh * (kh - 1) - 1) // sh + 1, (w + left + right - dw * (kw - 1) - 1) // sw + 1

    def gemm_columns(self, input_shape):
        batch = input_shape[0] if len(input_shape) == 4 else 1
        ho, wo = self._out_hw(*input_shape[-2:])
        return batch * ho * wo

    def output_shape(self, input_shape):
        return (*input_shape[:-3], self.out_channels, *self._out_hw(*input_shape[-2:]))

    def extra_repr(self) -> str:
        mode = "" if self.padding_mode == "zeros" else f"padding_mode={self.padding_mode!r}, "
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding!r}, dilation={self.dilation}, bias={self.bias is not None}, {mode}"
                f"format={self.format!r}, sparsity={self.sparsity:.1%}, backend={self.backend!r}")

    # -------------------------------------------------------------------------------- computing
    def _check(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() not in (3, 4):
            raise ValueError(f"SparseConv2d: input must be (B, C, H, W) or (C, H, W), got shape "
                             f"{tuple(getattr(x, 'shape', ()))}")
        if x.shape[-3] != self.in_channels:
            raise ValueError(f"SparseConv2d: expected {self.in_channels} input channels (dim {x.dim() - 3} of "
                             f"{'(B, C, H, W)' if x.dim() == 4 else '(C, H, W)'}), got {x.shape[-3]} in input "
                             f"of shape {tuple(x.shape)}")
        ho, wo = self._out_hw(*x.shape[-2:])
        if ho < 1 or wo < 1:
            raise ValueError(f"SparseConv2d: input of {x.shape[-2]}x{x.shape[-1]} pixels is smaller than the "
                             f"kernel {self.kernel_size} (dilation {self.dilation}, padding {self.padding!r})")

    def _columns(self, x: torch.Tensor, ho: int, wo: int) -> torch.Tensor:
        """X = im2col(x) as a (C_in*kh*kw, B*ho*wo) matrix whose rows are contiguous."""
        if any(self._pads):
            x = F.pad(x, self._pads, mode=PADDING_MODES[self.padding_mode])
        (kh, kw), (sh, sw), (dh, dw) = self.kernel_size, self.stride, self.dilation
        s_b, s_c, s_h, s_w = x.stride()
        # Row (c, i, j), column (b, oh, ow) reads x[b, c, oh*sh + i*dh, ow*sw + j*dw]: a view, no copy.
        patches = x.as_strided((self.in_channels, kh, kw, x.shape[0], ho, wo),
                               (s_c, dh * s_h, dw * s_w, s_b, sh * s_h, sw * s_w), x.storage_offset())
        # reshape copies unless the view is already a matrix: a 1x1, stride-1, unpadded convolution
        # of one contiguous image (X is the input), or of channels-last input, where X = x viewed as
        # (C, B*H*W) with column stride C. The SpMM kernel accepts that strided X, but it gathers
        # rows of X, and a row with stride C costs a memory transaction per element: one transposing
        # copy (what reshape does for NCHW batches) is far cheaper than reading X nnz/K times that way.
        cols = patches.reshape(self._matrix_shape[1], -1)
        return cols if cols.stride(1) == 1 else cols.contiguous()

    def _empty_output(self, x: torch.Tensor) -> torch.Tensor:
        batched = x.unsqueeze(0) if x.dim() == 3 else x
        y = torch.empty((batched.shape[0], self.out_channels, *self._out_hw(*x.shape[-2:])), dtype=x.dtype,
                        device=x.device, memory_format=_memory_format(batched))
        return y.squeeze(0) if x.dim() == 3 else y

    def _eager_forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check(x)
        requires_grad = x.requires_grad
        x = self._input(x)
        unbatched = x.dim() == 3
        if unbatched:
            x = x.unsqueeze(0)
        layout = _memory_format(x)
        channels_last = layout == torch.channels_last
        batch = x.shape[0]
        ho, wo = self._out_hw(*x.shape[-2:])
        m = self.out_channels
        if batch == 0:
            y = torch.empty((0, m, ho, wo), dtype=x.dtype, device=x.device, memory_format=layout)
            return y.squeeze(0) if unbatched else y
        if self._dense_is_faster(batch * ho * wo):
            # Where pretune timed the dense product faster, the dense convolution itself (cuDNN on a
            # GPU) is faster still: it skips the im2col copy both GEMM paths pay.
            if any(self._pads):
                x = F.pad(x, self._pads, mode=PADDING_MODES[self.padding_mode])
            weight = self.sparse_weight.dense().view(self._dense_shape)
            y = F.conv2d(x, weight, self.bias, self.stride, 0, self.dilation).contiguous(memory_format=layout)
            return y.squeeze(0) if unbatched else y
        cols = self._columns(x, ho, wo)
        if self._use_triton:
            # The kernels add the bias and write W @ X (C_out, B*ho*wo) through the output's strides
            # where it is one strided matrix (channels-last, or one image in NCHW); else one copy.
            y = torch.empty((batch, m, ho, wo), dtype=x.dtype, device=x.device, memory_format=layout)
            target = y.permute(1, 0, 2, 3)
            if channels_last or batch == 1:
                self._multiply(cols, requires_grad, out=target.view(m, batch * ho * wo), bias=self.bias)
            else:
                target.copy_(self._multiply(cols, requires_grad, bias=self.bias).view(m, batch, ho, wo))
            return y.squeeze(0) if unbatched else y
        # W @ X is (C_out, B*ho*wo): the output image by image with channels outermost, so for one
        # image in NCHW it is the output itself; otherwise one pass writes it in the input's format,
        # adding the bias and rounding from the PyTorch path's compute dtype on the way.
        yt = self._multiply(cols, requires_grad).view(m, batch, ho, wo).permute(1, 0, 2, 3)
        bias = None if self.bias is None else self.bias.view(1, m, 1, 1)
        if yt.requires_grad:
            # The PyTorch path with autograd recording (an input that requires grad, e.g. from a dense
            # layer with parameters, outside no_grad): out= ops record no gradient and raise, so
            # compute out of place, as SparseLinear's PyTorch path does.
            y = (yt if bias is None else yt + bias).to(x.dtype).contiguous(memory_format=layout)
        elif yt.dtype == x.dtype and yt.is_contiguous(memory_format=layout):
            y = yt if bias is None else yt.add_(bias)
        else:
            y = torch.empty((batch, m, ho, wo), dtype=x.dtype, device=x.device, memory_format=layout)
            if bias is None:
                y.copy_(yt)
            else:
                torch.add(yt, bias, out=y)
        return y.squeeze(0) if unbatched else y
