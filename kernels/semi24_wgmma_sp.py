"""2:4 semi-structured SpMM on the sparse warpgroup MMA (``wgmma.mma_async.sp``), fed by TMA.

The sparse-MMA kernel (``semi24_sparse_mma.py``) issues warp-level ``mma.sp`` from registers and
wins only at N <= 32. Here both operands stay in shared memory and the whole step is asynchronous:

- A is W's stored values by descriptor: a (BLOCK_M, 32 KS) TMA tile of the (M, K/2) values,
  K-major, swizzled 64 or 128 bytes as TMA writes it. Stored values are in column order, so the
  MMAs' k order is X's natural row order and X's (BLOCK_K, BLOCK_N) tile comes by TMA too.
- The metadata follows that order (``Semi24Matrix.wgmma_metadata``: the lanes of ``mma.sp``, which
  the sparse warpgroup MMA reads alike) and comes by TMA into the stage; each lane reads its word(s)
  from shared memory.
- A stage holds X, W and the metadata of ``KS`` 64-column steps behind one mbarrier. A step issues
  2 KS k32 MMAs as one group and waits only for the previous step's, whose stage it then refills.
  The MMAs read the metadata registers while they run: ``_step_asm`` says how a step's registers
  are kept from ptxas until its MMAs have retired.
- Every warpgroup multiplies 64 rows (``BLOCK_M = 16 num_warps``). Gluon has no sparse MMA, so the
  asm builds the descriptors from ``global_smem`` and the buffers' offsets where Triton places them
  (``buffer_offsets``); the launcher checks the compiled kernel's shared memory against them.

It started as ``scripts/probe_semi24_wgmma_tma.py``: on the H200 its best configs ran 1.27-1.37x
cuBLAS at N = 128 and 1.25-1.31x at N = 1024-2048 on the Llama-7B shapes (BENCHMARKS.md 7v).
Gluon has no interpreter: the kernel is offered on sm_90 GPUs with the Triton release it was checked
on; elsewhere the Triton kernel runs a config of it (``semi24.repair``).
"""

from __future__ import annotations

import functools
import itertools
import types

import torch
import triton

try:  # Gluon as of Triton 3.6
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:  # pragma: no cover - depends on the installed Triton
    gluon = None

from stuning.kernels import semi24_hopper
from stuning.kernels.target import DeviceBudget, interpreting, is_sm90

if gluon is not None:
    # The epilogue and the register layouts of a warp's m16 tiles are the other Gluon kernels'.
    from stuning.kernels.semi24_hopper import _program_tile, _store_tile_24
    from stuning.kernels.semi24_sparse_mma import _lane_layout, _spread, _tile_layout

BLOCK_NS = (64, 128)
BLOCK_KS = (64, 128)  # KS = BLOCK_K / 64 steps of two k32 MMAs a stage
WARPS = (4, 8, 16)  # BLOCK_M = 16 num_warps: a warpgroup per 64 rows
# Deep pipelines won on the H200 (8 stages at N = 128, BENCHMARKS.md 7v); as many as fit.
STAGES = (3, 4, 6, 8)
SPLIT_KS = (1, 2, 3, 4, 6, 8)


def available() -> bool:
    """Whether this Triton runs the kernel (Gluon's API as checked, the Hopper kernel's release)."""
    return semi24_hopper.available()


def takes_shape(n: int, k: int) -> bool:
    """Whether TMA can read W's and X's rows at these sizes: 16-byte multiples of 2-byte elements,
    K / 2 values a row of W and N of X."""
    return k % 16 == 0 and n % 8 == 0


def takes(values: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether the kernel runs this W and X: on an sm_90 GPU (not the interpreter), both read by TMA
    (rows contiguous, starts and row strides 16-byte aligned). X may be (K x N) with N contiguous or a
    transposed view of a row-major (N x K) X^T."""
    if not (available() and not interpreting() and is_sm90(x.device)):
        return False
    k, n = x.shape
    x_step, x_inner = x.stride() if x.stride(1) == 1 else x.stride()[::-1]
    w_step, w_inner = values.stride()
    # (one expression, no generator: this runs twice a launch and a launch's host time is the cost)
    return (takes_shape(n, k) and x_inner == 1 and w_inner == 1 and (x_step * x.element_size()) % 16 == 0
            and (w_step * values.element_size()) % 16 == 0 and x.data_ptr() % 16 == 0 and values.data_ptr() % 16 == 0)


def buffer_bytes(block_n: int, block_k: int, num_warps: int, num_stages: int) -> dict[str, int]:
    """The kernel's shared buffers in allocation order: X's, W's and the metadata's stages, the
    barriers (2-byte elements)."""
    return {"x": num_stages * block_k * block_n * 2, "w": num_stages * 16 * num_warps * block_k,
            "meta": num_stages * num_warps * 2 * block_k, "bars": 8 * num_stages}


@functools.lru_cache(maxsize=256)  # asked at every launch
def buffer_offsets(block_n: int, block_k: int, num_warps: int, num_stages: int) -> types.MappingProxyType:
    """Where Triton 3.6 places the buffers (all live together): largest first, ties in allocation
    order, each after the last (sizes are multiples of the 1024-byte alignment but the barriers',
    last). Read from the PTX of compiled configs; a wrong offset fails every check. Read-only."""
    sizes = buffer_bytes(block_n, block_k, num_warps, num_stages)
    offsets, at = {}, 0
    for name in sorted(sizes, key=lambda b: -sizes[b]):  # sorted() is stable
        offsets[name], at = at, at + sizes[name]
    return types.MappingProxyType(offsets)


@functools.cache
def _metadata_layout():
    return gl.NVMMASharedLayout(0, 32, rank=2)  # 32-bit words, unswizzled


def why_excluded(block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int, elem_size: int,
                 budget: DeviceBudget) -> str | None:
    """Why a config of this kernel is outside its space (None: it is in)."""
    if tuple(budget.compute_capability) != (9, 0) or not available():
        return (f"the sparse warpgroup-MMA kernel needs an sm_90 GPU and Triton "
                f"{' or '.join(semi24_hopper.GLUON_TRITON)}x (its Gluon API)")
    if block_n not in BLOCK_NS or block_k not in BLOCK_KS or num_warps not in WARPS or block_m != 16 * num_warps:
        return (f"the sparse warpgroup-MMA kernel takes block_n in {BLOCK_NS}, block_k in {BLOCK_KS}, num_warps in "
                f"{WARPS} and block_m = 16 num_warps")
    if num_stages not in STAGES:
        return f"the sparse warpgroup-MMA kernel takes num_stages in {STAGES}"
    if sum(buffer_bytes(block_n, block_k, num_warps, num_stages).values()) > budget.shared_mem_per_block:
        return "its stages do not fit in shared memory"
    return None


def tiles(split_ks, k: int, n: int, elem_size: int, budget: DeviceBudget):
    """(block_m, block_n, block_k, split_k, num_warps, num_stages) of the space at N ``n`` (none where
    TMA cannot read X's rows: N not a multiple of 8, or K, W's rows, not a multiple of 16)."""
    if not takes_shape(n, k):
        return
    for bn, bk, warps, sk, stages in itertools.product(BLOCK_NS, BLOCK_KS, WARPS, split_ks, STAGES):
        if bn > max(64, n) or (sk > 1 and sk * bk > k):
            continue
        if warps == 16 and bn == 128 and sk > 1:
            continue  # the split epilogue's registers pass 16 warps' 128 a thread: ptxas spills (sm_90a)
        if why_excluded(16 * warps, bn, bk, warps, stages, elem_size, budget) is None:
            yield 16 * warps, bn, bk, sk, warps, stages


if gluon is not None:
    @gluon.constexpr_function
    def _step_asm(P, BLOCK_N, KS, WG_BYTES, BF16, WAIT, X_KMAJOR):
        """The PTX of a step: 2 KS k32 MMAs in one group, then a wait leaving ``WAIT`` groups in flight.
        Operands ($): the accumulator 0.. (tied to 2P..) and the token q P (its input 3P) that chains
        the steps; this step's metadata words 4P, 5P; the previous step's 6P, 7P; the stage's W and X
        byte offsets from ``global_smem`` 8P, 9P.

        The MMAs read the metadata registers while they run (CUTLASS's sparse mainloop waits for
        each step's MMAs for this reason, 10-25% slower here), and ptxas reuses a register once its
        last reader has been issued. So the previous step's words are read once more after the wait
        has retired its MMAs (into the token, which the next step's scale-d predicate reads: never
        dead), and the loop is unrolled by two, so a step's words and the previous step's are
        distinct values live together (without it, 2-4 warpgroups gave 1-17% errors now and then)."""
        d = ", ".join(f"${i}" for i in range(P))
        dt = "bf16" if BF16 else "f16"
        # The descriptors' bits other than the address, as Triton's dense wgmma builds them: W
        # (K-major, 64 KS-byte rows) swizzled 64B / 128B with 512 / 1024 bytes between 8-row groups;
        # X (N-major, 128-byte rows) swizzled 128B, 1024 bytes between 8-row groups and a 64-column
        # block's bytes between blocks; X^T (K-major, 128-byte rows of 64 columns, one (BLOCK_N, 64)
        # tile per 64 columns) as W with KS = 2.
        a_hi = 0x8000002000000000 if KS == 1 else 0x4000004000000000
        x_hi = ((64 * KS * 128 >> 4 if BLOCK_N > 64 else 0) << 16) | (64 << 32) | (1 << 62)
        if X_KMAJOR:
            x_hi = 0x4000004000000000
        asm = ("{ .reg .b32 t, sa, sb; .reg .b64 da, db; .reg .pred p; "
               "mov.u32 t, %tid.x; shr.u32 t, t, 7; "
               f"mov.u32 sa, global_smem; mad.lo.u32 sa, t, {WG_BYTES}, sa; add.u32 sa, sa, ${8 * P}; "
               f"mov.u32 sb, global_smem; add.u32 sb, sb, ${9 * P}; bfe.u32 sa, sa, 4, 14; bfe.u32 sb, sb, 4, 14; "
               f"cvt.u64.u32 da, sa; or.b64 da, da, {a_hi}; cvt.u64.u32 db, sb; or.b64 db, db, {x_hi}; "
               f"setp.ne.u32 p, ${3 * P}, 0; wgmma.fence.sync.aligned; ")
        for m in range(2 * KS):
            # The next k32: 32 bytes further along W's rows; 32 rows (4096 bytes) down X, or 64 bytes
            # along X^T's rows and at 64 columns on to the next tile (BLOCK_N 128-byte rows).
            x_step = (BLOCK_N * 8 - 4 if m % 2 == 0 else 4) if X_KMAJOR else 256
            if m:
                asm += f"add.s64 da, da, 2; add.s64 db, db, {x_step}; "
            asm += (f"wgmma.mma_async.sp.sync.aligned.m64n{BLOCK_N}k32.f32.{dt}.{dt} {{{d}}}, da, db, "
                    f"${(4 + m // 2) * P}, {m % 2}, p, 1, 1, 0, {0 if X_KMAJOR else 1}; ")
        return (asm + f"wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned {WAIT}; "
                f"or.b32 t, ${6 * P}, ${7 * P}; or.b32 ${P}, t, 1; }}")

    @gluon.constexpr_function
    def _constraints(P, inputs):
        """P accumulator outputs, P token outputs, the accumulator's tied inputs, ``inputs`` more P-packs."""
        return ",".join(["=f"] * P + ["=r"] * P + [str(i) for i in range(P)] + ["r"] * (inputs * P))

    @gluon.constexpr_function
    def _retire_asm(P):
        """Wait for every MMA; the token (every register of it: the caller selects on all) from the
        last step's words."""
        tokens = " ".join(f"mov.b32 ${P + i}, t;" for i in range(P))
        return (f"{{ .reg .b32 t; wgmma.wait_group.sync.aligned 0; or.b32 t, ${3 * P}, ${4 * P}; "
                f"or.b32 t, t, 1; {tokens} }}")

    @gluon.jit
    def _mma_step(acc, q, meta0, meta1, prev0, prev1, w_off, x_off, BLOCK_N: gl.constexpr, KS: gl.constexpr,
                  WG_BYTES: gl.constexpr, DT: gl.constexpr, WAIT: gl.constexpr, X_KMAJOR: gl.constexpr):
        P: gl.constexpr = BLOCK_N // 2
        asm: gl.constexpr = _step_asm(P, BLOCK_N, KS, WG_BYTES, gl.bfloat16 == DT, WAIT, X_KMAJOR)
        return gl.inline_asm_elementwise(asm, _constraints(P, 7), [acc, q, meta0, meta1, prev0, prev1, w_off, x_off],
                                         dtype=(gl.float32, gl.int32), is_pure=False, pack=P)

    @gluon.jit
    def _retire(acc, prev0, prev1, BLOCK_N: gl.constexpr):
        """Wait for every MMA, then read the last step's metadata words (the token)."""
        P: gl.constexpr = BLOCK_N // 2
        asm: gl.constexpr = _retire_asm(P)
        return gl.inline_asm_elementwise(asm, _constraints(P, 2), [acc, prev0, prev1], dtype=(gl.float32, gl.int32),
                                         is_pure=False, pack=P)

    @gluon.constexpr_function
    def _block_n(x_block_shape, X_KMAJOR):
        """X's tile is (BLOCK_K, BLOCK_N), X^T's (BLOCK_N, 64)."""
        return x_block_shape[0] if X_KMAJOR else x_block_shape[1]

    @gluon.jit
    def _issue(w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bar, s, kt, pid_m, pid_n, pred, KS: gl.constexpr,
               X_KMAJOR: gl.constexpr):
        """Start the TMA loads of 64 KS-column step ``kt`` into stage ``s``: X's (or X^T's KS tiles of
        64 columns), W's and the metadata's."""
        BLOCK_M: gl.constexpr = w_desc.block_shape[0]
        BLOCK_N: gl.constexpr = _block_n(x_desc.block_shape, X_KMAJOR)
        X_TILES: gl.constexpr = KS if X_KMAJOR else 1
        mbarrier.expect(bar, X_TILES * x_desc.block_type.nbytes + w_desc.block_type.nbytes
                        + m_desc.block_type.nbytes, pred=pred)
        if X_KMAJOR:
            for j in gl.static_range(KS):
                tma.async_copy_global_to_shared(x_desc, [pid_n * BLOCK_N, (kt * KS + j) * 64], bar,
                                                x_smem.index(s * KS + j), pred=pred)
        else:
            tma.async_copy_global_to_shared(x_desc, [kt * 64 * KS, pid_n * BLOCK_N], bar, x_smem.index(s), pred=pred)
        tma.async_copy_global_to_shared(w_desc, [pid_m * BLOCK_M, kt * 32 * KS], bar, w_smem.index(s), pred=pred)
        tma.async_copy_global_to_shared(m_desc, [pid_m * (BLOCK_M // 16), kt * 32 * KS], bar, m_smem.index(s),
                                        pred=pred)

    @gluon.jit
    def _load_meta(stage, TM: gl.constexpr, KS: gl.constexpr, LQ: gl.constexpr, L: gl.constexpr):
        """A stage's (TM, 32 KS) metadata words -> each lane's KS words (one load), each spread over
        the tile layout."""
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
    def _step(acc, q, prev0, prev1, i, steps, w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bars, pid_k, pid_m,
              pid_n, zero, KS: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr, X_BASE: gl.constexpr,
              W_BASE: gl.constexpr, WAIT: gl.constexpr, X_KMAJOR: gl.constexpr, LQ: gl.constexpr, L: gl.constexpr):
        """Step i: wait for its stage, issue its MMAs, refill the stage of step i - 1 (retired)."""
        BLOCK_M: gl.constexpr = w_desc.block_shape[0]
        BLOCK_N: gl.constexpr = _block_n(x_desc.block_shape, X_KMAJOR)
        BK: gl.constexpr = 64 * KS
        s = i % STAGES
        mbarrier.wait(bars.index(s), (i // STAGES) & 1)
        meta0, meta1 = _load_meta(m_smem.index(s), BLOCK_M // 16, KS, LQ, L)
        meta0 += zero
        meta1 += zero
        w_off = zero + W_BASE + s * (BLOCK_M * BK)
        x_off = zero + X_BASE + s * (BK * BLOCK_N * 2)
        acc, q = _mma_step(acc, q, meta0, meta1, prev0, prev1, w_off, x_off, BLOCK_N, KS, 64 * BK, x_desc.dtype,
                           WAIT, X_KMAJOR)
        # Each warpgroup's wait retired its MMAs of step i - 1 (all of them with WAIT = 0); after the
        # barrier no warpgroup reads that step's stage, which the next load refills.
        gl.thread_barrier()
        nxt = i + STAGES - 1
        _issue(w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bars.index(nxt % STAGES), nxt % STAGES,
               nxt * SPLIT_K + pid_k, pid_m, pid_n, nxt < steps, KS, X_KMAJOR)
        return acc, q, meta0, meta1

    @gluon.jit
    def _semi24_wgmma_sp_kernel(
        # TMA descriptors: W's values (M, K/2), X (K, N) or X^T (N, K) (X_KMAJOR), W's wgmma_metadata
        w_desc,
        x_desc,
        m_desc,
        # Y (M x N, any strides), the bias Y's rows get (HAS_BIAS)
        y_ptr,
        bias_ptr,
        # SPLIT_K > 1: the zeroed fp32 buffer (Y^T) the splits add into and a counter per output tile
        partial_ptr,
        count_ptr,
        M,
        N,
        K,
        stride_ym,
        stride_yn,
        # template parameters; X_BASE and W_BASE: buffer_offsets (the MMAs address shared memory)
        KS: gl.constexpr,
        SPLIT_K: gl.constexpr,
        STAGES: gl.constexpr,
        X_BASE: gl.constexpr,
        W_BASE: gl.constexpr,
        HAS_BIAS: gl.constexpr,
        WAIT: gl.constexpr,
        X_KMAJOR: gl.constexpr,
        Y_MCONTIG: gl.constexpr,
        num_warps: gl.constexpr,
    ):
        BLOCK_M: gl.constexpr = 16 * num_warps
        BLOCK_N: gl.constexpr = _block_n(x_desc.block_shape, X_KMAJOR)
        TM: gl.constexpr = num_warps
        NB: gl.constexpr = BLOCK_N // 8
        BK: gl.constexpr = 64 * KS
        L: gl.constexpr = _tile_layout(num_warps)
        LQ: gl.constexpr = _lane_layout(TM, num_warps)

        pid, pid_k, pid_m, pid_n, steps = _program_tile(N, K, BLOCK_N, BK, SPLIT_K)

        if X_KMAJOR:  # the same bytes as (BLOCK_N, 64) tiles, KS a stage
            x_smem = gl.allocate_shared_memory(x_desc.dtype, [STAGES * KS, BLOCK_N, 64], x_desc.layout)
        else:
            x_smem = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BK, BLOCK_N], x_desc.layout)
        w_smem = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BLOCK_M, BK // 2], w_desc.layout)
        m_smem = gl.allocate_shared_memory(gl.int32, [STAGES, TM, 32 * KS], m_desc.layout)
        bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for b in gl.static_range(STAGES):
            mbarrier.init(bars.index(b), count=1)
        for b in gl.static_range(STAGES - 1):
            _issue(w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bars.index(b), b, b * SPLIT_K + pid_k, pid_m,
                   pid_n, b < steps, KS, X_KMAJOR)

        acc = gl.zeros((TM, 2, 8, NB, 8), dtype=gl.float32, layout=L)
        zero = gl.zeros((TM, 2, 8, NB, 8), dtype=gl.int32, layout=L)
        q = zero + 1
        a0 = zero
        a1 = zero
        b0 = zero
        b1 = zero
        for i in range(0, steps, 2):  # steps i (words a) and i + 1 (words b): see _step_asm
            acc, q, a0, a1 = _step(acc, q, b0, b1, i, steps, w_desc, x_desc, m_desc, w_smem, x_smem, m_smem, bars,
                                   pid_k, pid_m, pid_n, zero, KS, SPLIT_K, STAGES, X_BASE, W_BASE, WAIT, X_KMAJOR,
                                   LQ, L)
            b0 = a0
            b1 = a1
            if i + 1 < steps:
                acc, q, b0, b1 = _step(acc, q, a0, a1, i + 1, steps, w_desc, x_desc, m_desc, w_smem, x_smem, m_smem,
                                       bars, pid_k, pid_m, pid_n, zero, KS, SPLIT_K, STAGES, X_BASE, W_BASE, WAIT,
                                       X_KMAJOR, LQ, L)
        acc, q = _retire(acc, b0, b1, BLOCK_N)
        acc = gl.where(q != 0, acc, 0.0)  # q is never 0: the last words stay live until their MMAs retire
        # The epilogue's layout conversion may reuse the stages' shared memory: every warpgroup's MMAs
        # must have retired first (without this barrier, configs of 2-4 warpgroups read corrupt tiles).
        gl.thread_barrier()
        for b in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(b))

        _store_tile_24(acc, y_ptr, bias_ptr, partial_ptr, count_ptr + pid, pid_m, pid_n, M, N, stride_ym, stride_yn,
                       BLOCK_M, BLOCK_N, SPLIT_K, HAS_BIAS, Y_MCONTIG, num_warps)


def metadata_shape(m: int, k: int) -> tuple[int, int]:
    """The shape of an (M x K) matrix's ``wgmma_metadata``."""
    return 16 * triton.cdiv(m, 256), 64 * triton.cdiv(k, 128)


def check_metadata(meta, m: int, k: int, device) -> None:
    """Raise ``ValueError`` unless ``meta`` is an (M x K) matrix's ``Semi24Matrix.wgmma_metadata()``."""
    shape = metadata_shape(m, k)
    if meta is None:
        raise ValueError("semi24_mm: the sparse warpgroup-MMA kernel needs the matrix's wgmma_metadata(block_k // 64) "
                         "(pass mma_metadata=)")
    if tuple(meta.shape) != shape or meta.dtype != torch.int32 or meta.device != device or not meta.is_contiguous():
        raise ValueError(f"semi24_mm: wgmma_metadata must be a contiguous int32 {shape} tensor on {device} "
                         f"(Semi24Matrix.wgmma_metadata()), got {meta.dtype} {tuple(meta.shape)} on {meta.device}")


# Compiled kernels whose shared memory was checked against buffer_offsets' account of it.
_CHECKED: set = set()


def launch(values, meta, x, out, bias, partial, counts, *, m: int, n: int, k: int, block_m: int, block_n: int,
           block_k: int, split_k: int, num_warps: int, num_stages: int, wait: int = 1) -> None:
    """Launch the kernel on a 2:4 matrix's values and its ``Semi24Matrix.wgmma_metadata(block_k // 64)``;
    ``semi24.semi24_mm`` validates the arguments and allocates. ``wait``: MMA groups left in flight
    a step (0 is CUTLASS's choice, kept for measuring it)."""
    if block_m != 16 * num_warps:
        raise ValueError(f"the sparse warpgroup-MMA kernel's block_m is 16 num_warps, got {block_m} and {num_warps}")
    ks = block_k // 64
    # X (K x N) with N contiguous, or a transposed view of a row-major X^T (N x K, as a linear layer
    # holds its input), read as it is.
    x_kmajor = x.stride(1) != 1
    x_rows, x_box = (x.t(), [block_n, 64]) if x_kmajor else (x, [block_k, block_n])
    w_box, m_box = [block_m, 32 * ks], [num_warps, 32 * ks]
    w_desc = TensorDescriptor.from_tensor(values, w_box, semi24_hopper.nvmma_layout(tuple(w_box), x.dtype))
    x_desc = TensorDescriptor.from_tensor(x_rows, x_box, semi24_hopper.nvmma_layout(tuple(x_box), x.dtype))
    m_desc = TensorDescriptor.from_tensor(meta, m_box, _metadata_layout())
    at = buffer_offsets(block_n, block_k, num_warps, num_stages)
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    compiled = _semi24_wgmma_sp_kernel[(tiles, split_k)](
        w_desc, x_desc, m_desc, out, values if bias is None else bias, partial, counts, m, n, k,
        out.stride(0), out.stride(1), KS=ks, SPLIT_K=split_k, STAGES=num_stages, X_BASE=at["x"], W_BASE=at["w"],
        HAS_BIAS=bias is not None, WAIT=wait, X_KMAJOR=x_kmajor, Y_MCONTIG=out.stride(0) == 1 and m > 1,
        num_warps=num_warps)
    if compiled not in _CHECKED:
        needed = sum(buffer_bytes(block_n, block_k, num_warps, num_stages).values())
        if compiled.metadata.shared < needed:
            raise RuntimeError(f"the sparse warpgroup-MMA kernel's shared memory ({compiled.metadata.shared} B) is "
                               f"less than its buffers' ({needed} B): the MMAs' addresses would be wrong")
        _CHECKED.add(compiled)
