"""Two or four K splits of a tile as one cluster of CTAs: their partial sums meet in shared memory.

Split-K's other hand-offs go through L2 (``split_k.store_split``: the first split stores its fp32
slice, the last one waits on a counter, reads it back and writes Y). That costs a round trip to L2
and a wait on a flag in global memory; on the H200 at N = 128 a dense analog of the scatter kernel's
step ran 9.5 us alone, 12.3 us with it and 10.2 us with this instead (4096 x 4096 on two splits,
BENCHMARKS.md 8t, 8u).

Launched with ``num_ctas`` = CTAS (Hopper's thread-block clusters), the splits of a tile run at once
on SMs of one GPC, and each can write into the others' shared memory. Each sums a part of the rows:
rank r keeps rows r BM / CTAS .. and sends every other part to its rank with ``st.async``, whose
bytes complete an mbarrier there; then each adds what it received and writes its part of Y. No
fence to global memory and no flag: the only cluster-wide barrier shows the mbarriers initialised.

What it takes of the kernel: every layout replicated over the cluster (``replicated``: each CTA
holds the whole tile, as with one CTA), ``cluster_rank`` for the split, and X's stages as the
landing place (free once the K loop is done; ``landing_fits`` says whether they hold CTAS - 1 parts
and an mbarrier). A part is whole warps' rows (BM / CTAS >= 16). The PTX names shared memory by
offset from ``global_smem``, so the kernel passes X's offset. Y goes out through ``store_rows``:
Triton would store a replicated tensor from rank 0 alone.
"""

from __future__ import annotations

import dataclasses
import functools

import triton

try:  # Gluon's Hopper API as of Triton 3.6; older Tritons have no Gluon
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier
except ImportError:  # pragma: no cover - depends on the installed Triton
    gluon = None


@triton.constexpr_function
def replicated(rank, ctas):
    """The CGA bases of a rank-``rank`` layout whose tensor each of ``ctas`` CTAs (1, 2, 4 or 8)
    holds whole. Built here, not in the kernel: a list literal there becomes a Triton tuple, which
    Gluon 3.6 cannot compare with the lists its derived layouts carry. (No helper: a constexpr
    function may call no plain function.)"""
    ctas = int(ctas)
    if ctas not in (1, 2, 4, 8):
        raise ValueError(f"a cluster of {ctas} CTAs: 1, 2, 4 or 8")
    return [[0] * rank for _ in range(ctas.bit_length() - 1)]


@functools.lru_cache(maxsize=64)  # a launch's host time counts: Gluon builds layouts slowly
def replicated_layout(layout, ctas: int = 2):
    """A (rank-2) shared layout of a TMA descriptor, replicated over a cluster of ``ctas`` CTAs."""
    return dataclasses.replace(layout, cga_layout=replicated(2, ctas))


def landing_fits(block_m: int, block_n: int, x_bytes: int, ctas: int) -> bool:
    """Whether X's stages (``x_bytes``) take the other ranks' parts of a fp32 tile and an mbarrier,
    and a part is whole warps' rows."""
    part = block_m // ctas
    return part >= 16 and part % 16 == 0 and (ctas - 1) * part * block_n * 4 + 8 <= x_bytes


if gluon is not None:

    @gluon.jit
    def _every_thread(asm: gl.constexpr, num_warps: gl.constexpr, CTAS: gl.constexpr):
        """``asm`` (statements of no operands) on every thread; its value, %cluster_ctarank."""
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0], cga_layout=replicated(1, CTAS).value)
        return gl.inline_asm_elementwise("{\n" + asm + "\nmov.u32 $0, %cluster_ctarank;\n}", "=r,r",
                                         [gl.full([32 * num_warps], 0, gl.int32, layout)], dtype=gl.int32,
                                         is_pure=False, pack=1)

    @gluon.jit
    def cluster_rank(num_warps: gl.constexpr, CTAS: gl.constexpr):
        """This CTA's rank in its cluster of CTAS: with ``num_ctas`` = CTAS, ``program_id(0)`` is the
        cluster's id."""
        return gl.max(_every_thread("", num_warps, CTAS), axis=0)

    @gluon.jit
    def _word_offsets(acc_layout: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, PART: gl.constexpr,
                      num_warps: gl.constexpr):
        """Where a thread's elements of one part (PART rows) go, in bytes: four consecutive registers
        side by side (a wgmma accumulator's lane l of warp w holds rows 16 w + l // 4 (+8), columns
        2 (l % 4) (+1) + 8 j, in that register order), then the thread within the part, so one
        16-byte store of a warp covers 512 consecutive bytes. Every rank holds the same layout."""
        rows = gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))[:, None]
        cols = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))[None, :]
        gl.static_assert(num_warps * 16 == BM, "a warp's 16 rows of the accumulator, as one warpgroup per 64")
        gl.static_assert(PART % 16 == 0, "a part is whole warps' rows")
        reg = ((cols // 8) * 2 + (rows // 8) % 2) * 2 + cols % 2
        thread = ((rows % PART) // 16) * 32 + (rows % 8) * 4 + (cols % 8) // 2
        return ((reg // 4) * (8 * PART) + thread * 4 + reg % 4) * 4

    @gluon.jit
    def landing_barrier(x_smem, X_BYTES: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, CTAS: gl.constexpr):
        """The exchange's mbarrier in X's stages (X_BYTES of them), right after the CTAS - 1 parts it
        takes in; X_BYTES + the offset of ``x_smem`` name it to ``exchange_parts``."""
        PARTS_BYTES: gl.constexpr = (CTAS - 1) * (BM // CTAS) * BN * 4
        gl.static_assert(PARTS_BYTES + 8 <= X_BYTES, "X's stages hold the other ranks' parts and an mbarrier")
        bar_layout: gl.constexpr = mbarrier.MBarrierLayout(cga_layout=replicated(1, CTAS).value)
        return x_smem._reinterpret(gl.int64, [X_BYTES // 8, 1], bar_layout).index(PARTS_BYTES // 8)

    @gluon.jit
    def exchange_ready(bar, num_warps: gl.constexpr, CTAS: gl.constexpr):
        """Initialise the exchange's mbarrier and tell the other ranks (cluster arrive; the matching
        wait is ``exchange_parts``')."""
        mbarrier.init(bar, count=1)
        _every_thread("fence.mbarrier_init.release.cluster;\nbarrier.cluster.arrive.relaxed.aligned;", num_warps,
                      CTAS)

    @gluon.jit
    def exchange_parts(acc, bar, rank, DATA_BYTE: gl.constexpr, BAR_BYTE: gl.constexpr, BM: gl.constexpr,
                       BN: gl.constexpr, num_warps: gl.constexpr, CTAS: gl.constexpr):
        """Sum the cluster's fp32 tiles ``acc`` (BM x BN, a wgmma accumulator): returns the sum, whose
        rows ``rank`` BM / CTAS .. are this rank's to write, and the mask of those rows. The other
        ranks' parts land from byte DATA_BYTE of the kernel's shared memory ((CTAS - 1) BM / CTAS x BN
        x 4 bytes, the part from rank s at slot (s - rank - 1) mod CTAS), their bytes counted by
        ``bar`` (at BAR_BYTE), which ``exchange_ready`` initialised. Every rank's MMAs must be done
        with that memory before the other ranks arrived there."""
        PART: gl.constexpr = BM // CTAS
        PART_BYTES: gl.constexpr = PART * BN * 4
        acc_layout: gl.constexpr = acc.type.layout
        _every_thread("barrier.cluster.wait.aligned;", num_warps, CTAS)
        mbarrier.expect(bar, (CTAS - 1) * PART_BYTES)
        rows = gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))[:, None]
        owner = (rows // PART) + gl.zeros([BM, BN], gl.int32, acc_layout)
        mine = owner == rank
        word = _word_offsets(acc_layout, BM, BN, PART, num_warps)
        # At the owner, this rank's part goes to slot (rank - owner - 1) mod CTAS.
        byte = word + DATA_BYTE + ((rank - owner + CTAS - 1) % CTAS) * PART_BYTES
        keep = mine.to(gl.int32)
        bar_byte = gl.full([BM, BN], BAR_BYTE, gl.int32, acc_layout)
        # st.async at the owner's address; its bytes complete the owner's mbarrier. A thread's four
        # registers sent at once share a row, so one owner.
        gl.inline_asm_elementwise("""{
            .reg .u32 a, b;
            .reg .pred p;
            setp.eq.u32 p, $16, 0;
            mov.u32 a, global_smem;
            add.u32 b, a, $12;
            add.u32 a, a, $8;
            mapa.shared::cluster.u32 a, a, $20;
            mapa.shared::cluster.u32 b, b, $20;
            @p st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [a], {$4, $5, $6, $7}, [b];
            mov.u32 $0, 0; mov.u32 $1, 0; mov.u32 $2, 0; mov.u32 $3, 0;
            }""", "=r,=r,=r,=r,f,f,f,f,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r", [acc, byte, bar_byte, keep, owner],
                                  dtype=gl.int32, is_pure=False, pack=4)
        mbarrier.wait(bar, 0)
        for slot in gl.static_range(CTAS - 1):
            other = gl.inline_asm_elementwise("""{
                .reg .u32 a;
                .reg .pred p;
                setp.ne.u32 p, $8, 0;
                mov.u32 a, global_smem;
                add.u32 a, a, $4;
                mov.f32 $0, 0f00000000; mov.f32 $1, 0f00000000; mov.f32 $2, 0f00000000; mov.f32 $3, 0f00000000;
                @p ld.shared.v4.f32 {$0, $1, $2, $3}, [a];
                }""", "=f,=f,=f,=f,r,r,r,r,r,r,r,r", [word + (DATA_BYTE + slot * PART_BYTES), keep],
                                              dtype=gl.float32, is_pure=False, pack=4)
            acc = acc + other
        return acc, mine

    @gluon.jit
    def store_rows(ptrs, values, mask, PAIRS: gl.constexpr):
        """Store 16-bit ``values`` at ``ptrs`` where ``mask``, from any rank: Triton leaves the
        stores of a tensor in a replicated layout to rank 0 alone (it takes the copies for equal).
        PAIRS: a thread's consecutive elements (a wgmma accumulator's columns 2 j, 2 j + 1) are
        adjacent in memory, 4-byte aligned, and stored as one 32-bit word."""
        bits = values.to(gl.int16, bitcast=True)
        if PAIRS:
            gl.inline_asm_elementwise("""{
                .reg .pred p;
                setp.ne.s32 p, $5, 0;
                @p st.global.b32 [$2], $4;
                mov.u32 $0, 0;
                mov.u32 $1, 0;
                }""", "=r,=r,l,l,r,r,r", [ptrs, bits, mask.to(gl.int32)], dtype=gl.int32, is_pure=False, pack=2)
        else:
            gl.inline_asm_elementwise("""{
                .reg .pred p;
                setp.ne.s32 p, $3, 0;
                @p st.global.b16 [$1], $2;
                mov.u32 $0, 0;
                }""", "=r,l,h,r", [ptrs, bits, mask.to(gl.int32)], dtype=gl.int32, is_pure=False, pack=1)
