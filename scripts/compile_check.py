"""Compile, for sm_90a and without a GPU, every kernel config the GPU tests launch.

Device time is scarce and a config Triton cannot compile costs a whole `pytest -m gpu` run to
find. This compiles the configs tests/test_gpu.py parametrizes for the 2:4 and SpMM (CSR, sliced
ELL) kernels, in fp16 and bf16 (2:4 also with a ragged K, sliced ELL also with slices of their own
lengths), with the ptxas that Triton's wheel carries, and names each failure. Use the Triton
version of the GPU (3.6 there).

    python3 scripts/compile_check.py          # exit status 1 when any config fails to compile
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # the interpreter would replace the JIT functions
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "scripts")]

import sass_stats  # noqa: E402
import test_gpu  # noqa: E402


def jobs() -> list[tuple[str, object, str]]:
    """(kernel, config, test) for every explicit config of the GPU tests (None: the op's own choice)."""
    out = []
    for kernel, params, test in (
        ("semi24", test_gpu.semi24_params(), "test_semi24"),
        ("spmm", test_gpu.spmm_params(), "test_spmm_uniform"),
        ("spmm-sell", test_gpu.sell_params(), "test_spmm_sell_uniform"),
    ):
        for p in params:
            config = p.values[-1]
            if config is not None:
                out.append((kernel, config, f"{test}[{p.id}]"))
    return out


def main() -> int:
    todo = jobs()
    failures = 0
    for kernel, config, test in todo:
        spec, _ = sass_stats.KERNELS[kernel]
        for dtype in ("fp16", "bf16"):
            # 2:4 also with a ragged K; sliced ELL with slices of their own lengths too
            for ragged in (False, True) if kernel in ("semi24", "spmm-sell") else (False,):
                try:
                    sass_stats.compile_config(spec, config, dtype, ragged)
                except Exception as e:
                    failures += 1
                    reason = str(e).strip().splitlines()[-1][:160]
                    print(f"FAIL {test} {dtype}{' ragged' if ragged else ''}: {reason}", flush=True)
    print(f"{len(todo)} configs of the GPU tests compiled for sm_90a (fp16, bf16): {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
