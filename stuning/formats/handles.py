"""Handles for live objects: how a compiled graph names a Python object it cannot hold.

A ``torch.library`` custom operator takes tensors, numbers and strings only, so under
``torch.compile`` a sparse matrix (``stuning.ops.compiled``) or a sparse layer (``stuning.nn.compiled``)
is passed to its operator as a handle, and the operator looks the object up here.
"""

from __future__ import annotations

import itertools
import weakref


class Handles:
    """Objects by handle, held weakly: the registry never keeps a matrix or a model alive.

    Handles are strings, since Dynamo specializes a string where it may turn an int read from an
    object into a symbol once a second object comes (a symbolic handle names no matrix). They are
    counted from 1 in registration order and never reused. A compiled graph holds handles as
    constants, and Inductor's on-disk cache is keyed by the graph Dynamo traced in the
    calling process, handles included: a hit is always this process's objects, and a process that
    builds its objects in the same order finds its graphs cached. Only an exported program would
    outlive its handles, so the operators refuse ``torch.export``.
    """

    def __init__(self, what: str):
        self._what = what
        self._objects: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()
        self._count = itertools.count(1)

    def register(self, obj) -> str:
        handle = str(next(self._count))
        self._objects[handle] = obj
        return handle

    def get(self, handle: str, op: str):
        """The object ``handle`` names; an error naming ``op`` if it was freed."""
        obj = self._objects.get(handle)
        if obj is None:
            raise RuntimeError(f"{op}: no {self._what} with handle {handle} is alive (a compiled function "
                               "called after what it was compiled with was freed?)")
        return obj
