"""``torch.compile`` support shared by the ops' operators and the sparse layers' one.

Dynamo cannot trace a launch (the tuning database's lookup, caches built on the sparse operand,
Triton launches with TMA descriptors built on the host). So under ``torch.compile`` each op whose
sparse operand was built outside the compiled function calls a ``torch.library`` custom operator
(``stuning::spmm``, ``stuning::semi24_mm``, ``stuning::sddmm``), the matrix named by its handle
(``stuning.formats.handles``): its implementation is the eager op, its fake gives the output's shape,
dtype and strides and checks the inputs as the eager op does, so a bad input fails while compiling.
``mode="reduce-overhead"`` then replays the ops with the rest of the step as one CUDA graph. Anything
else (a torch sparse tensor, a matrix built inside the compiled function, an explicit config) runs
the eager op as a graph break.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

from stuning.formats.stored import CompilableMatrix


def takes(matrix, config) -> bool:
    """Whether an op traced by Dynamo runs as its operator: a matrix with a handle, the config looked
    up (an explicit config object cannot be an operator's argument)."""
    return isinstance(matrix, CompilableMatrix) and matrix._handle is not None and config is None


def refuse_export(what: str, hint: str = "") -> None:
    """Raise under ``torch.export``: the exported program would call back into this process's objects.

    Called from the operators' fakes, plain Python: a check in traced code broke Dynamo's graph on
    torch 2.11 (BENCHMARKS.md 9d)."""
    if getattr(torch.compiler, "is_exporting", lambda: False)():
        raise RuntimeError(f"{what}: torch.export is not supported: the exported program would call back into "
                           f"this process's sparse matrices and layers. Use torch.compile{hint}")


def run_outside_graph_pools(warmed: set, inputs: tuple[torch.Tensor, ...], run: Callable[[], object]):
    """``run()``, after running it once on a helper thread the first time these inputs' shapes and
    strides come on this stream: what an operator's implementation does.

    CUDA-graph trees (``mode="reduce-overhead"``) run a function's first call in the graphs' private
    memory pool and then require every tensor alive in the pool to be one of its outputs. An op
    builds what a config needs on first use and keeps it on the matrix (scatter tiles, sliced ELL,
    2:4 metadata layouts, output tiles, split-K workspaces): built there, those would stay in the
    pool, and the trees refuse them ("tensors in the cudagraph pool not tracked as outputs"). The
    pool takes allocations from the thread that entered it only, so the helper thread's are ordinary
    ones; it launches on the caller's stream, so its work is ordered with the caller's, and split-K
    workspaces, kept per stream, are the ones the caller's launches find. ``warmed`` holds the keys
    seen (kept by the matrix or layer the caches belong to).
    """
    device = inputs[0].device
    if device.type != "cuda" or torch.cuda.is_current_stream_capturing():
        return run()
    stream = torch.cuda.current_stream(device)
    key = (*((tuple(t.shape), t.stride(), t.dtype) for t in inputs), device, stream.cuda_stream)
    if key in warmed:
        return run()

    def warm():
        with torch.cuda.device(device), torch.cuda.stream(stream), torch.no_grad():
            # A new thread has no current CUDA context until the runtime makes one: Triton's host-side
            # TMA descriptors, built through the driver first, failed there ("invalid device context").
            torch.cuda.synchronize(device)
            run()

    with ThreadPoolExecutor(max_workers=1) as helper:
        helper.submit(warm).result()
    warmed.add(key)
    return run()


def warmed_inputs(matrix: CompilableMatrix) -> set:
    """The warm-up keys of ``matrix``: kept in its cache, with what the warm-ups built (cleared together)."""
    return matrix.cache.setdefault("compiled: warmed inputs", set())
