"""Probe: the sparse tensor-core MMA (``mma.sp``, m16n8k32, fp16) driven from Gluon by inline PTX.

Triton has no sparse MMA, so every 2:4 kernel so far rebuilt W densely on chip (BENCHMARKS.md 7b-7m).
This probe checks the piece a kernel built on ``mma.sp`` stands on: which lane's metadata bits name
which row and group of A. PTX documents it only in figures; the probe finds it by experiment. One
warp runs one MMA with every register read from memory, so each lane's operands are set from here:

1. Discovery. A all ones, B[k, n] = 2^(k % 4) where k // 4 == n (else 0): then D[r, n] is the 4-bit
   mask of row r's group n. Every metadata nibble starts as "positions 0, 1"; setting one lane's one
   nibble to "positions 2, 3" shows which (row, group) it drives (D becomes 12 there).
2. Check. Random A, B and valid metadata laid out as found, against a float64 product.

Prints the layout found and the errors. Needs an sm_80+ GPU and Triton with Gluon (3.6).

    python3 scripts/probe_mma_sp.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

# idx pair (a, b) of a group, a in the low two bits: the metadata nibble for positions a < b
NIBBLE = {(0, 1): 0x4, (0, 2): 0x8, (0, 3): 0xC, (1, 2): 0x9, (1, 3): 0xD, (2, 3): 0xE}
VARIANTS = {"ordered": "mma.sp::ordered_metadata", "plain": "mma.sp"}


def _asm(variant: str, selector: int) -> str:
    return (f"{VARIANTS[variant]}.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 "
            "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9, $10, $11}, {$12, $13, $14, $15}, $16, "
            f"{selector:#x};")


@gluon.jit
def _four_registers(ptr, lane):
    """Registers 0-3 of every lane, stored register-major ((4, 32))."""
    return gl.load(ptr + lane), gl.load(ptr + 32 + lane), gl.load(ptr + 64 + lane), gl.load(ptr + 96 + lane)


@gluon.jit
def _one_mma_kernel(a_ptr, b_ptr, c_ptr, meta_ptr, d_ptr, ASM: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    lane = gl.arange(0, 32, layout=layout)
    a0, a1, a2, a3 = _four_registers(a_ptr, lane)
    b0, b1, b2, b3 = _four_registers(b_ptr, lane)
    c0, c1, c2, c3 = _four_registers(c_ptr, lane)
    meta = gl.load(meta_ptr + lane)
    d0, d1, d2, d3 = gl.inline_asm_elementwise(
        ASM, "=f,=f,=f,=f,r,r,r,r,r,r,r,r,f,f,f,f,r", [a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, meta],
        dtype=(gl.float32, gl.float32, gl.float32, gl.float32), is_pure=True, pack=1)
    gl.store(d_ptr + 0 * 32 + lane, d0)
    gl.store(d_ptr + 1 * 32 + lane, d1)
    gl.store(d_ptr + 2 * 32 + lane, d2)
    gl.store(d_ptr + 3 * 32 + lane, d3)


def _pack_halves(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """Two fp16 tensors -> int32 words, lo in the low half."""
    lo16 = lo.to(torch.float16).view(torch.int16).to(torch.int32) & 0xFFFF
    hi16 = hi.to(torch.float16).view(torch.int16).to(torch.int32) & 0xFFFF
    return lo16 | (hi16 << 16)


def a_registers(comp: torch.Tensor) -> torch.Tensor:
    """(16, 16) compressed A -> (4, 32) int32: the documented layout (that of dense m16n8k16's A)."""
    regs = torch.empty(4, 32, dtype=torch.int32)
    for lane in range(32):
        g, q = lane >> 2, lane % 4
        for i, (row, col) in enumerate(((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8))):
            regs[i, lane] = _pack_halves(comp[row, col], comp[row, col + 1])
    return regs


def b_registers(b: torch.Tensor) -> torch.Tensor:
    """(32, 8) B -> (4, 32) int32: lane (g, q) holds B[2q + 8i + {0, 1}, g] in register i."""
    regs = torch.empty(4, 32, dtype=torch.int32)
    for lane in range(32):
        g, q = lane >> 2, lane % 4
        for i in range(4):
            regs[i, lane] = _pack_halves(b[2 * q + 8 * i, g], b[2 * q + 8 * i + 1, g])
    return regs


def d_matrix(d: torch.Tensor) -> torch.Tensor:
    """(4, 32) output registers -> (16, 8) D."""
    out = torch.empty(16, 8, dtype=torch.float64)
    for lane in range(32):
        g, q = lane >> 2, lane % 4
        for i, (row, col) in enumerate(((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))):
            out[row, col] = d[i, lane]
    return out


def run_mma(asm: str, a_regs, b_regs, meta, c=None) -> torch.Tensor:
    dev = "cuda"
    c = torch.zeros(4, 32, dtype=torch.float32) if c is None else c
    d = torch.empty(4, 32, dtype=torch.float32, device=dev)
    _one_mma_kernel[(1,)](a_regs.to(dev), b_regs.to(dev), c.to(dev), meta.to(dev), d, ASM=asm, num_warps=1)
    return d.cpu()


def discover(asm: str) -> dict:
    """(lane, nibble) -> (row, group) for every metadata nibble that drives one."""
    a_regs = a_registers(torch.ones(16, 16))
    b = torch.zeros(32, 8)
    for k in range(32):
        b[k, k // 4] = 2.0 ** (k % 4)
    base_meta = torch.full((32,), 0x44444444, dtype=torch.int32)
    base = d_matrix(run_mma(asm, a_regs, b_registers(b), base_meta))
    found, anomalies = {}, []
    if not torch.equal(base, torch.full_like(base, 3.0)):
        anomalies.append(f"base product not all 3: {base.tolist()}")
    for lane in range(32):
        for nib in range(8):
            meta = base_meta.clone()
            word = (0x44444444 & ~(0xF << 4 * nib)) | (0xE << 4 * nib)
            meta[lane] = word - (1 << 32) if word >= 1 << 31 else word
            d = d_matrix(run_mma(asm, a_regs, b_registers(b), meta))
            changed = torch.nonzero(d != base).tolist()
            if not changed:
                continue
            if len(changed) == 1 and d[changed[0][0], changed[0][1]] == 12.0:
                found[f"{lane}:{nib}"] = changed[0]
            else:
                anomalies.append(f"lane {lane} nibble {nib}: {[(r, c, float(d[r, c])) for r, c in changed]}")
    return {"map": found, "anomalies": anomalies}


def check(asm: str, layout: dict, trials: int = 4) -> float:
    """Worst relative error of random products with the metadata laid out as ``layout`` says."""
    worst = 0.0
    for _ in range(trials):
        pos = torch.stack([torch.randperm(4)[:2].sort().values for _ in range(16 * 8)]).reshape(16, 8, 2)
        comp = torch.randn(16, 16).half().double()
        dense = torch.zeros(16, 32, dtype=torch.float64)
        for r in range(16):
            for grp in range(8):
                for s in range(2):
                    dense[r, 4 * grp + int(pos[r, grp, s])] = comp[r, 2 * grp + s]
        b = torch.randn(32, 8).half().double()
        meta = torch.zeros(32, dtype=torch.int64)
        for key, (row, grp) in layout.items():
            lane, nib = (int(v) for v in key.split(":"))
            meta[lane] |= NIBBLE[tuple(int(v) for v in pos[row, grp])] << (4 * nib)
        meta = torch.where(meta >= 2**31, meta - 2**32, meta).to(torch.int32)
        d = d_matrix(run_mma(asm, a_registers(comp), b_registers(b), meta))
        ref = dense @ b
        worst = max(worst, float((d - ref).abs().max() / ref.abs().max()))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    results = {}
    for variant in VARIANTS:
        for selector in (0, 1):
            name = f"{variant}/sel{selector}"
            try:
                asm = _asm(variant, selector)
                found = discover(asm)
                err = check(asm, found["map"]) if len(found["map"]) == 128 else None
                results[name] = {**found, "check_rel_err": err}
                lanes = sorted({int(k.split(":")[0]) for k in found["map"]})
                print(f"{name}: {len(found['map'])} nibbles mapped, lanes {lanes}, "
                      f"{len(found['anomalies'])} anomalies, check err {err}")
                for key in sorted(found["map"], key=lambda s: tuple(int(v) for v in s.split(":"))):
                    if int(key.split(":")[0]) < 8:
                        print(f"   lane:nibble {key} -> row, group {found['map'][key]}")
            except Exception as exc:  # noqa: BLE001 - a probe reports every variant's failure and goes on
                results[name] = {"error": repr(exc)[:2000]}
                print(f"{name}: FAILED {repr(exc)[:300]}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
