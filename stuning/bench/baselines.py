"""stuning's kernel and the vendor paths a PyTorch user would reach for, on the inputs of one case.

* ``dense``: cuBLAS ``torch.mm`` of the same matrix stored dense (zeros included), same dtype (the
  caller turns TF32 off for fp32);
* ``cusparse``: ``torch.sparse.mm`` on a torch sparse CSR tensor (SpMM), or
  ``torch.sparse.sampled_addmm`` (SDDMM; fp32 only on CUDA, n/a for fp16/bf16);
* ``cslt``: cuSPARSELt, ``torch._cslt_compress`` once, ``torch._cslt_sparse_mm`` timed (2:4);
* ``torch24``: ``torch.sparse.to_sparse_semi_structured(W)`` converted once, then ``W_s @ X``;
  ``torch24_conv``: conversion plus matmul on every call (2:4).

The vendor paths other than ``dense`` need CUDA; without a GPU they are absent and the runner
notes them as unavailable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

import stuning
from stuning.bench import error_text
from stuning.formats import CSRMatrix, Semi24Matrix
from stuning.kernels import sddmm as sddmm_kernel
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels import spmm as spmm_kernel
from stuning.matrices import random_dense, random_semi24, random_sparse
from stuning.ops.sddmm import problem_of as sddmm_problem
from stuning.ops.semi24 import problem_of as semi24_problem
from stuning.ops.spmm import problem_of as spmm_problem
from stuning.tuning.features import ProblemFeatures, sddmm_features, semi24_features, spmm_features

BASELINES = ("dense", "cusparse", "cslt", "torch24", "torch24_conv")
OP_BASELINES = {
    "spmm": ("dense", "cusparse"),
    "sddmm": ("dense", "cusparse"),
    "semi24": ("dense", "cslt", "torch24", "torch24_conv"),
}
# Relative Frobenius error allowed against the fp32 dense product (fp32 accumulation everywhere;
# fp16/bf16 outputs are rounded once). Tighter than the tuner's: these are the default configs,
# and the first table's `ok` column was judged against these values.
TOLERANCE = {"fp32": 1e-4, "fp16": 2e-3, "bf16": 1.5e-2}


@dataclass
class CaseInputs:
    """One case's inputs, ready to run: stuning's kernel for any config, and the baselines."""

    run_stuning: Callable[[object], torch.Tensor]  # config (None: the library chooses) -> output
    heuristic: object  # the kernel's default config for this problem
    features: Callable[[], ProblemFeatures]  # computed only when the library's choice is recorded
    reference: torch.Tensor  # fp32 product at the entries stuning computes
    baselines: dict[str, Callable[[], torch.Tensor] | None] = field(default_factory=dict)
    to_reference: dict[str, Callable[[torch.Tensor], torch.Tensor]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # why a baseline is missing or adapted
    info: dict = field(default_factory=dict)  # result columns known before timing (nnz, bytes)


def spmm_inputs(case, *, device: str, generator: torch.Generator, pad_to: int, on_gpu: bool) -> CaseInputs:
    dt = case.torch_dtype
    a_dense = random_sparse(case.m, case.k, case.sparsity, skew_cv=case.skew_cv, dtype=dt, device=device,
                            generator=generator)
    b = random_dense(case.k, case.n, dtype=dt, device=device, generator=generator)
    a0 = CSRMatrix.from_dense(a_dense)
    a = a0.padded(pad_to)
    inputs = CaseInputs(
        run_stuning=lambda config: stuning.spmm(a, b, config=config),
        heuristic=spmm_kernel.heuristic(spmm_problem(a, b)),
        features=lambda: spmm_features(a, case.n),
        reference=a_dense.float() @ b.float(),
        baselines={"dense": lambda: torch.mm(a_dense, b)},
        info={
            "nnz": a0.nnz,
            "dense_bytes": a_dense.numel() * a_dense.element_size(),
            "format_bytes": a.nbytes(),
            "vendor_bytes": a0.nbytes(),
            "row_cv": a0.stats().cv,
        },
    )
    if on_gpu:
        csr = torch.sparse_csr_tensor(a0.crow, a0.col, a0.values, a0.shape)
        inputs.baselines["cusparse"] = lambda: torch.sparse.mm(csr, b)
    return inputs


def sddmm_inputs(case, *, device: str, generator: torch.Generator, pad_to: int, on_gpu: bool) -> CaseInputs:
    dt = case.torch_dtype
    mask_dense = random_sparse(case.m, case.n, case.sparsity, dtype=dt, device=device, generator=generator)
    mask = CSRMatrix.from_dense(mask_dense)
    a = random_dense(case.m, case.k, dtype=dt, device=device, generator=generator)
    b = random_dense(case.n, case.k, dtype=dt, device=device, generator=generator).t()  # K x N, K contiguous
    rows, cols = mask.row_ids().long(), mask.col.long()
    inputs = CaseInputs(
        run_stuning=lambda config: stuning.sddmm(mask, a, b, config=config).values,
        heuristic=sddmm_kernel.heuristic(sddmm_problem(mask, a)),
        features=lambda: sddmm_features(mask, case.k, a.dtype),
        reference=(a.float() @ b.float())[rows, cols],
        baselines={"dense": lambda: torch.mm(a, b)},
        # The dense product is checked at the mask's nonzeros only.
        to_reference={"dense": lambda out: out[rows, cols]},
        info={
            "nnz": mask.nnz,
            "dense_bytes": case.m * case.n * mask_dense.element_size(),
            "format_bytes": mask.nbytes(),
            "vendor_bytes": mask.nbytes(),
        },
    )
    if on_gpu:
        if dt == torch.float32:
            mask_t = torch.sparse_csr_tensor(mask.crow, mask.col, mask.values, mask.shape)
            inputs.baselines["cusparse"] = lambda: torch.sparse.sampled_addmm(mask_t, a, b, beta=0.0).values()
        else:
            inputs.notes["cusparse"] = "n/a: torch.sparse.sampled_addmm supports only fp32/fp64 on CUDA"
    return inputs


def semi24_inputs(case, *, device: str, generator: torch.Generator, pad_to: int, on_gpu: bool) -> CaseInputs:
    dt = case.torch_dtype
    w = random_semi24(case.m, case.k, dtype=dt, device=device, generator=generator)
    x = random_dense(case.k, case.n, dtype=dt, device=device, generator=generator)
    w24 = Semi24Matrix.from_dense(w)
    inputs = CaseInputs(
        run_stuning=lambda config: stuning.semi24_mm(w24, x, config=config),
        heuristic=semi24_kernel.heuristic(semi24_problem(w24, x)),
        features=lambda: semi24_features(case.m, case.k, case.n, dt),
        reference=w.float() @ x.float(),
        baselines={"dense": lambda: torch.mm(w, x)},
        info={
            "nnz": case.m * case.k // 2,
            "dense_bytes": w.numel() * w.element_size(),
            "format_bytes": w24.nbytes(),
        },
    )
    if on_gpu:
        _add_cusparselt(inputs, w, x, case.n)
        _add_torch_semi_structured(inputs, w, x)
    return inputs


def _add_cusparselt(inputs: CaseInputs, w: torch.Tensor, x: torch.Tensor, n: int) -> None:
    """cuSPARSELt directly: compress once, time the matmul."""
    try:
        compressed = torch._cslt_compress(w)
        inputs.info["vendor_bytes"] = compressed.numel() * compressed.element_size()
        fn, err = _runs(lambda: torch._cslt_sparse_mm(compressed, x))
        if fn is None and n % 8:
            # cuSPARSELt wants N aligned; pad X once (what torch's wrapper does on every call).
            n_pad = (n + 7) // 8 * 8
            xp = torch.nn.functional.pad(x, (0, n_pad - n))
            fn, err2 = _runs(lambda: torch._cslt_sparse_mm(compressed, xp)[:, :n])
            inputs.notes["cslt"] = f"X padded to N={n_pad} (unpadded: {err})" if fn else f"{err}; padded: {err2}"
        elif fn is None:
            inputs.notes["cslt"] = err
        inputs.baselines["cslt"] = fn
    except Exception as e:
        inputs.notes["cslt"] = error_text(e)


def _add_torch_semi_structured(inputs: CaseInputs, w: torch.Tensor, x: torch.Tensor) -> None:
    """torch's SparseSemiStructuredTensor: converted once, and converted on every call."""
    try:
        from torch.sparse import to_sparse_semi_structured

        ws = to_sparse_semi_structured(w)
        inputs.info["torch24_backend"] = type(ws).__name__
        for name, fn in (("torch24", lambda: torch.mm(ws, x)),
                         ("torch24_conv", lambda: torch.mm(to_sparse_semi_structured(w), x))):
            inputs.baselines[name], err = _runs(fn)
            if err:
                inputs.notes[name] = err
    except Exception as e:
        inputs.notes["torch24"] = inputs.notes["torch24_conv"] = error_text(e)


def _runs(fn) -> tuple[Callable | None, str | None]:
    """(fn, None) if ``fn`` runs once, else (None, the error)."""
    try:
        fn()
        return fn, None
    except Exception as e:
        return None, error_text(e)


INPUTS = {"spmm": spmm_inputs, "sddmm": sddmm_inputs, "semi24": semi24_inputs}
