"""The offline compile tool (scripts/sass_stats.py): kernels compiled for sm_90a with no GPU.

These assert properties of the compiled code that the kernels' design relies on, read from the SASS
that Triton's own ptxas produces: they need no GPU, only the NVIDIA backend's binaries in the wheel.
The script runs in a subprocess because the suite imports the kernels under TRITON_INTERPRET=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sass_stats.py"
TOOLS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
pytestmark = pytest.mark.skipif(not (TOOLS / "ptxas").exists() or not (TOOLS / "cuobjdump").exists(),
                                reason="Triton's wheel has no ptxas/cuobjdump here")


def sass_stats(*args) -> list[dict]:
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    out = subprocess.run([sys.executable, str(SCRIPT), "--json", *args], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert rows and all("error" not in r for r in rows), rows
    return rows


def test_semi24_mmas_overlap_and_nothing_spills():
    # The transposed product keeps the rebuilt tile the MMA's shared-memory operand: at most one
    # warpgroup-MMA wait per K step (one per instruction, 8 a step, when W was the register operand).
    (wide,) = sass_stats("--configs", "64x128x128:1:8:4")
    assert wide["ops"]["HGMMA"] >= 4 and wide["wgmma_wait0"] <= 1
    assert wide["spill_stores"] == 0 and 0 < wide["registers"] <= 255
    # The rebuild uses bit tests and shifts, not per-element compares and selects.
    (small,) = sass_stats("--configs", "32x16x128:4:4:3", "--dtype", "bf16", "--ragged-k")
    assert small["ops"]["ISETP"] < small["loop_instructions"] // 10 and small["spill_stores"] == 0


@pytest.mark.parametrize("kernel,config", [("spmm", "8x8x16:8:4:2"), ("spmm-sell", "16x8x16:8:4:2")])
def test_spmm_loops_reduce_once_after_the_loop(kernel, config):
    (r,) = sass_stats("--kernel", kernel, "--configs", config)
    assert r["ops"]["FFMA"] > 0 and r["ops"]["SHFL"] == 0  # no cross-thread reduction every step
    assert r["per_unit"] < 7


def test_sddmm_tiled_attention_tile_fits_four_programs_an_sm():
    # The H100's L = 4096, K = 128, 95% entry (128 x 64 tiles, K in one step, 4 warps, CHUNK 256) runs
    # four programs an SM, as many as their 48 KB of shared memory allow, only at 128 registers a
    # thread or fewer; its product is on warpgroup MMAs. CHUNK 512 takes more registers (146 with
    # Triton 3.6), one program an SM fewer, and ran 11% slower there (BENCHMARKS.md 9y).
    (r,) = sass_stats("--kernel", "sddmm-tiled", "--configs", "128x64x128:256:4:4:2")
    assert r["registers"] <= 128 and r["spill_stores"] == 0 and r["ops"]["HGMMA"] > 0
    assert r["shared_bytes"] * 4 <= 228 * 1024
