"""Probe 2:4 on the sparse warpgroup MMA with both operands in shared memory, fed by TMA.

The first ``wgmma.sp`` probe (``probe_semi24_wgmma_sp.py``, BENCHMARKS.md 7u) took A (W's values) from
registers in the sparse-MMA kernel's k order, so cp.async had to permute X's rows, W came from
global memory one step ahead, and each step waited for its own MMAs: ~1250 cycles a step against
~260 of MMA. Here the whole step is asynchronous:

- A is W's stored values by descriptor: a (BLOCK_M, 32 KS) tile of the (M, K/2) values, K-major,
  swizzled 64 or 128 bytes as TMA writes it. Stored values are in column order, so the MMAs' k order
  is X's natural row order and X's (64 KS, BLOCK_N) tile comes by TMA too.
- The metadata must follow that order: ``wgmma_metadata`` builds it as ``sparse_mma_metadata`` does
  (the same lanes, measured for mma.sp and holding for wgmma.sp) with group j of MMA kk being the
  step's group 8 kk + j. It comes by TMA as well; each lane then reads its word from shared memory.
- A stage holds X, W and the metadata of KS 64-column steps behind one mbarrier. A step issues
  2 KS MMAs as one group and waits only for the previous step's (``WAIT = 1``), whose stage is then
  refilled. The MMAs read the metadata registers while they run: see ``_step_asm`` for how a step's
  registers are kept from ptxas until its MMAs have retired (without it, configs of 2-4 warpgroups
  gave 1-17% errors now and then).
- Every warpgroup multiplies 64 rows (``BLOCK_M = 16 num_warps``); the descriptors are built in the
  asm from ``global_smem`` and the buffers' offsets where Triton places them (``buffer_offsets``:
  largest first; checked in the PTX of compiled configs, and any error would show in every check).

On the H200 its best configs ran 1.27-1.37x cuBLAS at N = 128 and 1.25-1.31x at N = 1024-2048 on
the Llama-7B shapes (BENCHMARKS.md 7v).

    python3 scripts/probe_semi24_wgmma_tma.py      # gate vs float64, then timings; $OUT/semi24_wgmma_tma_probe.json
    PROBE_NS=128,2048 PROBE_KS=2 PROBE_SPLITS=1,2 PROBE_SECONDS=360 ...   # N's, KS's, splits, seconds for timings
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import random
import time

import torch
import triton
from probe_harness import (
    best_checked,
    checked_time_us,
    probe_time_us,
    semi24_baseline_row,
    semi24_gate_failure,
    semi24_gate_problems,
    semi24_problems,
    write_results,
)
from stuning.kernels.semi24_hopper import _finish_tile
from stuning.kernels.semi24_sparse_mma import _lane_layout, _spread, _tile_layout
from stuning.kernels.split_k import split_k_workspace
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from stuning.formats.semi24 import _MMA_NIBBLE, unpack_masks

SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008)]
NS = [int(v) for v in os.environ.get("PROBE_NS", "128").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "240"))
SMEM_BYTES = 227 * 1024
def wgmma_metadata(masks: torch.Tensor, m: int, k: int, ks: int) -> torch.Tensor:
    """(tiles, steps * 32) int32: ``sparse_mma_metadata``'s words with the groups in column order (group
    j of MMA kk is the 64-column step's group 8 kk + j), tiles padded to 16 and steps to 2 with the valid
    nibble 0x4, so no TMA box reads past the array (a zero-filled word would name no valid pair). With
    ``ks`` 2 a lane's words of two steps are adjacent: one 8-byte load takes both, so ptxas has no
    reason to reuse the first's register while its MMAs run (it then waits for them: seen in SASS)."""
    tiles, steps = 16 * triton.cdiv(m, 256), 2 * triton.cdiv(k, 128)
    lut = torch.zeros(16, dtype=torch.int64, device=masks.device)
    for mask, nibble in _MMA_NIBBLE.items():
        lut[mask] = nibble
    groups = (k + 3) // 4
    nib = torch.full((tiles * 16, steps * 16), 0x4, dtype=torch.int64, device=masks.device)
    nib[:m, :groups] = lut[unpack_masks(masks, groups)]
    nib = nib.reshape(tiles, 2, 8, steps, 2, 2, 4)  # [t, h, g, s, kk, u, i]: row 16 t + 8 h + g, group 8 kk + 4 u + i
    half = (nib << (4 * torch.arange(4, device=masks.device))).sum(-1)  # [t, h, g, s, kk, u]
    word = half[:, 0] | (half[:, 1] << 16)  # [t, g, s, kk, u]
    word = word.permute(0, 2, 1, 3, 4).reshape(tiles, steps, 32)  # lane 4 g + 2 kk + u
    if ks == 2:
        word = word.reshape(tiles, steps // 2, 2, 32).transpose(2, 3)
    word = word.reshape(tiles, steps * 32)
    return torch.where(word >= 2**31, word - 2**32, word).to(torch.int32).contiguous()


@gluon.constexpr_function
def _step_asm(P, BLOCK_N, KS, WG_BYTES, BF16, WAIT):
    """The PTX of a step: 2 KS k32 MMAs in one group, then a wait leaving ``WAIT`` groups in flight.
    Operands ($): the accumulator 0.. (tied to 2P..) and the token q P (its input 3P) that chains the
    steps; this step's metadata words 4P, 5P; the previous step's 6P, 7P; the stage's W and X byte
    offsets from ``global_smem`` 8P, 9P.

    The MMAs read the metadata registers while they run (CUTLASS's sparse mainloop waits for each
    step's MMAs for this reason), and ptxas reuses a register once its last reader has been issued.
    So the previous step's words are read once more after the wait has retired its MMAs (into the
    token, which the next step's scale-d predicate reads: never dead), and the loop is unrolled by
    two, so a step's words and the previous step's are distinct values live together."""
    d = ", ".join(f"${i}" for i in range(P))
    dt = "bf16" if BF16 else "f16"
    # The descriptors' bits other than the address, as Triton's dense wgmma builds them: W (K-major,
    # 64 KS-byte rows) swizzled 64B / 128B with 512 / 1024 bytes between 8-row groups; X (N-major,
    # 128-byte rows) swizzled 128B, 1024 bytes between 8-row groups and a 64-column block's bytes
    # between blocks.
    a_hi = 0x8000002000000000 if KS == 1 else 0x4000004000000000
    x_hi = ((64 * KS * 128 >> 4 if BLOCK_N > 64 else 0) << 16) | (64 << 32) | (1 << 62)
    asm = ("{ .reg .b32 t, sa, sb; .reg .b64 da, db; .reg .pred p; "
           "mov.u32 t, %tid.x; shr.u32 t, t, 7; "
           f"mov.u32 sa, global_smem; mad.lo.u32 sa, t, {WG_BYTES}, sa; add.u32 sa, sa, ${8 * P}; "
           f"mov.u32 sb, global_smem; add.u32 sb, sb, ${9 * P}; bfe.u32 sa, sa, 4, 14; bfe.u32 sb, sb, 4, 14; "
           f"cvt.u64.u32 da, sa; or.b64 da, da, {a_hi}; cvt.u64.u32 db, sb; or.b64 db, db, {x_hi}; "
           f"setp.ne.u32 p, ${3 * P}, 0; wgmma.fence.sync.aligned; ")
    for m in range(2 * KS):
        if m:  # the next k32: 32 bytes further along W's rows, 32 rows (4096 bytes) down X
            asm += "add.s64 da, da, 2; add.s64 db, db, 256; "
        asm += (f"wgmma.mma_async.sp.sync.aligned.m64n{BLOCK_N}k32.f32.{dt}.{dt} {{{d}}}, da, db, "
                f"${(4 + m // 2) * P}, {m % 2}, p, 1, 1, 0, 1; ")
    return (asm + f"wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned {WAIT}; "
            f"or.b32 t, ${6 * P}, ${7 * P}; or.b32 ${P}, t, 1; }}")


@gluon.constexpr_function
def _constraints(P, inputs):
    """P accumulator outputs, P token outputs, the accumulator's tied inputs, ``inputs`` more P-packs."""
    return ",".join(["=f"] * P + ["=r"] * P + [str(i) for i in range(P)] + ["r"] * (inputs * P))


@gluon.jit
def _mma_step(acc, q, meta0, meta1, prev0, prev1, w_off, x_off, BLOCK_N: gl.constexpr, KS: gl.constexpr,
              WG_BYTES: gl.constexpr, DT: gl.constexpr, WAIT: gl.constexpr):
    P: gl.constexpr = BLOCK_N // 2
    asm: gl.constexpr = _step_asm(P, BLOCK_N, KS, WG_BYTES, gl.bfloat16 == DT, WAIT)
    return gl.inline_asm_elementwise(asm, _constraints(P, 7), [acc, q, meta0, meta1, prev0, prev1, w_off, x_off],
                                     dtype=(gl.float32, gl.int32), is_pure=False, pack=P)


@gluon.constexpr_function
def _retire_asm(P):
    """Wait for every MMA; the token (every register of it: the caller selects on all) from the last
    step's words."""
    tokens = " ".join(f"mov.b32 ${P + i}, t;" for i in range(P))
    return f"{{ .reg .b32 t; wgmma.wait_group.sync.aligned 0; or.b32 t, ${3 * P}, ${4 * P}; or.b32 t, t, 1; {tokens} }}"


@gluon.jit
def _retire(acc, prev0, prev1, BLOCK_N: gl.constexpr):
    """Wait for every MMA, then read the last step's metadata words (the token)."""
    P: gl.constexpr = BLOCK_N // 2
    asm: gl.constexpr = _retire_asm(P)
    return gl.inline_asm_elementwise(asm, _constraints(P, 2), [acc, prev0, prev1], dtype=(gl.float32, gl.int32),
                                     is_pure=False, pack=P)


@gluon.jit
def _step(acc, q, prev0, prev1, i, steps, w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bars, pid_k, pid_m, pid_n,
          zero, KS: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr, X_BASE: gl.constexpr,
          W_BASE: gl.constexpr, WAIT: gl.constexpr, LQ: gl.constexpr, L: gl.constexpr):
    """Step i: wait for its stage, issue its MMAs, refill the stage of step i - 1 (retired)."""
    BLOCK_M: gl.constexpr = w_desc.block_shape[0]
    BLOCK_N: gl.constexpr = x_desc.block_shape[1]
    BK: gl.constexpr = 64 * KS
    s = i % STAGES
    mbarrier.wait(bars.index(s), (i // STAGES) & 1)
    meta0, meta1 = _load_meta(m_smem.index(s), BLOCK_M // 16, KS, LQ, L)
    meta0 += zero
    meta1 += zero
    w_off = zero + W_BASE + s * (BLOCK_M * BK)
    x_off = zero + X_BASE + s * (BK * BLOCK_N * 2)
    acc, q = _mma_step(acc, q, meta0, meta1, prev0, prev1, w_off, x_off, BLOCK_N, KS, 64 * BK, x_desc.dtype, WAIT)
    # Each warpgroup's wait retired its MMAs of step i - 1 (all of them with WAIT = 0); after the
    # barrier no warpgroup reads that step's stage, which the next load refills.
    gl.thread_barrier()
    nxt = i + STAGES - 1
    _issue(w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bars.index(nxt % STAGES), nxt % STAGES,
           nxt * SPLIT_K + pid_k, pid_m, pid_n, nxt < steps, KS)
    return acc, q, meta0, meta1


@gluon.jit
def _issue(w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bar, s, kt, pid_m, pid_n, pred, KS: gl.constexpr):
    """Start the TMA loads of 64 KS-column step ``kt`` into stage ``s``: X's, W's and the metadata's tiles."""
    BLOCK_M: gl.constexpr = w_desc.block_shape[0]
    BLOCK_N: gl.constexpr = x_desc.block_shape[1]
    mbarrier.expect(bar, x_desc.block_type.nbytes + w_desc.block_type.nbytes + m_desc.block_type.nbytes,
                    pred=pred)
    tma.async_copy_global_to_shared(x_desc, [kt * 64 * KS, pid_n * BLOCK_N], bar, x_smem.index(s), pred=pred)
    tma.async_copy_global_to_shared(w_desc, [pid_m * BLOCK_M, kt * 32 * KS], bar, w_smem.index(s), pred=pred)
    tma.async_copy_global_to_shared(m_desc, [pid_m * (BLOCK_M // 16), kt * 32 * KS], bar, m_smem.index(s), pred=pred)


@gluon.jit
def _load_meta(stage, TM: gl.constexpr, KS: gl.constexpr, LQ: gl.constexpr, L: gl.constexpr):
    """A stage's (TM, 32 KS) metadata words -> each lane's KS words (one load), each spread over the
    tile layout."""
    lanes: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0])
    if KS == 1:
        meta0 = _spread(stage._reinterpret(gl.int32, [TM, 8, 4], lanes).load(LQ), L)
        meta1 = meta0
    else:
        pair = stage._reinterpret(gl.int64, [TM, 8, 4], lanes).load(LQ)
        meta0 = _spread(pair.to(gl.int32), L)
        meta1 = _spread((pair >> 32).to(gl.int32), L)
    return meta0, meta1


@gluon.jit
def _semi24_wgmma_tma_kernel(w_desc, x_desc, m_desc, y_ptr, bias_ptr, partial_ptr, count_ptr, M, N, K,
                             stride_ym, stride_yn,
                             KS: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr,
                             X_BASE: gl.constexpr, W_BASE: gl.constexpr, HAS_BIAS: gl.constexpr,
                             WAIT: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = 16 * num_warps  # a warpgroup per 64 rows
    BLOCK_N: gl.constexpr = x_desc.block_shape[1]
    TM: gl.constexpr = num_warps
    NB: gl.constexpr = BLOCK_N // 8
    BK: gl.constexpr = 64 * KS
    DT: gl.constexpr = x_desc.dtype
    L: gl.constexpr = _tile_layout(num_warps)
    LQ: gl.constexpr = _lane_layout(TM, num_warps)

    pid = gl.program_id(0)
    pid_k = gl.program_id(1)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    steps = gl.cdiv(gl.cdiv(K, BK) - pid_k, SPLIT_K)

    # The MMAs read X and W by addresses the asm computes from X_BASE and W_BASE (buffer_offsets).
    x_smem = gl.allocate_shared_memory(DT, [STAGES, BK, BLOCK_N], x_desc.layout)
    w_smem = gl.allocate_shared_memory(DT, [STAGES, BLOCK_M, BK // 2], w_desc.layout)
    m_smem = gl.allocate_shared_memory(gl.int32, [STAGES, TM, 32 * KS], m_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for b in gl.static_range(STAGES):
        mbarrier.init(bars.index(b), count=1)
    for b in gl.static_range(STAGES - 1):
        _issue(w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bars.index(b), b, b * SPLIT_K + pid_k, pid_m, pid_n,
               b < steps, KS)

    acc = gl.zeros((TM, 2, 8, NB, 8), dtype=gl.float32, layout=L)
    zero = gl.zeros((TM, 2, 8, NB, 8), dtype=gl.int32, layout=L)
    q = zero + 1
    a0 = zero
    a1 = zero
    b0 = zero
    b1 = zero
    for i in range(0, steps, 2):  # steps i (words a) and i + 1 (words b): see _step_asm
        acc, q, a0, a1 = _step(acc, q, b0, b1, i, steps, w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bars,
                               pid_k, pid_m, pid_n, zero, KS, SPLIT_K, STAGES, X_BASE, W_BASE, WAIT, LQ, L)
        b0 = a0
        b1 = a1
        if i + 1 < steps:
            acc, q, b0, b1 = _step(acc, q, a0, a1, i + 1, steps, w_desc, x_desc, m_desc, w_smem, x_smem, m_smem,
                                   bars, pid_k, pid_m, pid_n, zero, KS, SPLIT_K, STAGES, X_BASE, W_BASE, WAIT, LQ, L)
    acc, q = _retire(acc, b0, b1, BLOCK_N)
    acc = gl.where(q != 0, acc, 0.0)  # q is never 0: the last words stay live until their MMAs retire
    # (a step's token is set in the first register of each pack only, which is all the next step reads)
    # The epilogue's layout conversion may reuse the stages' shared memory: every warpgroup's MMAs
    # must have retired first (without this barrier, configs of 2-4 warpgroups read corrupt tiles).
    gl.thread_barrier()
    for b in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(b))

    out_layout: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [num_warps, 1], [1, 0])
    acc2 = gl.convert_layout(gl.reshape(acc, (BLOCK_M, BLOCK_N)), out_layout)
    offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, out_layout))
    offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, out_layout))
    partial_ptrs = partial_ptr + offs_n[None, :].to(gl.int64) * M + offs_m[:, None]
    _finish_tile(acc2, y_ptr, bias_ptr, partial_ptrs, count_ptr + pid, offs_m, offs_n, M, N, stride_ym, stride_yn,
                 SPLIT_K, HAS_BIAS)


def buffer_bytes(bn: int, ks: int, warps: int, stages: int) -> dict[str, int]:
    """The kernel's buffers in allocation order: X's, W's and the metadata's stages, the barriers."""
    return {"x": stages * 128 * ks * bn, "w": stages * 1024 * warps * ks, "meta": stages * ks * warps * 128,
            "bars": 8 * stages}


def buffer_offsets(bn: int, ks: int, warps: int, stages: int) -> dict[str, int]:
    """Where Triton places the buffers (all live together): largest first, ties in allocation order,
    each after the last (sizes are multiples of the 1024-byte alignment but the barriers', last)."""
    sizes = buffer_bytes(bn, ks, warps, stages)
    offsets, at = {}, 0
    for name in sorted(sizes, key=lambda b: -sizes[b]):  # sorted() is stable
        offsets[name], at = at, at + sizes[name]
    return offsets


def run(w, x, meta, bn, ks, split, warps, stages, wait=1, bias=None, out=None):
    """Y = W X (``meta[ks]``: ``wgmma_metadata(w.masks, M, K, ks)``)."""
    m, k, n = w.shape[0], w.shape[1], x.shape[1]
    if k % 16 or n % 8:
        raise ValueError("TMA needs K % 16 == 0 (W's rows) and N % 8 == 0 (X's rows) in 16-byte strides")
    out = torch.empty(m, n, dtype=x.dtype, device=x.device) if out is None else out
    bm = 16 * warps
    split = min(split, triton.cdiv(k, 64 * ks))  # as the library's launcher: no split without a step
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    partial, counts = split_k_workspace(x.device, m * n, tiles) if split > 1 else (out, out)
    dt = gl.bfloat16 if x.dtype == torch.bfloat16 else gl.float16
    w_box, x_box = [bm, 32 * ks], [64 * ks, bn]
    w_desc = TensorDescriptor.from_tensor(w.values, w_box, gl.NVMMASharedLayout.get_default_for(w_box, dt))
    x_desc = TensorDescriptor.from_tensor(x, x_box, gl.NVMMASharedLayout.get_default_for(x_box, dt))
    m_desc = TensorDescriptor.from_tensor(meta[ks], [warps, 32 * ks], gl.NVMMASharedLayout(0, 32, rank=2))
    at = buffer_offsets(bn, ks, warps, stages)
    compiled = _semi24_wgmma_tma_kernel[(tiles, split)](
        w_desc, x_desc, m_desc, out, w.values if bias is None else bias, partial, counts, m, n, k,
        out.stride(0), out.stride(1), KS=ks, SPLIT_K=split, STAGES=stages, X_BASE=at["x"], W_BASE=at["w"],
        HAS_BIAS=bias is not None, WAIT=wait, num_warps=warps)
    if compiled.metadata.shared < sum(buffer_bytes(bn, ks, warps, stages).values()):
        raise RuntimeError(f"the kernel's shared memory ({compiled.metadata.shared} B) is not its buffers' "
                           f"{buffer_bytes(bn, ks, warps, stages)}: the MMAs' offsets may be wrong")
    return out


def max_stages(bn: int, ks: int, warps: int) -> int:
    return min(8, SMEM_BYTES // sum(buffer_bytes(bn, ks, warps, 1).values()))


def configs(n: int) -> list[tuple[int, ...]]:
    """(block_n, ks, split_k, num_warps, num_stages) within shared memory, in a fixed shuffled order: a
    problem's time budget then samples the whole space. Wide N: no splits."""
    splits = [int(v) for v in os.environ.get("PROBE_SPLITS", "1,2,4,8").split(",")] if n <= 128 else [1]
    kss = [int(v) for v in os.environ.get("PROBE_KS", "1,2").split(",")]
    space = {(bn, ks, split, warps, stages)
             for bn, ks, warps, split in itertools.product((128, 64), kss, (8, 4, 16), splits)
             for stages in (3, 4, 6, max_stages(bn, ks, warps))
             if bn <= max(64, n) and 3 <= stages <= max_stages(bn, ks, warps)}
    space = sorted(space)
    random.Random(0).shuffle(space)
    return space


def gate() -> list[str]:
    """Odd problems, both dtypes, split-K, bias and Y^T: the failures (none: the kernel is right)."""
    failures = []
    for label, w, x, bias, ref in semi24_gate_problems(((64, 64, 64), (200, 1008, 144), (320, 4096, 128)), 5):
        meta = {ks: wgmma_metadata(w.masks, w.shape[0], w.shape[1], ks) for ks in (1, 2)}
        for bn, ks, split, warps in itertools.product((64, 128), (1, 2), (1, 3), (4, 8, 16)):
            cfg = (w, x, meta, bn, ks, split, warps)
            failures.append(semi24_gate_failure(f"{label} bn={bn} ks={ks} split={split} warps={warps}", ref, bias,
                                                functools.partial(run, *cfg, 3), functools.partial(run, *cfg, 2)))
    return [f for f in failures if f]


def main() -> int:
    started = time.perf_counter()
    failures = gate()
    print(f"gate: {len(failures)} failures ({time.perf_counter() - started:.0f} s)", flush=True)
    for f in failures[:8]:
        print("   ", f)
    rows = []
    if len(failures) < 4 or os.environ.get("PROBE_ALWAYS") == "1":
        budget = (SECONDS - (time.perf_counter() - started)) / (len(SHAPES) * len(NS))
        for p in semi24_problems(SHAPES, NS, "cuda"):
            until = time.perf_counter() + budget
            meta = {ks: wgmma_metadata(p.w.masks, p.m, p.k, ks) for ks in (1, 2)}
            row = {**semi24_baseline_row(p), "wgmma_tma": {}}
            for cfg in configs(p.n):
                if time.perf_counter() > until:
                    break
                label = ":".join(map(str, cfg))
                row["wgmma_tma"][label] = checked_time_us(functools.partial(run, p.w, p.x, meta, *cfg), p.ref,
                                                          f"{p.m}x{p.k} n={p.n} {label}", checks=3)
            best, _, _ = best_checked(row["wgmma_tma"])
            if best != "-":  # ablation: the same config waiting for each step's own MMAs
                cfg = [int(v) for v in best.split(":")]
                row["wait0"] = {"config": best, "us": probe_time_us(functools.partial(run, p.w, p.x, meta, *cfg, 0),
                                                                   False)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_results({"gate_failures": failures, "rows": rows}, "semi24_wgmma_tma_probe.json")
    print(f"{'M x K':>11} {'N':>4} {'cuBLAS':>7} {'pick':>7} {'tma':>7} {'bn:ks:split:warps:st':>20} "
          f"{'vs cuBLAS':>9} {'wait0':>6} failed")
    for r in rows:
        best, bt, fails = best_checked(r["wgmma_tma"])
        w0 = r.get("wait0", {}).get("us", float("nan"))
        print(f"{r['m']:>5}x{r['k']:<5} {r['n']:>4} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {bt:>7.1f} "
              f"{best:>20} {r['cublas_us'] / bt:>8.2f}x {w0:>6.1f} {len(fails)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
