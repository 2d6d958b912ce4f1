"""The N of every sparse layer's ``W @ X`` for given model inputs, found without computing anything.

A linear layer's N is its token count, but a convolution's is batch x H_out x W_out, which depends on
where in the network it sits. ``gemm_columns`` runs the model once per input shape on meta tensors
(shapes only: no memory, no arithmetic, any batch size), each sparse layer replaced for the pass by a
stub that records the N its input gives and returns an output of the right shape.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable

import torch
from torch import nn

from stuning.nn.linear import SparseLayer


def check_input_shapes(input_shapes) -> list[tuple[int, ...]]:
    """One shape (a tuple of ints) or several, each a positive batch first."""
    shapes = [input_shapes] if _is_shape(input_shapes) else list(input_shapes)
    if not shapes or not all(_is_shape(s) and all(d > 0 for d in s) for s in shapes):
        raise ValueError(f"pretune: input_shapes must be one shape of positive ints, e.g. (8, 3, 224, 224), or a "
                         f"list of them, got {input_shapes!r}")
    return list(dict.fromkeys(tuple(int(d) for d in s) for s in shapes))


def _is_shape(value) -> bool:
    return isinstance(value, (tuple, list, torch.Size)) and len(value) > 0 and all(
        isinstance(d, int) and not isinstance(d, bool) for d in value)


def gemm_columns(model: nn.Module, input_shapes: Iterable) -> dict[str, list[int]]:
    """Layer name -> the sorted distinct N of its ``W @ X`` over the model's inputs of ``input_shapes``.

    The input is a floating tensor of the sparse layers' dtype; a model that takes anything else, or
    whose forward reads values (data-dependent control flow cannot run on meta tensors), should be
    given the N values directly (``pretune(tokens=...)``). Layers a forward never reaches are absent.
    """
    shapes = check_input_shapes(input_shapes)
    layers = {name: m for name, m in model.named_modules() if isinstance(m, SparseLayer)}
    if not layers:
        raise ValueError("pretune: the model has no sparse layers; run stuning.sparsify(model, ...) first")
    dtype = next(iter(layers.values())).dtype
    seen: dict[str, set[int]] = {name: set() for name in layers}
    state = {name: t.to("meta") for name, t in itertools.chain(model.named_parameters(), model.named_buffers())}
    with _stubbed(layers, seen):
        for shape in shapes:
            x = torch.empty(shape, dtype=dtype, device="meta")
            try:
                with torch.no_grad():
                    torch.func.functional_call(model, state, (x,))
            except Exception as e:
                raise ValueError(f"pretune: could not run the model on an input of shape {shape} with meta tensors "
                                 f"to find its layers' GEMM sizes ({type(e).__name__}: {e}); pass tokens= the "
                                 "N values instead") from e
    return {name: sorted(ns) for name, ns in seen.items() if ns}


@contextlib.contextmanager
def _stubbed(layers: dict[str, SparseLayer], seen: dict[str, set[int]]):
    def stub(name: str, layer: SparseLayer):
        def forward(x: torch.Tensor) -> torch.Tensor:
            layer._check(x)
            seen[name].add(layer.gemm_columns(tuple(x.shape)))
            return torch.empty(layer.output_shape(tuple(x.shape)), dtype=x.dtype, device=x.device)

        return forward

    try:
        for name, layer in layers.items():
            layer.forward = stub(name, layer)  # an instance attribute shadows the class's forward
        yield
    finally:
        for layer in layers.values():
            layer.__dict__.pop("forward", None)
