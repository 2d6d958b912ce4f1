"""The ``stuning`` command: one sub-command per module of this package."""

from __future__ import annotations

import argparse
import json
import sys

from stuning.cli import bench, calibrate, db, pretune, sweep, tune
from stuning.cli.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CLIError


def _demo(args: argparse.Namespace) -> int:
    from stuning.cli import demo

    report = demo.run(sparsity=args.sparsity, n=args.n, seed=args.seed, quiet=args.json)
    if args.json:
        print(json.dumps(report, indent=2))
    return EXIT_OK if report["ok"] else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stuning", description="Sparse Triton kernels and their tuner.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "demo",
        help="sparsify a weight matrix, pick configs, run every kernel and check it",
        description="Prune a random weight matrix (unstructured and 2:4), run SpMM, SDDMM and the 2:4 kernel "
        "with their chosen configs, and check each against a float64 reference. Without a GPU it runs "
        "through Triton's interpreter on a small matrix.",
    )
    p.add_argument("--sparsity", type=float, default=0.9, help="fraction of zeros for the CSR kernels (0..1)")
    p.add_argument("--n", type=int, default=None, help="columns of the dense operand (tokens)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.set_defaults(func=_demo)
    tune.register(sub)
    db.register(sub)
    calibrate.register(sub)
    bench.register(sub)
    sweep.register(sub)
    pretune.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CLIError as e:
        print(f"stuning {args.command}: error: {e}", file=sys.stderr)
        return e.code
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as e:
        # CorruptDatabaseError is a ValueError: its message names the file.
        print(f"stuning {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE if not isinstance(e, RuntimeError) else EXIT_FAILED
    except KeyboardInterrupt:
        # Tuning commands store each problem's entry as it finishes: say so rather than a traceback.
        print(f"stuning {args.command}: interrupted; what finished before it is kept", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
