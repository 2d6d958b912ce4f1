"""Offline sm_90a compile (Triton 3.6, no GPU) of scripts/probe_swap_analog.py's kernels: registers,
shared memory and SASS counts. Run from the repository root: python3 benchmarks/h200-swap-analog/compile_analog.py"""
import collections
import os
import re
import sys

os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, "scripts")
import probe_swap_analog as P  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
from sass_stats import sass_of  # noqa: E402
from stuning.kernels.semi24_hopper import nvmma_layout  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from triton.runtime.jit import mangle_type  # noqa: E402


def desc(shape, block):
    t = torch.empty(*shape, dtype=torch.float16)
    return mangle_type(TensorDescriptor(t, list(t.shape), list(t.stride()), block,
                                        nvmma_layout(tuple(block), torch.float16)))


def build(kind, warps, stages, bm=64, bk=128, n=128):
    if kind == "ax":
        fn = P._ax_kernel
        consts = dict(SPLIT_K=2, BM=bm, BK=bk, BN=n, STAGES=stages, FIXED=0, num_warps=warps)
        sig = {"a_desc": desc((256, 4096), [bm, bk]), "x_desc": desc((4096, n), [bk, n]), "y_ptr": "*fp32",
               "M": "i32", "N": "i32", "K_TILES": "i32", "A_ROWS": "i32"}
        al = ("y_ptr", "M", "N")
    else:
        fn = P._xta_kernel
        consts = dict(SPLIT_K=2, BM=bm, BK=bk, NX=n, STAGES=stages, num_warps=warps)
        sig = {"a_desc": desc((256, 4096), [bm, bk]), "xt_ptr": "*fp16", "y_ptr": "*fp32", "M": "i32", "N": "i32",
               "K_TILES": "i32", "A_ROWS": "i32", "stride_xn": "i32"}
        al = ("xt_ptr", "y_ptr", "M", "N", "stride_xn")
    sig.update(dict.fromkeys(consts, "constexpr"))
    aligned = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in al}
    src = GluonASTSource(fn, sig, {(fn.arg_names.index(k),): v for k, v in consts.items()}, aligned)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    sass, usage = sass_of(k)
    ops = collections.Counter(m.group(1) for m in re.finditer(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass))
    regs = re.search(r"REG:\d+", usage).group(0), re.search(r"LOCAL:\d+", usage).group(0)
    print(kind, warps, stages, *regs, k.metadata.shared,
          {o: c for o, c in ops.items() if o.startswith(("LDG", "HGMMA", "LDS", "STS", "BAR", "WARPGROUP"))})
    return k


for kind, w, st in (("ax", 4, 4), ("xta", 4, 4), ("xta", 8, 4)):
    build(kind, w, st)
