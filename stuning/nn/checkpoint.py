"""A model's linear layers from a weights file alone (safetensors or a torch state dict).

Without the code that defines a model, its 2-D ``*.weight`` tensors are still what sparsify and
pretune need: each becomes an ``nn.Linear`` at its own dotted name, so reports name the layers as
the checkpoint does.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

SAFETENSORS_MAGIC_MAX_HEADER = 100 * 2**20  # a safetensors file starts with its header's length


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file or of a ``torch.save``d state dict (CPU, not unpickled code)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such weights file: {path}")
    try:
        if _is_safetensors(path):
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # every reader has its own errors; the file is the problem either way
        raise ValueError(f"cannot read weights file {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") \
            from None
    for wrapper in ("state_dict", "model"):  # training checkpoints nest the weights
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    if not isinstance(state, dict):
        raise ValueError(f"weights file {path} holds a {type(state).__name__}, not a dict of tensors")
    return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}


def _is_safetensors(path: Path) -> bool:
    if path.suffix == ".safetensors":
        return True
    with open(path, "rb") as f:
        head = f.read(9)
    # 8-byte little-endian header length, then the JSON header itself.
    return len(head) == 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < SAFETENSORS_MAGIC_MAX_HEADER


def linears_from_weights(state: dict[str, torch.Tensor]) -> nn.Module:
    """A module holding an ``nn.Linear`` (weights shared, not copied) at each 2-D ``*.weight``'s name."""
    root = nn.Module()
    found = 0
    for name, weight in state.items():
        if not name.endswith("weight") or weight.dim() != 2 or not weight.is_floating_point():
            continue
        path = name.removesuffix("weight").rstrip(".")
        if not path:
            raise ValueError("a weights file whose only matrix is named 'weight' is one layer: use SparseLinear")
        bias = state.get(f"{path}.bias")
        if bias is not None and tuple(bias.shape) != (weight.shape[0],):
            bias = None
        linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device="meta")
        linear.weight = nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            linear.bias = nn.Parameter(bias.to(weight.dtype), requires_grad=False)
        _place(root, path.split("."), linear)
        found += 1
    if not found:
        raise ValueError("the weights hold no 2-D floating-point '*.weight' tensor: nothing to sparsify")
    return root


def _place(root: nn.Module, parts: list[str], module: nn.Module) -> None:
    parent = root
    for part in parts[:-1]:
        child = parent._modules.get(part)
        if child is None:
            child = nn.Module()
            parent.add_module(part, child)
        parent = child
    held = parent._modules.get(parts[-1])
    if held is not None:  # a container made for deeper names ("a.b.weight" read before "a.weight")
        for name, child in held.named_children():
            module.add_module(name, child)
    parent.add_module(parts[-1], module)
