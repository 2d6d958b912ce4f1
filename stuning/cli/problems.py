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
# The grid's values where an option is not given. With --suite, an option not given keeps all.
GRID_DEFAULTS = {"shape": "4096x4096", "n": "128", "sparsity": "0.9", "dtype": "fp16", "skew": "0",
                 "mask": "wgrad", "layout": "k-contiguous"}


def add_problem_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("problems (comma-separated lists; every combination is one problem)")
    g.add_argument("--op", default=None, help=f"ops: {', '.join(OPS)} (default spmm; with --suite or "
                   "--untried, every op)")
    g.add_argument("--shape", default=None, help="sparse matrix shapes MxK (SDDMM: the mask's MxN; default "
                   f"{GRID_DEFAULTS['shape']})")
    g.add_argument("--n", default=None, help="columns of the dense operand (tokens); SDDMM: the inner K "
                   f"(default {GRID_DEFAULTS['n']})")
    g.add_argument("--sparsity", default=None, help="fractions of zeros, e.g. 0.9,0.95 (not for semi24; default "
                   f"{GRID_DEFAULTS['sparsity']})")
    g.add_argument("--dtype", default=None, help=f"dtypes: {', '.join(DTYPES)} (default {GRID_DEFAULTS['dtype']})")
    g.add_argument("--skew", default=None, help="coefficient of variation of row lengths, e.g. 0,0.4 (default "
                   f"{GRID_DEFAULTS['skew']})")
    g.add_argument("--mask", default=None,
                   help="SDDMM masks: wgrad (uniform random, a weight's shape) or attention (an L x L "
                        "attention pattern, as the suite's); both may be listed (default wgrad)")
    g.add_argument("--layout", default=None,
                   help="SDDMM operands: k-contiguous (A row-major, B a transposed view, as attention's Q "
                        "and K^T) or k-strided (A a transposed view, B row-major, as a weight gradient "
                        "dY^T @ X hands them; keyed apart); both may be listed (default k-contiguous)")
    g.add_argument("--suite", default=None, choices=sorted(PRESETS),
                   help="use a preset of the standard suite instead of the grid; the problem options "
                        "given with it keep only the suite's problems they name")


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
        cases = [c for cases in preset(args.suite, ops).values() for c in cases]
        return _restricted(cases, _options(args, {}))
    ops = split_list(args.op or "spmm", "op", str)
    for op in ops:
        if op not in OPS:
            raise CLIError(f"unknown op {op!r}; choose from {', '.join(OPS)}")
    opts = _options(args, GRID_DEFAULTS)
    shapes, ns, sparsities, dtypes, skews, masks, layouts = (
        opts[name] for name in ("shape", "n", "sparsity", "dtype", "skew", "mask", "layout"))
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


def _options(args, defaults: dict) -> dict:
    """The problem options, parsed and checked: each a list, or None where not given and without a
    default in ``defaults``."""
    convs = {"shape": parse_shape, "n": int, "sparsity": parse_fraction, "dtype": str, "skew": float,
             "mask": str, "layout": str}
    allowed = {"dtype": DTYPES, "mask": MASKS, "layout": tuple(LAYOUTS)}
    what = {"dtype": "dtype", "mask": "SDDMM mask", "layout": "SDDMM layout"}
    opts = {}
    for name, conv in convs.items():
        text = getattr(args, name, None)
        text = defaults.get(name) if text is None else text
        if text is None:
            opts[name] = None
            continue
        values = split_list(text, name, conv)
        for v in values:
            if name in allowed and v not in allowed[name]:
                raise CLIError(f"unknown {what[name]} {v!r}; choose from {', '.join(allowed[name])}")
        if name == "n" and any(n <= 0 for n in values):
            raise CLIError("--n values must be positive")
        opts[name] = values
    return opts


def _matches(case, opts: dict) -> bool:
    """Whether a suite case is among the values of each option given; an option that does not apply
    to the case's op (--sparsity for 2:4, --skew outside SpMM, --mask and --layout outside SDDMM)
    keeps it."""
    sddmm = isinstance(case, SDDMMCase)
    values = {
        "shape": (case.m, case.n) if sddmm else (case.m, case.k),
        "n": case.k if sddmm else case.n,
        "dtype": case.dtype,
        "sparsity": getattr(case, "sparsity", None),
        "skew": getattr(case, "skew_cv", None),
        "mask": case.family if sddmm else None,
        "layout": ("k-strided" if case.k_strided else "k-contiguous") if sddmm else None,
    }
    for name, wanted in opts.items():
        v = values[name]
        if wanted is None or v is None:
            continue
        if isinstance(v, float) and not any(abs(v - w) < 1e-9 for w in wanted):
            return False
        if not isinstance(v, float) and v not in wanted:
            return False
    return True


def _restricted(cases: list, opts: dict) -> list:
    kept = [c for c in cases if _matches(c, opts)]
    if not kept:
        given = ", ".join(f"--{k} {','.join(map(str, v))}" for k, v in opts.items() if v is not None)
        raise CLIError(f"no problem of the suite matches {given}")
    return kept
