"""2:4 semi-structured SpMM for Hopper in Gluon: W rebuilt straight into the MMA's register operand.

The Triton kernel (``semi24.py``) rebuilds each W tile in registers and hands it to ``tl.dot``, which
stores it to shared memory and reads it back: at decode widths that round trip keeps the L1/shared
pipe 73-83% busy and bounds the kernel (BENCHMARKS.md 7i). Here every lane loads only the value pairs
of the groups it feeds the warpgroup MMA and builds its 32-bit words of the tile with one byte
permute (``prmt``, its selector looked up from two mask bits), in the layout of the MMA's register
operand, so W never touches shared memory. Only X does: cp.async, ``STAGES`` deep. Each step waits
for its MMA (``_semi24_hopper_kernel`` says why); other programs on the SM overlap with it.

The MMA's k index and W's columns need not agree: any order works if X's rows are read in the same
one. The order here, c = 8 lo + 4 hi + 2 a + b for the memory group hi * BLOCK_K/8 + lo, gives each
lane eight consecutive groups (32 bytes of pairs and one mask word a row) and leaves the rebuilt
words exactly where the MMA wants them.

Gluon has no interpreter: this kernel runs on sm_90 GPUs only; elsewhere ``semi24.py`` runs.
"""

from __future__ import annotations

import functools
import itertools

import torch
import triton
from stuning.kernels.split_k import add_split, store_split
from stuning.kernels.target import DeviceBudget, interpreting, is_sm90

try:  # Gluon's Hopper API as of Triton 3.6; older Tritons have no Gluon
    from stuning.kernels.split_k_cluster import store_rows
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
    from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait
except ImportError:  # pragma: no cover - depends on the installed Triton
    gluon = None

BLOCK_K = 64  # one mask word per lane and row; the decode configs of the Triton kernel use 64 too

# (BLOCK_M, num_warps): the warps split the rows 16 each, so a warpgroup MMA covers 64 rows.
TILES = ((64, 4), (128, 4), (128, 8))
STAGES = (2, 3, 4)
# On the H200 its best config ran 0.98-1.09x as fast as the Triton kernel's tuned one on the
# Llama-7B shapes at N = 16, and 0.82-0.96x at N = 128 (BENCHMARKS.md 7m): the space stops short.
MAX_N = 32


# Gluon is experimental and its API moves between releases (after 3.6, cp.async's and the thread
# barrier's builtins were renamed): the kernel is offered only on the Triton it was checked on.
GLUON_TRITON = ("3.6.",)


def available() -> bool:
    """Whether this Triton runs the kernel: a release with Gluon's Hopper API as used here."""
    return gluon is not None and triton.__version__.startswith(GLUON_TRITON)


@functools.cache
def nvmma_layout(block: tuple[int, ...], dtype: torch.dtype):
    """The 16-bit ``dtype`` tile ``block``'s layout in shared memory as TMA writes it (the default
    swizzle), for the Hopper kernels' descriptors: made once per tile and dtype, since Gluon builds
    layouts slowly enough to show in a launch's host time."""
    return gl.NVMMASharedLayout.get_default_for(list(block), gl.bfloat16 if dtype == torch.bfloat16 else gl.float16)


def takes_shape(n: int, k: int) -> bool:
    """Whether X's shape lets the kernel copy it in 16-byte pieces (N a multiple of 16)."""
    return n % 16 == 0


def takes(values: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether the kernel runs this X (W: ``semi24_mm``'s checks do): on an sm_90 GPU (not the
    interpreter), copied in 16-byte pieces (N contiguous, rows and start 16-byte aligned, N a multiple
    of 16). Otherwise the Triton kernel runs the same tiles."""
    return (available() and not interpreting() and is_sm90(x.device) and x.stride(1) == 1
            and x.stride(0) % 16 == 0 and x.data_ptr() % 16 == 0 and takes_shape(*x.shape[::-1]))


def why_excluded(block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int, elem_size: int,
                 budget: DeviceBudget) -> str | None:
    """Why a config of this kernel is outside its space (None: it is in)."""
    if tuple(budget.compute_capability) != (9, 0) or not available():
        return f"the Hopper kernel needs an sm_90 GPU and Triton {' or '.join(GLUON_TRITON)}x (its Gluon API)"
    if block_k != BLOCK_K:
        return f"the Hopper kernel steps K by {BLOCK_K}"
    if (block_m, num_warps) not in TILES or num_stages not in STAGES:
        return f"the Hopper kernel takes (block_m, num_warps) in {TILES} and num_stages in {STAGES}"
    if block_m * block_n // (32 * num_warps) > 128:
        return "the accumulator exceeds 128 registers a thread"
    if num_stages * BLOCK_K * block_n * elem_size > budget.shared_mem_per_block:
        return "X's stages do not fit in shared memory"
    return None


def tiles(block_ns, split_ks, k: int, n: int, elem_size: int, budget: DeviceBudget):
    """(block_m, block_n, split_k, num_warps, num_stages) of the space at N ``n`` (none above
    ``MAX_N``): the N tiles and split counts the Triton kernel's space allows there."""
    if not takes_shape(n, k) or n > MAX_N:
        return
    for (bm, warps), bn, sk, stages in itertools.product(TILES, block_ns, split_ks, STAGES):
        if (sk == 1 or sk * BLOCK_K <= k) and why_excluded(bm, bn, BLOCK_K, warps, stages, elem_size, budget) is None:
            yield bm, bn, sk, warps, stages


if gluon is not None:
    # prmt byte selectors, 16 bits each, by the lane's two mask bits (none, first, second, both
    # kept): the lo word (columns 0-1 of a group) and the hi word (columns 2-3); byte 4 is zero.
    # (A kernel reads module constants only as constexprs, so they are defined under the import.)
    _LO_SELECTORS = gl.constexpr(0x3210_1044_4410_4444)
    _HI_SELECTORS = gl.constexpr(0x3210_3244_4432_4444)

    @gluon.constexpr_function
    def _pair_layout(BLOCK_M, num_warps):
        """Tiles of shape (BLOCK_M, 2, 8, 2): row, high bit of the group (a lane bit), its low bits
        (registers, consecutive groups in memory), half of the group (a lane bit: the lo or hi word
        this lane feeds the MMA). Row and lane bits as in the MMA operand's layout."""
        reg = [[0, 0, 1, 0], [0, 0, 2, 0], [0, 0, 4, 0], [8, 0, 0, 0]]
        rows = 16 * num_warps
        while rows < BLOCK_M:
            reg.append([rows, 0, 0, 0])
            rows *= 2
        lane = [[0, 0, 0, 1], [0, 1, 0, 0], [1, 0, 0, 0], [2, 0, 0, 0], [4, 0, 0, 0]]
        warp = [[16 << i, 0, 0, 0] for i in range(num_warps.bit_length() - 1)]
        return gl.DistributedLinearLayout(reg, lane, warp, [], [BLOCK_M, 2, 8, 2])

    @gluon.jit
    def _semi24_hopper_kernel(
        # W: values (M, K/2), read as int32 pairs, and 4-bit group masks (M, ceil(K/32)) int32
        val_ptr,
        mask_ptr,
        # X (K x N, N contiguous), Y (M x N, any strides), the bias Y's rows get (HAS_BIAS)
        x_ptr,
        y_ptr,
        bias_ptr,
        # SPLIT_K > 1: the zeroed fp32 buffer (Y^T) the splits add into and a counter per output tile
        partial_ptr,
        count_ptr,
        M,
        N,
        K,
        stride_vm,
        stride_mm,
        stride_xk,
        stride_ym,
        stride_yn,
        # template parameters
        BLOCK_M: gl.constexpr,
        BLOCK_N: gl.constexpr,
        SPLIT_K: gl.constexpr,
        STAGES: gl.constexpr,
        EVEN_K: gl.constexpr,
        HAS_BIAS: gl.constexpr,
        num_warps: gl.constexpr,
    ):
        BK: gl.constexpr = 64  # BLOCK_K
        G: gl.constexpr = BK // 4
        DT: gl.constexpr = x_ptr.dtype.element_ty
        L4: gl.constexpr = _pair_layout(BLOCK_M, num_warps)
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                             instr_shape=[16, BLOCK_N, 16])
        a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
        XT: gl.constexpr = BLOCK_N // 8
        x_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // XT, XT], [num_warps, 1], [1, 0])
        xs_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BK, BLOCK_N], DT)

        pid, pid_k, pid_m, pid_n, steps = _program_tile(N, K, BLOCK_N, BK, SPLIT_K)
        n_groups = gl.cdiv(K, 4)

        S3: gl.constexpr = gl.SliceLayout(3, L4)
        S2: gl.constexpr = gl.SliceLayout(2, S3)
        S_mw: gl.constexpr = gl.SliceLayout(2, L4)
        # Rows past M read row M - 1: what they compute is never stored, and no load needs a mask.
        m = gl.minimum(pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, S2)), M - 1)
        hi = gl.arange(0, 2, layout=gl.SliceLayout(0, S2))
        lo = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, S3)))
        a = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, L4))))
        m4 = m[:, None, None, None]
        g4 = hi[None, :, None, None] * 8 + lo[None, None, :, None]  # the group within the step, in memory
        a4 = a[None, None, None, :]
        pair_ptrs = (val_ptr.to(gl.pointer_type(gl.int32)) + m4.to(gl.int64) * (stride_vm // 2)
                     + pid_k * G + g4 + a4 * 0)
        m_mw = gl.minimum(pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, gl.SliceLayout(2, S_mw))),
                          M - 1)
        hi_mw = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(2, S_mw)))
        a_mw = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, S_mw)))
        mask_ptrs = (mask_ptr + m_mw[:, None, None].to(gl.int64) * stride_mm + pid_k * 2 + hi_mw[None, :, None]
                     + a_mw[None, None, :] * 0)
        word3 = hi_mw[None, :, None]  # the mask word within the step
        # This lane's two bits of a group's mask sit 4 lo + 2 a up its word; the selectors are
        # indexed in steps of 16 bits, so the bits are wanted 4 places up: a 64-bit funnel shift.
        shift = 4 * lo[None, None, :, None] + 2 * a4
        selectors = gl.where(a4 == 0, _LO_SELECTORS, _HI_SELECTORS).to(gl.int64)

        c = gl.arange(0, BK, layout=gl.SliceLayout(1, x_layout))
        row = 4 * ((c // 4) // 2 + ((c // 4) % 2) * 8) + c % 4  # X's row behind the MMA's k index c
        xn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, x_layout))
        x_ptrs = x_ptr + (pid_k * BK + row)[:, None].to(gl.int64) * stride_xk + xn[None, :]
        n_ok = (xn < N)[None, :]
        x_smem = gl.allocate_shared_memory(DT, [STAGES, BK, BLOCK_N], xs_layout)
        for s in gl.static_range(STAGES - 1):
            _load_x(x_smem.index(s), x_ptrs, n_ok, gl.minimum(s, steps - 1), SPLIT_K, pid_k, stride_xk, K,
                    row, BK, EVEN_K)

        pairs, mwords = _load_w(pair_ptrs, mask_ptrs, 0, SPLIT_K, pid_k, g4, word3, n_groups, G, EVEN_K)
        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=acc_layout)
        for i in range(steps):
            w = _rebuild(pairs, mwords, shift, selectors, BLOCK_M, BK, DT, a_layout)
            # The next step's W (the last step reloads its own: no mask, nothing read past the end).
            pairs, mwords = _load_w(pair_ptrs, mask_ptrs, gl.minimum(i + 1, steps - 1), SPLIT_K, pid_k, g4,
                                    word3, n_groups, G, EVEN_K)
            async_copy.wait_group(STAGES - 2)
            fence_async_shared()
            gl.thread_barrier()
            # The MMA is waited for at once. Waiting later lets the next rebuild overwrite the
            # registers it reads: Triton's wait keeps the tile's values alive, not the copies of them
            # the MMA reads, and ptxas does not see the hazard across the loop's back edge (wrong
            # results on the H200). Other programs on the SM overlap their rebuilds with this MMA.
            acc = warpgroup_mma(w, x_smem.index(i % STAGES), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            # Every warp passed the barrier above after its MMA of step i - 1: that X slot is free.
            nxt = i + STAGES - 1
            _load_x(x_smem.index(nxt % STAGES), x_ptrs, n_ok, gl.minimum(nxt, steps - 1), SPLIT_K, pid_k,
                    stride_xk, K, row, BK, EVEN_K)
        async_copy.wait_group(0)

        offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
        offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, acc_layout))
        # As the Triton kernel: split-K's buffer is laid out as Y^T.
        partial_ptrs = partial_ptr + offs_n[None, :].to(gl.int64) * M + offs_m[:, None]
        _finish_tile(acc, y_ptr, bias_ptr, partial_ptrs, count_ptr + pid, offs_m, offs_n, M, N, stride_ym, stride_yn,
                     SPLIT_K, HAS_BIAS)

    @gluon.jit
    def _rebuild(pairs, mwords, shift, selectors, BLOCK_M: gl.constexpr, BK: gl.constexpr, DT: gl.constexpr,
                 a_layout: gl.constexpr):
        """The (BLOCK_M, BK) tile of W in the MMA operand's layout: each lane's word of a group is its
        pair permuted by the selector its two mask bits pick."""
        amount = ((mwords.to(gl.int64) << 4) >> shift).to(gl.int32) & 0x30
        sel = (selectors >> amount.to(gl.int64)).to(gl.int32)
        words = gl.inline_asm_elementwise("prmt.b32 $0, $1, 0, $2;", "=r,r,r", [pairs, sel], dtype=gl.int32,
                                          is_pure=True, pack=1)
        w = gl.join(words.to(gl.int16).to(DT, bitcast=True), (words >> 16).to(gl.int16).to(DT, bitcast=True))
        return gl.convert_layout(gl.reshape(gl.permute(w, (0, 2, 1, 3, 4)), (BLOCK_M, BK)), a_layout)

    @gluon.jit
    def _load_w(pair_ptrs, mask_ptrs, step, SPLIT_K: gl.constexpr, pid_k, g4, word3, n_groups, G: gl.constexpr,
                EVEN_K: gl.constexpr):
        kt = step * SPLIT_K
        if EVEN_K:
            pairs = gl.load(pair_ptrs + kt * G)
            mwords = gl.load(mask_ptrs + kt * 2)
        else:
            in_k = (pid_k + kt) * G + g4 < n_groups
            pairs = gl.load(pair_ptrs + kt * G, mask=in_k, other=0)
            # A group past K has no mask word of its own; its bits (and so its words) are zero.
            mwords = gl.load(mask_ptrs + kt * 2, mask=(pid_k + kt) * 2 + word3 < gl.cdiv(n_groups, 8), other=0)
        return pairs, mwords[:, :, None, :]

    @gluon.jit
    def _load_x(dst, x_ptrs, n_ok, step, SPLIT_K: gl.constexpr, pid_k, stride_xk, K, row, BK: gl.constexpr,
                EVEN_K: gl.constexpr):
        kt = step * SPLIT_K
        if EVEN_K:
            async_copy.async_copy_global_to_shared(dst, x_ptrs + kt * BK * stride_xk, mask=n_ok)
        else:
            k_ok = ((pid_k + kt) * BK + row < K)[:, None]
            async_copy.async_copy_global_to_shared(dst, x_ptrs + kt * BK * stride_xk, mask=n_ok & k_ok)
        async_copy.commit_group()

    @gluon.constexpr_function
    def _out_layout(BLOCK_M, num_warps, Y_MCONTIG):
        """The layout a tile is stored to Y in: 8-byte runs along N for a row-major Y, or, when Y's
        columns are contiguous (a layer's Y^T), 8 rows a thread down whole columns. Gluon keeps the
        layout it is given, so storing Y^T in the row-major one wrote 2-byte pieces 2 KB apart: 1.04 to
        1.35 times the kernel's time at N >= 2048 (BENCHMARKS.md 9k)."""
        if not Y_MCONTIG:
            return gl.BlockedLayout([1, 4], [8, 4], [num_warps, 1], [1, 0])
        lanes_m = min(32, BLOCK_M // 8)
        return gl.BlockedLayout([8, 1], [lanes_m, 32 // lanes_m], [1, num_warps], [0, 1])

    @gluon.jit
    def _program_tile(N, K, BLOCK_N: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr):
        """The program's output tile (pid; its split pid_k, row block pid_m, column block pid_n) and its
        share of K's steps (every SPLIT_K-th from pid_k): the grid every 2:4 Gluon kernel launches."""
        pid = gl.program_id(0)
        pid_k = gl.program_id(1)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        return pid, pid_k, pid // num_pid_n, pid % num_pid_n, gl.cdiv(gl.cdiv(K, BK) - pid_k, SPLIT_K)

    @gluon.jit
    def _store_tile_24(acc, y_ptr, bias_ptr, partial_ptr, count_ptr, pid_m, pid_n, M, N, stride_ym, stride_yn,
                       BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, SPLIT_K: gl.constexpr, HAS_BIAS: gl.constexpr,
                       Y_MCONTIG: gl.constexpr, num_warps: gl.constexpr):
        """The 2:4 Gluon kernels' epilogue (warpgroup and sparse MMA): their accumulator, in any
        layout, reshaped to the (BLOCK_M x BLOCK_N) tile, moved into ``_out_layout`` and finished by
        ``_finish_tile``; split-K's workspace is Y^T-shaped, as the Triton 2:4 kernel's."""
        out_layout: gl.constexpr = _out_layout(BLOCK_M, num_warps, Y_MCONTIG)
        acc = gl.convert_layout(gl.reshape(acc, (BLOCK_M, BLOCK_N)), out_layout)
        offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, out_layout))
        offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, out_layout))
        partial_ptrs = partial_ptr + offs_n[None, :].to(gl.int64) * M + offs_m[:, None]
        _finish_tile(acc, y_ptr, bias_ptr, partial_ptrs, count_ptr, offs_m, offs_n, M, N, stride_ym, stride_yn,
                     SPLIT_K, HAS_BIAS)

    @gluon.jit
    def _finish_tile(acc, y_ptr, bias_ptr, partial_ptrs, count_ptr, offs_m, offs_n, M, N, stride_ym, stride_yn,
                     SPLIT_K: gl.constexpr, HAS_BIAS: gl.constexpr, pid_k=0, slice_elems=0,
                     SLICES: gl.constexpr = False, ORDERED: gl.constexpr = False):
        """Write a program's fp32 tile (rows ``offs_m``, columns ``offs_n``) to Y, plus the bias. With
        split-K it is added into the zeroed workspace at ``partial_ptrs`` instead, and the split that
        finishes the tile last (``count_ptr``, its counter) writes the sum; with ``SLICES``, stored into
        split ``pid_k``'s own slice of it instead (``store_split``). The Gluon kernels' one epilogue
        (2:4 Hopper and sparse-MMA, scatter SpMM)."""
        ok = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        if SPLIT_K > 1:
            if SLICES:
                last, acc = store_split(partial_ptrs, acc, ok, count_ptr, pid_k, slice_elems, SPLIT_K, ORDERED)
            else:
                last, acc = add_split(partial_ptrs, acc, ok, count_ptr, SPLIT_K)
            if last:
                _store_y(acc, y_ptr, bias_ptr, offs_m, offs_n, ok, M, stride_ym, stride_yn, HAS_BIAS)
        else:
            _store_y(acc, y_ptr, bias_ptr, offs_m, offs_n, ok, M, stride_ym, stride_yn, HAS_BIAS)

    @gluon.jit
    def _store_y(acc, y_ptr, bias_ptr, offs_m, offs_n, ok, M, stride_ym, stride_yn, HAS_BIAS: gl.constexpr,
                 EVERY_RANK: gl.constexpr = False, PAIRS: gl.constexpr = False):
        """EVERY_RANK: each CTA of a cluster stores its own rows of ``acc`` (``store_rows``, 32 bits
        at a time with PAIRS), where ``gl.store`` would store from rank 0 alone."""
        if HAS_BIAS:
            acc += gl.load(bias_ptr + offs_m, mask=offs_m < M, other=0.0).to(gl.float32)[:, None]
        y_ptrs = y_ptr + offs_m[:, None].to(gl.int64) * stride_ym + offs_n[None, :] * stride_yn
        if EVERY_RANK:
            store_rows(y_ptrs, acc.to(y_ptr.dtype.element_ty), ok, PAIRS)
        else:
            gl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=ok)


def launch(values, masks, x, out, bias, partial, counts, *, m: int, n: int, k: int, block_m: int, block_n: int,
           split_k: int, num_warps: int, num_stages: int) -> None:
    """Launch the kernel; ``semi24.semi24_mm`` validates the arguments and allocates."""
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    _semi24_hopper_kernel[(tiles, split_k)](
        values, masks, x, out, values if bias is None else bias, partial, counts,
        m, n, k, values.stride(0), masks.stride(0), x.stride(0), out.stride(0), out.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, SPLIT_K=split_k, STAGES=num_stages, EVEN_K=k % BLOCK_K == 0,
        HAS_BIAS=bias is not None, num_warps=num_warps,
    )
