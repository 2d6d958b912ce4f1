"""2:4 semi-structured SpMM on the sparse tensor cores: ``mma.sp`` (m16n8k32) from Gluon by inline PTX.

Triton has no sparse MMA, so the other 2:4 kernels rebuild W densely on chip and multiply it as dense
(``semi24.py``, ``semi24_hopper.py``): they do the dense product's arithmetic and pay for the rebuild.
The sparse MMA reads W as it is stored, the two kept values of each group of four plus 2-bit
positions, and does half the arithmetic. It is a warp-level instruction whose operands sit in fixed
lanes and registers, so the kernel lays every tensor out by hand (``_tile_layout``): a tensor of
shape (TM, 2, 8, NB, 8) holds, for m16 tile ``tm`` and n8 block ``j``, row ``8 h + g`` and column
``c`` of the tile in lane ``4 g + c // 2`` and register ``(c % 2, h)``: exactly an m16n8 accumulator
fragment, four registers a tile. The other operands are laid out in the same shape, so one
``inline_asm_elementwise`` with ``pack=4`` issues one MMA per (tile, block) with each lane's own
registers.

- W's values go to the MMA as they are stored: a group's kept pair is one 32-bit register. The MMA's
  k order differs from W's columns (any order works if X's rows follow it): memory group 4 q + 2 kk + w
  of a 64-column step is group q + 4 w of the step's MMA kk, so each lane reads its two registers of
  a row as one 8-byte load.
- The metadata (2-bit positions of each kept value) is built once a matrix from its 4-bit group masks
  in the lanes' order (``Semi24Matrix.mma_metadata``; as many bytes as the masks), so a lane loads
  its register of a step as one coalesced word. Which lane's bits name which row and group PTX shows only in
  figures; it was measured on the H200 (``scripts/probe_mma_sp.py``).
- X goes through shared memory (cp.async, rows in the MMA's k order) and reaches the registers by
  ``ldmatrix`` in the dense MMA's B layout: the sparse m16n8k32 B operand is two of those.

On the H200 it ran 1.12-1.32x cuBLAS at N = 16 on the Llama-7B shapes, ahead of the other 2:4
kernels, and 0.52-0.70x at N = 128, behind them (BENCHMARKS.md 7t): its space stops at ``MAX_N``.
Gluon has no interpreter and its API moves between releases: the kernel is offered on sm_90 GPUs
with the Triton release it was checked on (``semi24_hopper.GLUON_TRITON``); elsewhere the Triton
kernel runs a config of it (``semi24.repair``).
"""

from __future__ import annotations

import itertools

import torch
import triton

try:  # Gluon as of Triton 3.6
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
except ImportError:  # pragma: no cover - depends on the installed Triton
    gluon = None

from stuning.kernels import semi24_hopper
from stuning.kernels.target import DeviceBudget

if gluon is not None:
    # X's cp.async stages and the epilogue are the Hopper 2:4 kernel's, argument for argument.
    from stuning.kernels.semi24_hopper import _load_x, _program_tile, _store_tile_24

BLOCK_K = 64  # two MMAs of k32 a step: 8 bytes of value pairs a lane and row, one metadata word a lane
# (BLOCK_M, num_warps): each warp multiplies 16 or 32 rows. Measured on the H200 (7t): at N = 16 the
# 16-32-row warps with 4-16 splits won; warps split across N and W loaded two steps ahead did not
# (probe runs 2-3 in benchmarks/h200-semi24-mma-sp/, on the kernel of commit 1cc0594).
TILES = ((16, 1), (32, 2), (64, 4), (128, 4), (128, 8))
STAGES = (2, 3)
SPLIT_KS = (1, 2, 3, 4, 6, 8, 12, 16)
# At N = 16 it beat the other 2:4 kernels on every Llama-7B shape; at N = 128 it lost on every one.
MAX_N = 32


def available() -> bool:
    """Whether this Triton runs the kernel (Gluon's API as checked, the Hopper kernel's release)."""
    return semi24_hopper.available()


# It reads X as the Hopper kernel does: on an sm_90 GPU (not the interpreter), in 16-byte pieces (N
# contiguous, rows and start 16-byte aligned, N a multiple of 16).
takes = semi24_hopper.takes
takes_shape = semi24_hopper.takes_shape


def why_excluded(block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int, elem_size: int,
                 budget: DeviceBudget) -> str | None:
    """Why a config of this kernel is outside its space (None: it is in)."""
    if tuple(budget.compute_capability) != (9, 0) or not available():
        return (f"the sparse-MMA kernel needs an sm_90 GPU and Triton {' or '.join(semi24_hopper.GLUON_TRITON)}x "
                "(its Gluon API)")
    if block_k != BLOCK_K:
        return f"the sparse-MMA kernel steps K by {BLOCK_K}"
    if (block_m, num_warps) not in TILES or num_stages not in STAGES or block_n not in (16, 32):
        return (f"the sparse-MMA kernel takes (block_m, num_warps) in {TILES}, num_stages in {STAGES} and "
                "block_n 16 or 32")
    return None


def tiles(split_ks, k: int, n: int, elem_size: int, budget: DeviceBudget):
    """(block_m, block_n, split_k, num_warps, num_stages) of the space at N ``n`` (none above
    ``MAX_N`` or where the kernel cannot read X in 16-byte pieces)."""
    if not takes_shape(n, k) or n > MAX_N:
        return
    for (bm, warps), bn, sk, stages in itertools.product(TILES, (16, 32), split_ks, STAGES):
        if bn > max(16, n) or (sk > 1 and sk * BLOCK_K > k):
            continue
        if why_excluded(bm, bn, BLOCK_K, warps, stages, elem_size, budget) is None:
            yield bm, bn, sk, warps, stages


if gluon is not None:
    @gluon.constexpr_function
    def _tile_layout(num_warps):
        """(TM, 2, 8, NB, 8): tm (warps, then registers), h (register), g (lane bits 2-4), j
        (registers), c (lane bits 0-1 and a register). Registers (c % 2, h) lowest: a pack of four is
        one accumulator fragment. A warp multiplies BLOCK_M / 16 / num_warps tiles of rows by all
        BLOCK_N / 8 blocks of columns: each W fragment it loads serves every block."""
        return gl.BlockedLayout([1, 2, 1, 1, 2], [1, 1, 8, 1, 4], [num_warps, 1, 1, 1, 1], [4, 1, 3, 0, 2])

    @gluon.constexpr_function
    def _lane_layout(TM, num_warps):
        """(TM, 8, 4) values of lanes (g, q): one register a tile, no copies within a warp; the warps
        split the tiles as the tile layout's do."""
        tm_bits = [[1 << i, 0, 0] for i in range(TM.bit_length() - 1)]
        lane = [[0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 2, 0], [0, 4, 0]]
        w_bits = num_warps.bit_length() - 1
        return gl.DistributedLinearLayout(tm_bits[w_bits:], lane, tm_bits[:w_bits], [], [TM, 8, 4])

    @gluon.jit
    def _mma_sp(acc, a, b_lo, b_hi, meta, SELECTOR: gl.constexpr):
        """acc += A B for every (tile, block) of the layout: a (int32 pairs: registers (c % 2, h)
        are a01, a45, a23, a67), b_lo and b_hi (fp16/bf16, two registers each), meta (the first of
        its four registers)."""
        if b_lo.dtype == gl.bfloat16:
            asm: gl.constexpr = ("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 "
                                 "{$0, $1, $2, $3}, {$4, $6, $5, $7}, {$8, $9, $10, $11}, "
                                 "{$12, $13, $14, $15}, $16, " + SELECTOR + ";")
        else:
            asm: gl.constexpr = ("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 "
                                 "{$0, $1, $2, $3}, {$4, $6, $5, $7}, {$8, $9, $10, $11}, "
                                 "{$12, $13, $14, $15}, $16, " + SELECTOR + ";")
        return gl.inline_asm_elementwise(
            asm, "=f,=f,=f,=f,r,r,r,r,r,r,r,r,f,f,f,f,r,r,r,r", [a, b_lo, b_hi, acc, meta],
            dtype=gl.float32, is_pure=True, pack=4)

    @gluon.jit
    def _semi24_sparse_mma_kernel(
        # W: values (M, K/2), read as int32 pairs, and its metadata in the MMA's lanes (mma_metadata)
        val_ptr,
        meta_ptr,
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
        Y_MCONTIG: gl.constexpr,
        num_warps: gl.constexpr,
    ):
        BK: gl.constexpr = 64
        TM: gl.constexpr = BLOCK_M // 16
        NB: gl.constexpr = BLOCK_N // 8
        DT: gl.constexpr = x_ptr.dtype.element_ty
        L: gl.constexpr = _tile_layout(num_warps)
        mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[num_warps, 1],
                                                             instr_shape=[16, 8])
        b_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma_layout, k_width=2)
        XT: gl.constexpr = BLOCK_N // 8
        x_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // XT, XT], [num_warps, 1], [1, 0])
        xs_layout: gl.constexpr = gl.SwizzledSharedLayout(8, 1, 8, [1, 0])

        pid, pid_k, pid_m, pid_n, steps = _program_tile(N, K, BLOCK_N, BK, SPLIT_K)
        n_groups = gl.cdiv(K, 4)

        LQ: gl.constexpr = _lane_layout(TM, num_warps)
        pair_ptrs, meta_ptrs, q, c = _w_pointers(val_ptr, meta_ptr, M, K, stride_vm, pid_m, pid_k, BLOCK_M, L, LQ)
        x_ptrs, n_ok, x_row = _x_pointers(x_ptr, N, stride_xk, pid_n, pid_k, BLOCK_N, x_layout)
        x_smem = gl.allocate_shared_memory(DT, [STAGES, BK, BLOCK_N], xs_layout)
        for s in gl.static_range(STAGES - 1):
            _load_x(x_smem.index(s), x_ptrs, n_ok, gl.minimum(s, steps - 1), SPLIT_K, pid_k, stride_xk, K,
                    x_row, BK, EVEN_K)

        # W's registers are loaded a step ahead: a step's loads are waited for only after the step
        # before it has issued its MMAs (the last step reloads its own: nothing is read past the end).
        a0, a1, am = _load_w(pair_ptrs, meta_ptrs, 0, SPLIT_K, pid_k, q, c, n_groups, BK, EVEN_K)
        acc = gl.zeros((TM, 2, 8, NB, 8), dtype=gl.float32, layout=L)
        for i in range(steps):
            pairs0, pairs1, meta = a0, a1, am
            a0, a1, am = _load_w(pair_ptrs, meta_ptrs, gl.minimum(i + 1, steps - 1), SPLIT_K, pid_k, q, c,
                                 n_groups, BK, EVEN_K)
            meta = _spread(meta, L)

            async_copy.wait_group(STAGES - 2)
            gl.thread_barrier()
            xs = x_smem.index(i % STAGES)
            b0 = _b_operand(xs.slice(0, 32, dim=0).load(b_layout), L, NB)
            b1 = _b_operand(xs.slice(32, 32, dim=0).load(b_layout), L, NB)
            acc = _mma_sp(acc, pairs0, b0[0], b0[1], meta, "0x0")
            acc = _mma_sp(acc, pairs1, b1[0], b1[1], meta, "0x1")
            # Every warp read slot i % STAGES before the barrier of the next step; the slot this
            # load fills was read at step i - 1, before this step's barrier.
            nxt = i + STAGES - 1
            _load_x(x_smem.index(nxt % STAGES), x_ptrs, n_ok, gl.minimum(nxt, steps - 1), SPLIT_K, pid_k,
                    stride_xk, K, x_row, BK, EVEN_K)
        async_copy.wait_group(0)

        _store_tile_24(acc, y_ptr, bias_ptr, partial_ptr, count_ptr + pid, pid_m, pid_n, M, N, stride_ym, stride_yn,
                       BLOCK_M, BLOCK_N, SPLIT_K, HAS_BIAS, Y_MCONTIG, num_warps)

    @gluon.jit
    def _w_pointers(val_ptr, meta_ptr, M, K, stride_vm, pid_m, pid_k, BLOCK_M: gl.constexpr, L: gl.constexpr,
                    LQ: gl.constexpr):
        """This lane's first-step pointers into W (tile layout ``L``, its pair words) and into its
        metadata (lane layout ``LQ``), and the lane's (q, c) indices ``_load_w`` masks with."""
        BK: gl.constexpr = 64  # BLOCK_K (a global the compiler reads must be a constexpr)
        TM: gl.constexpr = BLOCK_M // 16
        tm = gl.arange(0, TM, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, L)))))
        h = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, L)))))
        g = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, gl.SliceLayout(4, L)))))
        c = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, L)))))
        tm = tm[:, None, None, None, None]
        h = h[None, :, None, None, None]
        g = g[None, None, :, None, None]
        c = c[None, None, None, None, :]
        # Rows past M read row M - 1: what they compute is never stored, and no load needs a mask.
        row = gl.minimum(pid_m * BLOCK_M + 16 * tm + 8 * h + g, M - 1)
        q = c // 2
        # A: this lane's pair words of a row, for MMA kk: memory groups 4 q + 2 kk + (c % 2).
        pair_ptrs = (val_ptr.to(gl.pointer_type(gl.int32)) + row.to(gl.int64) * (stride_vm // 2)
                     + pid_k * (BK // 4) + 4 * q + (c % 2))
        # Metadata: one word a lane, tile and step, stored in lane order (mma_metadata), loaded once a
        # lane (layout LQ: no register holds a copy) and spread over L.
        tm_q = gl.arange(0, TM, layout=gl.SliceLayout(1, gl.SliceLayout(2, LQ)))[:, None, None]
        g_q = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, LQ)))[None, :, None]
        q_q = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, LQ)))[None, None, :]
        tile = gl.minimum(pid_m * TM + tm_q, gl.cdiv(M, 16) - 1)
        meta_ptrs = meta_ptr + (tile * gl.cdiv(K, BK) + pid_k).to(gl.int64) * 32 + 4 * g_q + q_q
        return pair_ptrs, meta_ptrs, q, c

    @gluon.jit
    def _x_pointers(x_ptr, N, stride_xk, pid_n, pid_k, BLOCK_N: gl.constexpr, x_layout: gl.constexpr):
        """Pointers to the first step's (BLOCK_K x BLOCK_N) tile of X, its rows in the MMAs' k order
        (logical group l = q + 4 w of MMA kk is memory group 4 q + 2 kk + w, see the module
        docstring; positions within a group are not moved), the columns inside N, and the rows."""
        BK: gl.constexpr = 64  # BLOCK_K (a global the compiler reads must be a constexpr)
        kl = gl.arange(0, BK, layout=gl.SliceLayout(1, x_layout))
        kk_l = kl // 32
        l_l = (kl % 32) // 4
        x_row = 4 * (4 * (l_l % 4) + 2 * kk_l + l_l // 4) + kl % 4
        xn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, x_layout))
        x_ptrs = x_ptr + (pid_k * BK + x_row)[:, None].to(gl.int64) * stride_xk + xn[None, :]
        return x_ptrs, (xn < N)[None, :], x_row

    @gluon.jit
    def _spread(meta, L: gl.constexpr):
        """(TM, 8, 4) values of lanes (g, q) -> (TM, 2, 8, 1, 8) in the tile layout, the same value in
        all four registers of a lane (copies of one register, not loads)."""
        m = gl.join(meta, meta)  # [tm, g, q, c % 2]
        m = gl.join(m, m)  # [tm, g, q, c % 2, h]
        m = gl.reshape(gl.permute(m, (0, 4, 1, 2, 3)), (meta.shape[0], 2, 8, 1, 8))
        return gl.convert_layout(m, L)

    @gluon.jit
    def _b_operand(xb, L: gl.constexpr, NB: gl.constexpr):
        """A (32, BLOCK_N) slice of X in the dense MMA's B layout -> the sparse MMA's two B halves
        in the tile layout: element (h, g, j, c) of half s is X[16 s + 8 h + c, 8 j + g]."""
        x5 = gl.reshape(xb, (2, 2, 8, NB, 8))  # [s, h, c, j, g]
        x5 = gl.permute(x5, (1, 4, 3, 2, 0))  # [h, g, j, c, s]
        lo, hi = gl.split(x5)
        lo = gl.convert_layout(gl.reshape(lo, (1, 2, 8, NB, 8)), L)
        hi = gl.convert_layout(gl.reshape(hi, (1, 2, 8, NB, 8)), L)
        return lo, hi

    @gluon.jit
    def _load_w(pair_ptrs, meta_ptrs, step, SPLIT_K: gl.constexpr, pid_k, q, c, n_groups, BK: gl.constexpr,
                EVEN_K: gl.constexpr):
        """A step's W registers: the pair words of MMAs 0 and 1 and the lane's metadata word."""
        kt = step * SPLIT_K
        meta = gl.load(meta_ptrs + kt * 32)
        if EVEN_K:
            pairs0 = gl.load(pair_ptrs + kt * (BK // 4))
            pairs1 = gl.load(pair_ptrs + kt * (BK // 4) + 2)
        else:
            grp = (pid_k + kt) * (BK // 4) + 4 * q + (c % 2)
            pairs0 = gl.load(pair_ptrs + kt * (BK // 4), mask=grp < n_groups, other=0)
            pairs1 = gl.load(pair_ptrs + kt * (BK // 4) + 2, mask=grp + 2 < n_groups, other=0)
        return pairs0, pairs1, meta


def check_metadata(meta, m: int, k: int, device) -> None:
    """Raise ``ValueError`` unless ``meta`` is an (M x K) matrix's ``Semi24Matrix.mma_metadata()``."""
    shape = (triton.cdiv(m, 16), triton.cdiv(k, BLOCK_K), 32)
    if meta is None:
        raise ValueError("semi24_mm: the sparse-MMA kernel needs the matrix's mma_metadata() (pass mma_metadata=)")
    if tuple(meta.shape) != shape or meta.dtype != torch.int32 or meta.device != device or not meta.is_contiguous():
        raise ValueError(f"semi24_mm: mma_metadata must be a contiguous int32 {shape} tensor on {device} "
                         f"(Semi24Matrix.mma_metadata()), got {meta.dtype} {tuple(meta.shape)} on {meta.device}")


def launch(values, meta, x, out, bias, partial, counts, *, m: int, n: int, k: int, block_m: int, block_n: int,
           split_k: int, num_warps: int, num_stages: int) -> None:
    """Launch the kernel on a 2:4 matrix's values and its ``Semi24Matrix.mma_metadata``;
    ``semi24.semi24_mm`` validates the arguments and allocates."""
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    _semi24_sparse_mma_kernel[(tiles, split_k)](
        values, meta, x, out, values if bias is None else bias, partial, counts,
        m, n, k, values.stride(0), x.stride(0), out.stride(0), out.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, SPLIT_K=split_k, STAGES=num_stages, EVEN_K=k % BLOCK_K == 0,
        HAS_BIAS=bias is not None, Y_MCONTIG=out.stride(0) == 1 and m > 1, num_warps=num_warps,
    )
