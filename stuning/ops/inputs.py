"""Turning what users pass into what the launchers take, with errors that name the problem."""

from __future__ import annotations

import dataclasses

import torch

from stuning.formats import CSRMatrix
from stuning.ops.selection import SELECTOR
from stuning.tuning.features import alignment, bucket_tokens
from stuning.tuning.session import key_for


def tuned_config(operand, op: str, width: int, dtype, make_features, *, transposed: bool = False):
    """The chosen config for ``operand`` (a static matrix) applied to ``width`` columns.

    Keyed on the operand itself by (op, width bucket, width alignment, dtype, whether the dense
    operands come in the other layout the database keys apart: SpMM's B a transposed view, SDDMM's
    A with K strided): every width sharing those gets a config valid for it, so repeated
    calls skip features and keys entirely.
    """
    def choose():
        features = make_features()
        return SELECTOR.choose(features, key_for(features))[0]

    return _cached(operand, (op, bucket_tokens(width), alignment(width), dtype, transposed), choose)


def dense_is_faster(operand, op: str, width: int, dtype, make_features, *, transposed: bool = False) -> bool:
    """Whether the tuning database measured ``operand``'s product with ``width`` columns faster done
    dense (cached on the operand by the same slot as ``tuned_config``)."""
    return _cached(operand, ("dense", op, bucket_tokens(width), alignment(width), dtype, transposed),
                   lambda: SELECTOR.dense_faster(key_for(make_features())))


def _cached(operand, slot: tuple, compute):
    """``compute()``, once per ``slot`` of the operand's cache: a forward's per-call cost is this lookup."""
    hit = operand.cache.get(slot)
    if hit is None:
        hit = operand.cache[slot] = compute()
    return hit


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


def require_dtype(what: str, dtype: torch.dtype, supported: tuple) -> None:
    """Checked before a config is chosen, since choosing one reads features of that dtype."""
    if dtype not in supported:
        raise TypeError(f"{what}: dtype {dtype} is not supported; use one of {supported}")


def resolve_config(config, config_cls, tuned):
    """``None`` asks ``tuned()`` (database, model, heuristic); a dict is read as the config's fields."""
    if config is None:
        return tuned()
    if isinstance(config, config_cls):
        return config
    if isinstance(config, dict):
        names = {f.name for f in dataclasses.fields(config_cls)}
        unknown = set(config) - names
        if unknown:
            raise ValueError(f"unknown {config_cls.__name__} fields {sorted(unknown)}; known: {sorted(names)}")
        return config_cls(**config)
    raise TypeError(f"config must be a {config_cls.__name__}, a dict or None, got {type(config).__name__}")
