"""Compile a kernel for sm_90a without a GPU and count the instructions of its main loop.

Triton's wheel carries ptxas and cuobjdump, so the SASS of a kernel can be read on any machine. This
reports, per config, the instructions of the main loop per unit of work (2:4: per element of W a
thread rebuilds; SpMM: per multiply-add), the kinds that dominate, registers, spills, shared
memory, and how many warpgroup MMAs wait for completion inside the loop (``wait0``: an MMA that
cannot overlap the next step's decompression). It is not a timing: BENCHMARKS.md, section 7, says
what it predicted and what the GPU then measured.

    python3 scripts/sass_stats.py                       # the 2:4 kernel's configs of interest, fp16
    python3 scripts/sass_stats.py --dtype bf16 --ragged-k --configs 32x16x128:4:4:3
    python3 scripts/sass_stats.py --kernel spmm         # CSR SpMM; --kernel spmm-sell: sliced ELL
    python3 scripts/sass_stats.py --kernel semi24-hopper  # the Gluon 2:4 kernel (BMxBN:SPLIT_K:WARPS:STAGES)
    python3 scripts/sass_stats.py --kernel sddmm-tiled  # SDDMM on output tiles (BMxBNxBK:CHUNK:RUN:WARPS:STAGES)
    python3 scripts/sass_stats.py --json                # one JSON object per config

Run it with the Triton version the GPU has (3.6 there): code generation differs between versions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

os.environ["TRITON_INTERPRET"] = "0"  # the interpreter would replace the JIT function

import triton  # noqa: E402
from stuning.kernels import sddmm, sddmm_tiled, semi24, semi24_hopper, spmm, spmm_sell  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

TOOLS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
SHOWN = ("ISETP", "SEL", "IMAD", "LOP3", "SHF", "PRMT", "HADD2", "FFMA", "SHFL", "LDG", "LDS", "LDSM", "STS", "BAR",
         "HMMA", "HGMMA")


@dataclass(frozen=True)
class KernelSpec:
    fn: object
    default_configs: str
    constants: Callable  # (parsed config, ragged) -> the constexprs, sizes specialized to 1 included
    arg_types: dict  # arguments that are neither of the value dtype (pointers) nor i32 (scalars)
    unit: str  # what one unit of work is, for the per-unit column
    units_per_thread: Callable  # (parsed config, loop opcode counts) -> units per thread and iteration
    gluon: bool = False  # a Gluon kernel: compiled from a GluonASTSource, num_warps among its constexprs


def _semi24_config(text: str):
    tiles, split_k, warps, stages = text.split(":")
    bm, bn, bk = (int(v) for v in tiles.split("x"))
    return semi24.Semi24Config(bm, bn, bk, 8, int(split_k), int(warps), int(stages))


def _hopper_config(text: str):
    tiles, split_k, warps, stages = text.split(":")
    bm, bn = (int(v) for v in tiles.split("x"))
    return semi24.Semi24Config(bm, bn, semi24_hopper.BLOCK_K, 1, int(split_k), int(warps), int(stages), kernel="hopper")


def _spmm_config(kernel: str):
    def parse(text: str):
        tiles, vec, warps, stages, *flags = text.split(":")
        rows, step, bn = (int(v) for v in tiles.split("x"))
        return spmm.SpMMConfig(rows, step, bn, int(vec), True, int(warps), int(stages), kernel,
                               prefetch=flags == ["p"])
    return parse


def _sddmm_tiled_config(text: str):
    tiles, chunk, run, warps, stages = text.split(":")
    bm, bn, bk = (int(v) for v in tiles.split("x"))
    return sddmm.SDDMMConfig(block_k=bk, num_warps=int(warps), num_stages=int(stages), kernel="tiled", block_m=bm,
                             block_n=bn, chunk=int(chunk), tiles_per_program=int(run))


# The tiled SDDMM's inner K (``--sddmm-k``): where BK covers it, A's band stays resident over a run.
SDDMM_K = 128


OFFSETS_64 = False  # SpMM: compile B's 64-bit addressing (``--offsets-64``), as for a B past 2**31 elements


def _multiply_adds(cfg, ops: Counter) -> float:
    # fp32 multiply-adds per thread and loop iteration, read from the loop (it may be unrolled).
    return max(1, ops.get("FFMA", 0) + ops.get("FMUL", 0))


KERNELS = {
    # BMxBNxBK:SPLIT_K:WARPS:STAGES
    "semi24": (KernelSpec(
        semi24._semi24_kernel, "32x16x128:4:4:3,64x16x128:4:4:3,64x128x128:1:8:4,128x128x64:1:8:3,64x256x64:1:8:3",
        lambda c, ragged: {"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k, "GROUP_M": c.group_m,
                           "SPLIT_K": c.split_k, "EVEN_K": not ragged, "UPCAST": False, "HAS_BIAS": False,
                           "SPREAD_BANKS": semi24.spread_banks(c),
                           "stride_xn": 1, "stride_yn": 1},
        {"mask_ptr": "*i32", "partial_ptr": "*fp32", "count_ptr": "*i32"}, "W element",
        lambda c, ops: c.block_m * c.block_k / (32 * c.num_warps)), _semi24_config),
    # BMxBN:SPLIT_K:WARPS:STAGES (K steps of 64)
    "semi24-hopper": (KernelSpec(
        getattr(semi24_hopper, "_semi24_hopper_kernel", None), "64x16:4:4:3,128x16:4:4:3,64x32:8:4:2,128x32:3:8:3",
        lambda c, ragged: {"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "SPLIT_K": c.split_k, "STAGES": c.num_stages,
                           "EVEN_K": not ragged, "HAS_BIAS": False, "num_warps": c.num_warps, "stride_yn": 1},
        {"mask_ptr": "*i32", "partial_ptr": "*fp32", "count_ptr": "*i32"}, "W element",
        lambda c, ops: c.block_m * c.block_k / (32 * c.num_warps), gluon=True), _hopper_config),
    # ROWSxSTEPxBN:VEC:WARPS:STAGES, and :p for the CSR kernel's prefetch
    "spmm": (KernelSpec(
        spmm._spmm_kernel, "8x8x16:8:4:2,16x8x16:8:4:2,4x16x32:8:4:2,8x16x64:8:4:2,4x16x128:8:4:2",
        lambda c, ragged: {"ROWS": c.rows, "NNZ_STEP": c.nnz_step, "BLOCK_N": c.block_n, "VEC": c.vec,
                           "ROW_ALIGN": 8, "EVEN_N": True, "SWIZZLE": c.swizzle, "PREFETCH": c.prefetch,
                           "OFFSETS_32": not OFFSETS_64, "stride_bn": 1,
                           "stride_yn": 1},
        {"crow_ptr": "*i32", "col_ptr": "*i32", "row_order_ptr": "*i32"}, "multiply-add", _multiply_adds),
        _spmm_config("csr")),
    "spmm-sell": (KernelSpec(
        spmm_sell._spmm_sell_kernel, "8x8x16:8:4:2,16x8x16:8:4:2,32x4x16:8:4:2,16x8x64:8:4:2,8x8x128:8:4:2",
        # ragged: slices of their own lengths (slice_ptr loaded), else of one capacity
        lambda c, ragged: {"SLICE_ROWS": c.rows, "STEP": c.nnz_step, "BLOCK_N": c.block_n, "VEC": c.vec,
                           "EVEN_N": True, "OFFSETS_32": not OFFSETS_64, "stride_bn": 1, "stride_yn": 1,
                           "FIXED": not ragged},
        {"slice_ptr": "*i32", "col_ptr": "*i16", "row_id_ptr": "*i32"}, "multiply-add", _multiply_adds),
        _spmm_config("sell")),
    # BMxBNxBK:CHUNK:RUN:WARPS:STAGES (K = SDDMM_K, even sizes; 16-bit output staged as such)
    "sddmm-tiled": (KernelSpec(
        sddmm_tiled._sddmm_tiled_kernel, "128x64x128:256:4:4:2,128x64x128:512:4:4:2,128x128x64:512:4:8:2",
        lambda c, ragged: {"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k, "CHUNK": c.chunk,
                           "RUN": c.tiles_per_program, "A_RESIDENT": c.block_k >= SDDMM_K, "EVEN_K": not ragged,
                           "EVEN_M": True, "EVEN_N": True, "HAS_BETA": False, "UPCAST": False, "PRECISION": "tf32",
                           "STAGE_IN_OUTPUT_DTYPE": True, "SCALED": False, "FLUSH": 0, "stride_ak": 1, "stride_bk": 1},
        {**dict.fromkeys(("run_ptr", "tile_m_ptr", "tile_n_ptr", "tile_ptr", "dest_ptr"), "*i32"),
         "local_ptr": "*i16", "row_factor_ptr": "*fp32", "col_factor_ptr": "*fp32", "alpha": "fp32", "beta": "fp32"},
        "tile", lambda c, ops: 1), _sddmm_tiled_config),
}


def compile_config(spec: KernelSpec, cfg, dtype: str, ragged_k: bool):
    fn = spec.fn
    constants = spec.constants(cfg, ragged_k)
    signature = {}
    for name in fn.arg_names:
        if name in constants:
            signature[name] = "constexpr"
        elif name in spec.arg_types:
            signature[name] = spec.arg_types[name]
        else:
            signature[name] = f"*{dtype}" if name.endswith("_ptr") else "i32"
    # Pointers 16-byte aligned and sizes multiples of 16, as the shapes that matter are (arguments the
    # kernel keeps unspecialized get no such hint at run time either).
    plain = {p.name for p in fn.params if p.do_not_specialize}
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in signature
             if signature[a] != "constexpr" and a not in plain}
    constexprs = {(fn.arg_names.index(k),): v for k, v in constants.items()}
    if spec.gluon:
        from triton.experimental.gluon._runtime import GluonASTSource

        src = GluonASTSource(fn, signature, constexprs, attrs)
    else:
        src = ASTSource(fn=fn, signature=signature, attrs=attrs, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})


def sass_of(kernel) -> tuple[str, str]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        sass = subprocess.run([f"{TOOLS}/cuobjdump", "-sass", f.name], capture_output=True, text=True, check=True)
        usage = subprocess.run([f"{TOOLS}/cuobjdump", "--dump-resource-usage", f.name], capture_output=True,
                               text=True, check=True)
    return sass.stdout, usage.stdout


def loop_body(sass: str) -> list[str]:
    """The instructions of the longest backward branch's body: the main loop."""
    lines = re.findall(r"/\*([0-9a-f]{4,5})\*/\s+([^;]*);", sass)
    best = None
    for addr, text in lines:
        target = re.search(r"\bBRA\b.*0x([0-9a-f]+)", text)
        if target and int(target.group(1), 16) < int(addr, 16):
            span = (int(target.group(1), 16), int(addr, 16))
            if best is None or span[1] - span[0] > best[1] - best[0]:
                best = span
    if best is None:
        return []
    return [text.strip() for addr, text in lines if best[0] <= int(addr, 16) <= best[1]]


def stats(spec: KernelSpec, cfg, label: str, dtype: str, ragged_k: bool) -> dict:
    kernel = compile_config(spec, cfg, dtype, ragged_k)
    sass, usage = sass_of(kernel)
    body = loop_body(sass)
    ops = Counter(re.sub(r"^@!?U?P\w+\s+", "", line).split()[0].split(".")[0] for line in body)
    return {
        "config": label,
        "dtype": dtype,
        "ragged_k": ragged_k,
        "loop_instructions": len(body),
        "per_unit": round(len(body) / spec.units_per_thread(cfg, ops), 2),
        "unit": spec.unit,
        "wgmma_wait0": sum("WARPGROUP.DEPBAR.LE gsb0, 0x0" in line for line in body),
        "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
        "spill_stores": len(re.findall(r"\bSTL\b", sass)),
        "shared_bytes": kernel.metadata.shared,
        "ops": {k: ops.get(k, 0) for k in SHOWN},
        "triton": triton.__version__,
    }


def main(argv=None) -> int:
    global OFFSETS_64, SDDMM_K
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="semi24", choices=sorted(KERNELS))
    ap.add_argument("--configs", default=None,
                    help="comma-separated; 2:4 BMxBNxBK:SPLIT_K:WARPS:STAGES, SpMM ROWSxSTEPxBN:VEC:WARPS:STAGES, "
                    "tiled SDDMM BMxBNxBK:CHUNK:RUN:WARPS:STAGES")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "fp32"])
    ap.add_argument("--ragged-k", action="store_true", help="2:4 and tiled SDDMM: compile the K-masked path (K not a "
                    "multiple of BK); sliced ELL: slices of their own lengths rather than one capacity")
    ap.add_argument("--offsets-64", action="store_true", help="SpMM: B addressed with 64-bit offsets")
    ap.add_argument("--sddmm-k", type=int, default=SDDMM_K, help="tiled SDDMM: the inner K the kernel is compiled for")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    OFFSETS_64, SDDMM_K = args.offsets_64, args.sddmm_k
    spec, parse = KERNELS[args.kernel]
    labels = (args.configs or spec.default_configs).split(",")
    rows = []
    for label in labels:
        try:
            rows.append(stats(spec, parse(label), label, args.dtype, args.ragged_k))
        except Exception as e:  # a config the compiler rejects is a finding too
            rows.append({"config": label, "error": f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}"})
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.kernel} main loop, sm_90a SASS (triton {triton.__version__}, {args.dtype})")
    for col in ("config", f"instr / {spec.unit}", "loop", "wait0", "regs", "spills", "smem", *SHOWN):
        table.add_column(col, justify="right")
    for r in rows:
        if "error" in r:
            table.add_row(r["config"], "compile failed: " + r["error"])
            continue
        table.add_row(r["config"], f"{r['per_unit']:.1f}", str(r["loop_instructions"]), str(r["wgmma_wait0"]),
                      str(r["registers"]), str(r["spill_stores"]), str(r["shared_bytes"]),
                      *(str(r["ops"][k]) for k in SHOWN))
    Console(width=220).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
