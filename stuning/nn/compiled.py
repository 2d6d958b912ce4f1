"""``torch.compile`` support: a sparse layer's kernel path as one opaque PyTorch operator.

Dynamo cannot trace the kernel path (the tuning database's lookup, Triton launches with TMA
descriptors built on the host), so under ``torch.compile`` a layer that runs the kernels calls
``torch.ops.stuning.sparse_layer``, whose implementation is the layer's eager forward and whose fake
implementation gives the output's shape, dtype and strides without running anything. The compiled
graph then holds the ops around the layers (which Inductor fuses) and one call per sparse layer, and
``torch.compile(model, mode="reduce-overhead")`` replays the whole step as a CUDA graph: the ~100 us
of host time an eager kernel launch costs (BENCHMARKS.md 7y) is paid once, at capture.

The operator names its layer by a handle, an integer registered per layer object (a deep copy or an
unpickled layer registers anew, so a copy never runs its original's weight), and takes the layer's
weight tensors and bias as inputs, so that the compiler knows what it reads (graph inputs, not state
hidden in the operator; a model whose weights were replaced is best compiled again, README). Inference
only, as the kernels are: as
in eager mode, no gradient flows back through the operator, and an input that asks for one gets the
layer's warning.
"""

from __future__ import annotations

import itertools
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from stuning.nn.linear import SparseLayer

_LAYERS: weakref.WeakValueDictionary[int, SparseLayer] = weakref.WeakValueDictionary()
# Counted in construction order. A compiled graph holds its layers' handles as constants, and
# Inductor's on-disk cache is keyed by the graph Dynamo traced in the calling process, handles
# included: a hit is always this process's layers, and a process that builds its model the same way
# finds its graphs cached. Only an exported program would outlive its handles; export is refused.
_HANDLES = itertools.count(1)


def register(layer: SparseLayer) -> int:
    """A new handle for ``layer``, held weakly: the registry never keeps a model alive."""
    handle = next(_HANDLES)
    _LAYERS[handle] = layer
    return handle


def _layer(handle: int) -> SparseLayer:
    layer = _LAYERS.get(handle)
    if layer is None:
        raise RuntimeError(f"stuning::sparse_layer: no sparse layer with handle {handle} is alive (a compiled "
                           "function called after its model was freed?)")
    return layer


@torch.library.custom_op("stuning::sparse_layer", mutates_args=())
def sparse_layer(handle: int, x: torch.Tensor, weight: list[torch.Tensor], bias: torch.Tensor | None) -> torch.Tensor:
    """The layer ``handle``'s forward on ``x``; ``weight`` and ``bias`` are its buffers, passed so that the
    compiler sees them as inputs (the layer reads its own)."""
    layer = _layer(handle)
    _warm_outside_graph_pools(layer, x)
    return layer._eager_forward(x)


def _warm_outside_graph_pools(layer: SparseLayer, x: torch.Tensor) -> None:
    """Run the layer once on ``x`` on a helper thread, the first time it sees such an input on this stream.

    CUDA-graph trees (``mode="reduce-overhead"``) run a function's first call in the graphs' private
    memory pool and then require every tensor alive in the pool to be one of its outputs. A layer
    builds what a config needs on first use and keeps it (scatter tiles, sliced ELL, 2:4 metadata
    layouts, split-K workspaces): built there, those would stay in the pool, and the trees refuse
    them ("tensors in the cudagraph pool not tracked as outputs"). The pool takes allocations from
    the thread that entered it only, so the helper thread's are ordinary ones; it launches on the
    caller's stream, so its work is ordered with the caller's, and split-K workspaces, kept per
    stream, are the ones the caller's launches find.
    """
    if x.device.type != "cuda" or torch.cuda.is_current_stream_capturing():
        return
    stream = torch.cuda.current_stream(x.device)
    key = (tuple(x.shape), x.stride(), x.dtype, x.device, stream.cuda_stream)
    if key in layer._warm_inputs:
        return

    def warm():
        with torch.cuda.device(x.device), torch.cuda.stream(stream), torch.no_grad():
            # A new thread has no current CUDA context until the runtime makes one: Triton's host-side
            # TMA descriptors, built through the driver first, failed there ("invalid device context").
            torch.cuda.synchronize(x.device)
            layer._eager_forward(x)

    with ThreadPoolExecutor(max_workers=1) as helper:
        helper.submit(warm).result()
    layer._warm_inputs.add(key)


@sparse_layer.register_fake
def _sparse_layer_fake(handle, x, weight, bias):
    layer = _layer(handle)
    # Checked here, in plain Python, not in the traced forward: Dynamo on torch 2.11 did not trace
    # the check there, and the graph break it made sent Dynamo into the eager forward.
    if getattr(torch.compiler, "is_exporting", lambda: False)():
        raise RuntimeError(f"{type(layer).__name__}: torch.export is not supported: the exported program would call "
                           "back into this process's layer objects. Use torch.compile, or export the model with "
                           "dense layers")
    layer._check(x)
    return layer._empty_output(x)


def _setup_context(ctx, inputs, output) -> None:
    ctx.weight_tensors = len(inputs[2])
    if inputs[1].requires_grad:
        _layer(inputs[0])._warn_no_gradient()


def _no_gradient(ctx, grad):
    return None, None, [None] * ctx.weight_tensors, None


sparse_layer.register_autograd(_no_gradient, setup_context=_setup_context)
