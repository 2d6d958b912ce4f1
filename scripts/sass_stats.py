"""Compile the 2:4 kernel for sm_90a without a GPU and count the instructions of its main loop.

Triton's wheel carries ptxas and cuobjdump, so the SASS of a kernel can be read on any machine. This
reports, per config, the instructions of the K loop per element of W each thread rebuilds, the kinds
that dominate, registers, spills, shared memory, and how many warpgroup MMAs wait for completion
inside the loop (``wait0``: an MMA that cannot overlap the next step's decompression). It is not a
timing: BENCHMARKS.md, section 7, says what it predicted and what the GPU then measured.

    python3 scripts/sass_stats.py                       # the shipped configs of interest, fp16
    python3 scripts/sass_stats.py --dtype bf16 --ragged-k --configs 32x16x128:4:4:3
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

os.environ["TRITON_INTERPRET"] = "0"  # the interpreter would replace the JIT function

import triton  # noqa: E402
from stuning.kernels import semi24  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

TOOLS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
DEFAULT_CONFIGS = "32x16x128:4:4:3,64x16x128:4:4:3,64x128x128:1:8:4,128x128x64:1:8:3,64x256x64:1:8:3"
SHOWN = ("ISETP", "SEL", "IMAD", "LOP3", "SHF", "PRMT", "LDS", "LDSM", "STS", "BAR", "HMMA", "HGMMA")
# Size arguments Triton specializes when they are 1 (X and Y contiguous along N).
UNIT_STRIDES = ("stride_xn", "stride_yn")


def parse_config(text: str) -> semi24.Semi24Config:
    tiles, split_k, warps, stages = text.split(":")
    bm, bn, bk = (int(v) for v in tiles.split("x"))
    return semi24.Semi24Config(bm, bn, bk, 8, int(split_k), int(warps), int(stages))


def compile_config(cfg: semi24.Semi24Config, dtype: str, ragged_k: bool):
    fn = semi24._semi24_kernel
    constants = {
        "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m,
        "SPLIT_K": cfg.split_k, "EVEN_K": not ragged_k, "UPCAST": False, **dict.fromkeys(UNIT_STRIDES, 1),
    }
    signature = {}
    for name in fn.arg_names:
        if name in constants:
            signature[name] = "constexpr"
        elif name == "mask_ptr":
            signature[name] = "*i32"
        elif name == "y_ptr":
            signature[name] = "*fp32" if cfg.split_k > 1 else f"*{dtype}"
        else:
            signature[name] = f"*{dtype}" if name.endswith("_ptr") else "i32"
    # Pointers 16-byte aligned and sizes multiples of 16, as the shapes that matter are.
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in signature if signature[a] != "constexpr"}
    src = ASTSource(fn=fn, signature=signature, attrs=attrs,
                    constexprs={(fn.arg_names.index(k),): v for k, v in constants.items()})
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
    """The instructions of the longest backward branch's body: the K loop."""
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


def stats(cfg: semi24.Semi24Config, dtype: str, ragged_k: bool) -> dict:
    kernel = compile_config(cfg, dtype, ragged_k)
    sass, usage = sass_of(kernel)
    body = loop_body(sass)
    ops = Counter(re.sub(r"^@!?U?P\w+\s+", "", line).split()[0].split(".")[0] for line in body)
    spill = len(re.findall(r"\bSTL\b", sass))
    per_thread = cfg.block_m * cfg.block_k / (32 * cfg.num_warps)
    return {
        "config": f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k}:{cfg.split_k}:{cfg.num_warps}:{cfg.num_stages}",
        "dtype": dtype,
        "ragged_k": ragged_k,
        "loop_instructions": len(body),
        "per_w_element": round(len(body) / per_thread, 2),
        "wgmma_wait0": sum("WARPGROUP.DEPBAR.LE gsb0, 0x0" in line for line in body),
        "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
        "spill_stores": spill,
        "shared_bytes": kernel.metadata.shared,
        "ops": {k: ops.get(k, 0) for k in SHOWN},
        "triton": triton.__version__,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help="BMxBNxBK:SPLIT_K:WARPS:STAGES, comma-separated")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--ragged-k", action="store_true", help="compile the K-masked path (K not a multiple of BK)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [stats(parse_config(c), args.dtype, args.ragged_k) for c in args.configs.split(",")]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"2:4 kernel K loop, sm_90a SASS (triton {triton.__version__}, {args.dtype})")
    for col in ("config", "instr/W elem", "loop", "wait0", "regs", "spills", "smem", *SHOWN):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["config"], f"{r['per_w_element']:.1f}", str(r["loop_instructions"]), str(r["wgmma_wait0"]),
                      str(r["registers"]), str(r["spill_stores"]), str(r["shared_bytes"]),
                      *(str(r["ops"][k]) for k in SHOWN))
    Console(width=200).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
