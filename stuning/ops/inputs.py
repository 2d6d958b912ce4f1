"""Turning what users pass into what the launchers take, with errors that name the problem."""

from __future__ import annotations

import dataclasses

import torch

from stuning.formats import CSRMatrix


def as_csr(a, what: str) -> CSRMatrix:
    """A ``CSRMatrix`` from a ``CSRMatrix`` or a torch sparse CSR/COO tensor."""
    if isinstance(a, CSRMatrix):
        return a
    if isinstance(a, torch.Tensor) and a.layout in (torch.sparse_csr, torch.sparse_coo):
        return CSRMatrix.from_torch(a)
    if isinstance(a, torch.Tensor):
        raise TypeError(
            f"{what} must be a CSRMatrix or a torch sparse CSR/COO tensor, got a dense tensor "
            f"(use CSRMatrix.from_dense to convert it)"
        )
    raise TypeError(f"{what} must be a CSRMatrix or a torch sparse CSR tensor, got {type(a).__name__}")


def dense_2d(x, what: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(f"{what} must be a dense (strided) tensor, got layout {x.layout}")
    if x.dim() != 2:
        raise ValueError(f"{what} must be 2-D, got shape {tuple(x.shape)}")
    return x


def resolve_config(config, config_cls, default_fn, problem):
    """``None`` gives the default heuristic; a dict is read as the config's fields."""
    if config is None:
        return default_fn(problem)
    if isinstance(config, config_cls):
        return config
    if isinstance(config, dict):
        names = {f.name for f in dataclasses.fields(config_cls)}
        unknown = set(config) - names
        if unknown:
            raise ValueError(f"unknown {config_cls.__name__} fields {sorted(unknown)}; known: {sorted(names)}")
        return config_cls(**config)
    raise TypeError(f"config must be a {config_cls.__name__}, a dict or None, got {type(config).__name__}")
