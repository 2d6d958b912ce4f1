import os; os.environ['TRITON_INTERPRET'] = '0'
import sys, torch, triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import mangle_type
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from stuning.kernels import spmm_scatter as S
from stuning.kernels.semi24_hopper import nvmma_layout
from stuning.kernels.split_k_cluster import replicated_layout

def build(bm, bk, bn, stages, split, xt=False):
    ctas = S.cluster_ctas(split, bm, bk, bn, stages)
    slots, a_bytes, x_bytes = S.buffer_bytes(bm, bk, bn, stages)
    block = [bn, bk] if xt else [bk, bn]
    lay = nvmma_layout(tuple(block), torch.float16)
    t = torch.empty(4096, 4096, dtype=torch.float16)
    desc = TensorDescriptor(t, [4096, 4096], [4096, 1], block, replicated_layout(lay, ctas) if ctas > 1 else lay)
    fn = S._spmm_scatter_kernel
    names = fn.arg_names
    sig = {}
    types = dict(tile_ptr="*i32", ent_ptr="*i32", capacity_fours="i32", y_ptr="*fp16", bias_ptr="*fp16",
                 partial_ptr="*fp32", count_ptr="*i32", M="i32", N="i32", stride_ym="i32", stride_yn="i32", K_TILES="i32")
    chunk = 256 * (bm // 64)
    const = dict(BM=bm, BN=bn, BK=bk, SPLIT_K=split, STAGES=stages, SLOTS=slots,
                 A_OFFSET=0 if a_bytes > x_bytes else x_bytes, CHUNK=chunk, RING=S.ring_stages(bm, bk, chunk),
                 FIXED=True, X_T=xt, HAS_BIAS=False, SLICES=False, CLEAR=True, CTAS=ctas, Y_PAIRS=True,
                 num_warps=4 * bm // 64)
    for nm in names:
        if nm == "x_desc":
            sig[nm] = mangle_type(desc)
        elif nm in types:
            sig[nm] = types[nm]
        else:
            sig[nm] = "constexpr"
    constexprs = {(names.index(k),): v for k, v in const.items() if k in names}
    src = GluonASTSource(fn, sig, constexprs, {})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4 * bm // 64, "num_ctas": ctas})
    return ctas, k

import itertools
CFGS = [(128, 64, 128, 3, 4), (64, 64, 16, 4, 8), (64, 64, 16, 4, 1)]
for cfg, xt in itertools.product(CFGS, [False, True]):
    try:
        ctas, k = build(*cfg, xt=xt)
        ptx = k.asm['ptx']
        print(cfg, xt, "ctas", ctas, "ok, smem", k.metadata.shared, "st.async", ptx.count("st.async"), "mapa", ptx.count("mapa"))
    except Exception as e:
        print(cfg, xt, "FAIL", repr(e)[-600:])
