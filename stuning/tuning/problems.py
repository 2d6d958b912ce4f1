"""Concrete problems to tune: random inputs for a suite case, a runner per config, a reference.

Runs go through the kernels' own launchers, the ones the public ops call, so what is timed is what
users get.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from stuning.formats import CSRMatrix, Semi24Matrix, output_tiles
from stuning.kernels import sddmm as sddmm_kernel
from stuning.matrices import random_semi24, random_sparse
from stuning.suite import SDDMMCase, Semi24Case, SpMMCase
from stuning.tuning.features import ProblemFeatures, sddmm_features, semi24_features, spmm_features
from stuning.tuning.launch import launch_semi24, launch_spmm
from stuning.tuning.registry import TORCH_DTYPES


@dataclass
class Problem:
    case: object
    features: ProblemFeatures
    # (config, out=None) -> out: the product written into ``out`` (one ``output()`` made; a fresh one
    # when None), the tensor the reference checks.
    run: Callable[..., torch.Tensor]
    reference: torch.Tensor
    inputs: dict
    # The same product done dense (the zeros stored; cuBLAS on a GPU): the baseline the tuned time
    # is worth comparing with.
    dense_run: Callable[[], torch.Tensor] | None = None
    # An output laid out as the op's users get it, where that is not the reference's (Y^T as a layer
    # writes it).
    new_output: Callable[[], torch.Tensor] | None = None

    def output(self) -> torch.Tensor:
        """An uninitialised tensor for ``run`` to write into."""
        if self.new_output is not None:
            return self.new_output()
        return torch.empty_like(self.reference, dtype=TORCH_DTYPES[self.features.dtype])


def spmm_problem(case: SpMMCase, *, device=None, seed: int = 0, b_transposed: bool = False) -> Problem:
    """A suite SpMM case's random inputs; ``b_transposed``: B a transposed view of an N x K tensor
    and Y written through a transposed view of an N x M one, as ``SparseLinear`` hands them to the
    kernels (keyed ``bt=1``)."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = case.torch_dtype
    dense = random_sparse(case.m, case.k, case.sparsity, skew_cv=case.skew_cv, dtype=dtype, device=device,
                          generator=gen)
    a = CSRMatrix.from_dense(dense)
    shape = (case.n, case.k) if b_transposed else (case.k, case.n)
    b = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
    b = b.t() if b_transposed else b
    ref = dense.float() @ b.float()

    def run(c, out=None):
        return launch_spmm(a, b, c, out=out)

    new_output = None
    if b_transposed:
        def new_output():
            return torch.empty(case.n, case.m, dtype=dtype, device=device).t()

    return Problem(case, spmm_features(a, case.n, b_transposed=b_transposed), run, ref, {"a": a, "b": b},
                   lambda: dense @ b, new_output)


def sddmm_problem_on(case: SDDMMCase, mask: CSRMatrix, gen: torch.Generator) -> Problem:
    """The SDDMM ``case`` on a given ``mask`` (its m x n, on the generator's device), random A and B
    laid out as the case says."""
    dtype, device = case.torch_dtype, mask.device

    def rows_by_k(rows):  # a random rows x K matrix, K contiguous unless the case says strided
        shape = (case.k, rows) if case.k_strided else (rows, case.k)
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
        return x.t() if case.k_strided else x

    # By default K is contiguous in both, as in attention's Q and K^T; a weight gradient's dY^T is
    # a transposed view and its X row-major.
    a, b = rows_by_k(case.m), rows_by_k(case.n).t()
    row_ids = mask.row_ids()
    ref = (a.float() @ b.float())[row_ids.long(), mask.col.long()]
    # The tiled kernel's tiles are built on its first run (the objective's check, untimed) and cached.
    tiles = functools.partial(output_tiles, mask)

    def run(c, out=None):
        return sddmm_kernel.sddmm(row_ids, mask.col, mask.values, a, b, alpha=1.0, beta=0.0, config=c,
                                  tiles=tiles, crow=mask.crow, out=out)

    return Problem(case, sddmm_features(mask, case.k, dtype, a_transposed=case.k_strided), run, ref,
                   {"mask": mask, "a": a, "b": b}, lambda: a @ b)


def build_problem(case, *, device=None, seed: int = 0) -> Problem:
    """Random inputs shaped by ``case`` (a suite case) on ``device``, and how to run them."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = case.torch_dtype
    if isinstance(case, SpMMCase):
        return spmm_problem(case, device=device, seed=seed)
    if isinstance(case, SDDMMCase):
        mask_dense = random_sparse(case.m, case.n, case.sparsity, dtype=dtype, device=device, generator=gen)
        return sddmm_problem_on(case, CSRMatrix.from_dense(mask_dense), gen)
    if isinstance(case, Semi24Case):
        w_dense = random_semi24(case.m, case.k, dtype=dtype, device=device, generator=gen)
        w = Semi24Matrix.from_dense(w_dense)
        x = torch.randn(case.k, case.n, generator=gen, device=device, dtype=torch.float32).to(dtype)
        ref = w.to_dense().float() @ x.float()

        def run(c, out=None):
            return launch_semi24(w, x, c, out=out)

        return Problem(case, semi24_features(case.m, case.k, case.n, dtype), run, ref, {"w": w, "x": x},
                       lambda: w_dense @ x)
    raise TypeError(f"not a suite case: {case!r}")
