"""Problem grids from the command line: ``--op spmm --shape 4096x4096 --n 16,128 --sparsity 0.9``."""

from __future__ import annotations

import argparse
import itertools

from stuning.cli.errors import CLIError
from stuning.suite import PRESETS, SDDMMCase, Semi24Case, SpMMCase, preset

OPS = ("spmm", "sddmm", "semi24")
DTYPES = ("fp32", "fp16", "bf16")
MASKS = ("wgrad", "attention")  # SDDMMCase.family
LAYOUTS = {"k-contiguous": False, "k-strided": True}  # SDDMMCase.k_strided


def add_problem_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("problems (comma-separated lists; every combination is one problem)")
    g.add_argument("--op", default=None, help=f"ops: {', '.join(OPS)} (default spmm; with --suite or "
                   "--untried, every op)")
    g.add_argument("--shape", default="4096x4096", help="sparse matrix shapes MxK (SDDMM: the mask's MxN)")
    g.add_argument("--n", default="128", help="columns of the dense operand (tokens); SDDMM: the inner K")
    g.add_argument("--sparsity", default="0.9", help="fractions of zeros, e.g. 0.9,0.95 (not for semi24)")
    g.add_argument("--dtype", default="fp16", help=f"dtypes: {', '.join(DTYPES)}")
    g.add_argument("--skew", default="0", help="coefficient of variation of row lengths, e.g. 0,0.4")
    g.add_argument("--mask", default="wgrad",
                   help="SDDMM masks: wgrad (uniform random, a weight's shape) or attention (an L x L "
                        "attention pattern, as the suite's); both may be listed")
    g.add_argument("--layout", default="k-contiguous",
                   help="SDDMM operands: k-contiguous (A row-major, B a transposed view, as attention's Q "
                        "and K^T) or k-strided (A a transposed view, B row-major, as a weight gradient "
                        "dY^T @ X hands them; keyed apart); both may be listed")
    g.add_argument("--suite", default=None, choices=sorted(PRESETS),
                   help="use a preset of the standard suite instead of the grid options")


def add_search_args(p: argparse.ArgumentParser) -> None:
    """How a problem is searched: what ``tune`` and ``pretune`` share."""
    p.add_argument("--strategy", default="model+optuna", choices=["model", "model+optuna", "exhaustive"])
    p.add_argument("--trials", type=int, default=None, help="configs to time per problem (default: ~10%% of the space)")
    p.add_argument("--seconds", type=float, default=None,
                   help="time limit per problem, compiling included: from 20 s up, the first configs compile "
                        "in parallel in at most half of it (re-timing the best three adds about a second)")
    p.add_argument("--device", default=None, help="target device for --strategy model (e.g. h100, a100)")


def split_list(text: str, what: str, conv):
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise CLIError(f"--{what} is empty")
    try:
        return [conv(t) for t in items]
    except ValueError:
        raise CLIError(f"--{what}: cannot read {text!r}") from None


def parse_shape(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise CLIError(f"bad shape {text!r}: write it as MxK with positive integers, e.g. 4096x4096")
    return int(parts[0]), int(parts[1])


def parse_fraction(text: str) -> float:
    v = float(text)
    v = v / 100 if v > 1 else v
    if not 0 <= v < 1:
        raise CLIError(f"sparsity {text!r} is not a fraction of zeros in [0, 1)")
    return v


def cases_from_args(args) -> list:
    if args.suite:
        ops = split_list(args.op, "op", str) if args.op is not None else None
        return [c for cases in preset(args.suite, ops).values() for c in cases]
    ops = split_list(args.op or "spmm", "op", str)
    for op in ops:
        if op not in OPS:
            raise CLIError(f"unknown op {op!r}; choose from {', '.join(OPS)}")
    shapes = split_list(args.shape, "shape", parse_shape)
    ns = split_list(args.n, "n", int)
    if any(n <= 0 for n in ns):
        raise CLIError("--n values must be positive")
    sparsities = split_list(args.sparsity, "sparsity", parse_fraction)
    dtypes = split_list(args.dtype, "dtype", str)
    for d in dtypes:
        if d not in DTYPES:
            raise CLIError(f"unknown dtype {d!r}; choose from {', '.join(DTYPES)}")
    skews = split_list(args.skew, "skew", float)
    masks = split_list(getattr(args, "mask", "wgrad"), "mask", str)
    for mask in masks:
        if mask not in MASKS:
            raise CLIError(f"unknown SDDMM mask {mask!r}; choose from {', '.join(MASKS)}")
    layouts = split_list(getattr(args, "layout", "k-contiguous"), "layout", str)
    for layout in layouts:
        if layout not in LAYOUTS:
            raise CLIError(f"unknown SDDMM layout {layout!r}; choose from {', '.join(LAYOUTS)}")
    cases = []
    for op in ops:
        for (m, k), n, d in itertools.product(shapes, ns, dtypes):
            if op == "semi24":
                if d == "fp32":
                    continue  # the 2:4 kernel is fp16/bf16 only
                if k % 4:
                    raise CLIError(f"2:4 needs K to be a multiple of 4, got shape {m}x{k}")
                cases.append(Semi24Case(m, k, n, d))
            elif op == "spmm":
                cases += [SpMMCase(m, k, n, s, cv, d) for s in sparsities for cv in skews]
            else:
                if "attention" in masks and m != k:
                    raise CLIError(f"an attention mask is L x L, got shape {m}x{k}")
                cases += [SDDMMCase(m, k, n, s, d, mask, LAYOUTS[layout])
                          for s in sparsities for mask in masks for layout in layouts]
    if not cases:
        raise CLIError("no problem matches those options (2:4 takes fp16 or bf16 only)")
    return cases
