#!/usr/bin/env python3
"""The first benchmark table: stuning's kernels against the vendor paths. A wrapper of ``stuning bench``
(stuning/cli/bench.py; the machinery is in stuning/bench/), kept so that the command lines in
BENCHMARKS.md still run; it takes the same flags.

    python3 scripts/bench_baselines.py --preset quick --out OUT           # ~1 minute on an H100
    python3 scripts/bench_baselines.py --preset first-table --out OUT     # ~2-4 minutes on an H100
    python3 scripts/bench_baselines.py --smoke --out /tmp/bb              # CPU, Triton interpreter
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--smoke" in argv:
        # The CPU smoke run, even on a GPU machine: the interpreter is chosen before the kernels are defined.
        os.environ["TRITON_INTERPRET"] = "1"
    from stuning.cli.main import main as stuning_main

    return stuning_main(["bench", *argv])


if __name__ == "__main__":
    sys.exit(main())
