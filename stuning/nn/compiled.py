"""``torch.compile`` support: a sparse layer's kernel path as one opaque PyTorch operator.

Dynamo cannot trace the kernel path (the tuning database's lookup, Triton launches with TMA
descriptors built on the host), so under ``torch.compile`` a layer that runs the kernels calls
``torch.ops.stuning.sparse_layer``, whose implementation is the layer's eager forward and whose fake
implementation gives the output's shape, dtype and strides without running anything. The compiled
graph then holds the ops around the layers (which Inductor fuses) and one call per sparse layer, and
``torch.compile(model, mode="reduce-overhead")`` replays the whole step as a CUDA graph: the ~100 us
of host time an eager kernel launch costs (BENCHMARKS.md 7y) is paid once, at capture.

The operator names its layer by a handle (``stuning.formats.handles``), an integer registered per
layer object (a deep copy or an unpickled layer registers anew, so a copy never runs its original's
weight), and takes the layer's
weight tensors and bias as inputs, so that the compiler knows what it reads (graph inputs, not state
hidden in the operator; a model whose weights were replaced is best compiled again, README).
Inference only, as the kernels are: as in eager mode, no gradient flows back through the operator,
and an input that asks for one gets the layer's warning. The functional ops have operators of their
own (``stuning.ops.compiled``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from stuning.formats.handles import Handles
from stuning.ops.compiled import refuse_export, run_outside_graph_pools

if TYPE_CHECKING:
    from stuning.nn.linear import SparseLayer

LAYERS = Handles("sparse layer")


def register(layer: SparseLayer) -> str:
    """A new handle for ``layer``, held weakly: the registry never keeps a model alive."""
    return LAYERS.register(layer)


@torch.library.custom_op("stuning::sparse_layer", mutates_args=())
def sparse_layer(handle: str, x: torch.Tensor, weight: list[torch.Tensor], bias: torch.Tensor | None) -> torch.Tensor:
    """The layer ``handle``'s forward on ``x``; ``weight`` and ``bias`` are its buffers, passed so that the
    compiler sees them as inputs (the layer reads its own)."""
    layer = LAYERS.get(handle, "stuning::sparse_layer")
    return run_outside_graph_pools(layer._warm_inputs, (x,), lambda: layer._eager_forward(x))


@sparse_layer.register_fake
def _sparse_layer_fake(handle, x, weight, bias):
    layer = LAYERS.get(handle, "stuning::sparse_layer")
    refuse_export(type(layer).__name__, ", or export the model with dense layers")
    layer._check(x)
    return layer._empty_output(x)


def _setup_context(ctx, inputs, output) -> None:
    ctx.weight_tensors = len(inputs[2])
    if inputs[1].requires_grad:
        LAYERS.get(inputs[0], "stuning::sparse_layer")._warn_no_gradient()


def _no_gradient(ctx, grad):
    return None, None, [None] * ctx.weight_tensors, None


sparse_layer.register_autograd(_no_gradient, setup_context=_setup_context)
