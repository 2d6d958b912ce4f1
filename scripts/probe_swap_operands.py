"""Compile-only probe (no GPU): can Gluon 3.6 run the scatter kernel's product the other way round?

Today a scatter step (``kernels/spmm_scatter.py``) multiplies A's tile (shared memory, the warpgroup
MMA's A operand) with X's tile (TMA into shared memory, its B operand): at N = 128 about 80 KB move
through an SM's shared memory a step (X written, X read, A read), and BENCHMARKS.md 8r-8s found no
saturated unit but no gain from more warps, deeper prefetch, wider steps or larger tiles. Computing
Y^T = X^T A^T instead keeps A's tile in shared memory as the B operand and takes X^T as the A operand
in registers, loaded from global memory (L2) straight into the MMA's layout: about 32 KB a step.

This compiles a minimal dense form of that step for sm_90a with the ptxas Triton carries: W's
(BM x BK) tile by TMA into shared memory, read as B through a permuted view, X^T's (NX x BK) tile by
``gl.load`` in the MMA's A-operand layout. It prints each config's registers, shared memory and
SASS counts. On 2026-11-25 (Triton 3.6): ``HGMMA.64x64x16.F32 R56, R88, gdesc[UR4]`` (A from
registers), 32 four-byte ``LDG.E`` a thread a 64-wide step and no shared-memory load or store for X.
Nothing here is timed. ``scripts/probe_swap_analog.py`` then timed a pipelined dense form on the H200
(BENCHMARKS.md 8t): 4x slower than today's step, and dropped.

    python3 scripts/probe_swap_operands.py      # with Triton 3.6 installed (the GPU's release)
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

os.environ["TRITON_INTERPRET"] = "0"

import torch  # noqa: E402
import triton  # noqa: E402

if not triton.__version__.startswith("3.6"):
    sys.exit(f"probe_swap_operands: written for Triton 3.6's Gluon, found {triton.__version__}")

from sass_stats import sass_of  # noqa: E402  (scripts/ is on the path: run as a script)
from stuning.kernels.semi24_hopper import nvmma_layout  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from triton.runtime.jit import mangle_type  # noqa: E402


@gluon.jit
def _swapped_step_kernel(xt_ptr, w_desc, y_ptr, M, K, stride_xn, NX: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr,
                         num_warps: gl.constexpr):
    """Y^T[:, band] = X^T W[band]^T for one band of BM rows of W, one K step after another."""
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BM, 16])
    xt_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    pid_m = gl.program_id(0)
    w_smem = gl.allocate_shared_memory(w_desc.dtype, [BM, BK], w_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    offs_n = gl.arange(0, NX, layout=gl.SliceLayout(1, xt_layout))
    offs_k = gl.arange(0, BK, layout=gl.SliceLayout(0, xt_layout))
    acc = gl.zeros((NX, BM), gl.float32, acc_layout)
    phase = 0
    for k0 in range(0, K, BK):
        mbarrier.expect(bar, BM * BK * 2)
        tma.async_copy_global_to_shared(w_desc, [pid_m * BM, k0], bar, w_smem)
        xt = gl.load(xt_ptr + offs_n[:, None] * stride_xn + (k0 + offs_k)[None, :])
        mbarrier.wait(bar, phase)
        phase ^= 1
        acc = warpgroup_mma(xt, w_smem.permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        gl.thread_barrier()  # the MMA has read the tile before the next copy overwrites it
    offs_yn = gl.arange(0, NX, layout=gl.SliceLayout(1, acc_layout))
    offs_ym = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(0, acc_layout))
    gl.store(y_ptr + offs_yn[:, None] * M + offs_ym[None, :], acc.to(gl.float16))


def compile_config(nx: int, bm: int, bk: int, num_warps: int = 4) -> dict:
    w = torch.empty(4096, 4096, dtype=torch.float16)
    desc = TensorDescriptor(w, list(w.shape), list(w.stride()), [bm, bk], nvmma_layout((bm, bk), torch.float16))
    fn = _swapped_step_kernel
    consts = {"NX": nx, "BM": bm, "BK": bk, "num_warps": num_warps}
    signature = {"xt_ptr": "*fp16", "w_desc": mangle_type(desc), "y_ptr": "*fp16", "M": "i32", "K": "i32",
                 "stride_xn": "i32", **dict.fromkeys(consts, "constexpr")}
    aligned = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in ("xt_ptr", "y_ptr", "M", "stride_xn")}
    src = GluonASTSource(fn, signature, {(fn.arg_names.index(k),): v for k, v in consts.items()}, aligned)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
    sass, usage = sass_of(kernel)
    ops = Counter(m.group(1) for m in re.finditer(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass))
    return {"config": f"NX={nx} BM={bm} BK={bk}", "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
            "shared_bytes": kernel.metadata.shared,
            "ops": {op: n for op, n in sorted(ops.items()) if op.startswith(("LDG", "HGMMA", "LDS", "STS", "LDSM"))},
            "mma": sorted({line.split("*/")[1].strip().split(";")[0] for line in sass.splitlines()
                           if "HGMMA" in line})[:1]}


def main() -> int:
    for nx, bm, bk in ((128, 64, 64), (128, 128, 64), (64, 128, 64)):
        print(compile_config(nx, bm, bk), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
