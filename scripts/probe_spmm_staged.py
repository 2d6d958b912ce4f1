"""Probe (dropped, BENCHMARKS.md 8l): SpMM on CUDA cores with X's columns staged in shared memory,
``Y = A @ X`` with A in sliced ELL, timed at decode widths against cuBLAS and the library's pick.

The gathering kernels (``kernels/spmm.py``, ``kernels/spmm_sell.py``) fetch a piece of a row of X
from L1/L2 for every nonzero. Here a program first copies a slice of X's columns,
``X[:, n0:n0 + BLOCK_N]`` (K x BLOCK_N, up to ~220 KB), into shared memory (cp.async where N is
contiguous; through registers, transposed, where K is), then walks slices of A (slices ``pid``,
``pid + P``, ...; longest first) against it. Each nonzero reads its 16-byte pieces of X with one
``ld.shared.v4`` and converts them to fp32 in registers: inline PTX, as Gluon 3.6 cannot gather from
shared memory at computed addresses. The copy is the kernel's only buffer, so it starts at byte 0 of
the dynamic shared memory (``global_smem``); the launcher checks that after compiling. A step's
entries load a step ahead, in blocks stored row-major (``step_blocks_row_major``) so that a thread's
entries of a row are one vector; the next slice's entries are asked of L2 meanwhile.

Every config is checked against a float64 reference twice before it is timed (CUDA graphs, L2
flushed); a failure is recorded with its error, not raised. Gluon has no interpreter: sm_90 only.

    python3 scripts/probe_spmm_staged.py      # $OUT/spmm_staged_probe.json, a table last
    PROBE_SHAPES=3072x768 PROBE_NS=128 PROBE_SPARSITIES=0.95 PROBE_CONFIGS=64:8:8:4 python3 scripts/probe_spmm_staged.py
    PROBE_XT=1 ...       # X handed as a transposed view (K contiguous), as SparseLinear hands it

Configs are BLOCK_N:ROWS:PER_THREAD:WARPS[:OCCUPANCY] (slices of ROWS rows; PER_THREAD entries a
thread a step; occupancy: the most programs an SM, 0 = as many as shared memory holds).
"""

from __future__ import annotations

import functools
import itertools
import json
import os

import torch
import triton
from probe_harness import best_checked, checked_time_us, spmm_baseline_row, spmm_problems, write_results
from stuning.kernels.spmm import check_b_and_out, check_bias, fill_bias
from stuning.kernels.target import device_budget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

from stuning.formats.sell import SlicedELLMatrix

PIECE = 8  # elements of X a thread reads at once: 16 bytes


def stage_rows(block_n: int, num_warps: int, x_transposed: bool) -> int:
    """Rows of X one pass of the copy moves: a thread loads 8 x 8 elements where K is contiguous
    (and writes them transposed, 16 bytes at a time), else 1 x 8."""
    return (PIECE if x_transposed else 1) * (32 // (block_n // PIECE)) * num_warps


def stage_bytes(k: int, block_n: int, num_warps: int, x_transposed: bool) -> int:
    """Shared memory of a config: X's K rows, padded to whole passes of the copy, by BLOCK_N."""
    kc = stage_rows(block_n, num_warps, x_transposed)
    return -(-k // kc) * kc * block_n * 2


def step_of(block_n: int, rows: int, num_warps: int, per_thread: int) -> int:
    """A step's entries a row for slices of ``rows`` rows: the warps split the rows, and a warp's
    threads split its rows' entries and X's BLOCK_N columns (8 a thread), ``per_thread`` entries
    each; 0 where that does not tile a warp."""
    groups = block_n // PIECE
    rows_per_warp = rows // num_warps
    if rows % num_warps or not rows_per_warp or rows_per_warp * groups > 32 or 32 % (rows_per_warp * groups):
        return 0
    return per_thread * 32 // (rows_per_warp * groups)


@triton.constexpr_function
def _read_piece_asm(bf16):
    """PTX of ``_read_piece``: one 16-byte read at byte $8 of the kernel's shared memory, its eight
    16-bit halves converted to fp32 in $0..$7."""
    cvt = "cvt.f32.bf16" if bf16 else "cvt.f32.f16"
    halves = "\n".join(f"mov.b32 {{h{2 * i}, h{2 * i + 1}}}, r{i};" for i in range(4))
    converts = "\n".join(f"{cvt} ${i}, h{i};" for i in range(8))
    return f"""{{
        .reg .u32 a;
        .reg .b32 r0, r1, r2, r3;
        .reg .b16 h0, h1, h2, h3, h4, h5, h6, h7;
        mov.u32 a, global_smem;
        add.u32 a, a, $8;
        ld.shared.v4.b32 {{r0, r1, r2, r3}}, [a];
        {halves}
        {converts}
        }}"""


@gluon.jit
def _read_piece(byte, BF16: gl.constexpr):
    """Eight consecutive elements of the staged X at byte ``byte`` of shared memory, as fp32.
    Not pure: the reads must stay after the barrier that ends the copy."""
    return gl.inline_asm_elementwise(_read_piece_asm(BF16), "=f,=f,=f,=f,=f,=f,=f,=f,r", [byte],
                                     dtype=(gl.float32,) * 8, is_pure=False, pack=1)


@gluon.jit
def _prefetch_slice(col_ptr, val_ptr, start, end, num_warps: gl.constexpr):
    """Ask L2 for a slice's entries [start, end), 64 of each array a thread at a time (a 128-byte
    line of 16-bit ones), no register written: nothing waits for it."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    for first in range(start, end, 64 * 32 * num_warps):
        at = first + gl.arange(0, 32 * num_warps, layout=layout) * 64
        ok = (at < end).to(gl.int32)
        _prefetch_lines(col_ptr + at, ok)
        _prefetch_lines(val_ptr + at, ok)


@gluon.jit
def _prefetch_lines(ptrs, ok):
    gl.inline_asm_elementwise("""{
        .reg .pred p;
        setp.ne.s32 p, $2, 0;
        @p prefetch.global.L2 [$1];
        mov.u32 $0, 0;
        }""", "=r,l,r", [ptrs, ok], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _stage_x(staged, x_ptr, n0, N, K, stride_xk, stride_xn, K_PAD: gl.constexpr, KC: gl.constexpr,
             BLOCK_N: gl.constexpr, X_T: gl.constexpr, num_warps: gl.constexpr):
    """Copy X[:, n0:n0 + BLOCK_N] into ``staged`` (K_PAD // KC passes of KC rows, zeros past K and N)
    and meet at a barrier. With N contiguous, all by cp.async, one wait for all of them; with K
    contiguous, through registers (a thread loads 8 x 8 along K and stores them transposed, 16
    bytes at a time), the next pass's loads issued before a pass is stored."""
    GROUPS: gl.constexpr = BLOCK_N // 8
    if X_T:
        layout: gl.constexpr = gl.BlockedLayout([8, 8], [32 // GROUPS, GROUPS], [num_warps, 1], [0, 1])
    else:
        layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // GROUPS, GROUPS], [num_warps, 1], [1, 0])
    k_pass = gl.arange(0, KC, layout=gl.SliceLayout(1, layout))
    n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    n_ok = gl.expand_dims(n < N, 0)
    col = gl.expand_dims(n, 0) * stride_xn
    if X_T:
        tile = gl.load(x_ptr + gl.expand_dims(k_pass, 1) * stride_xk + col,
                       mask=gl.expand_dims(k_pass < K, 1) & n_ok, other=0.0)
        for c in range(1, K_PAD // KC):
            k = c * KC + k_pass
            ahead = gl.load(x_ptr + gl.expand_dims(k, 1) * stride_xk + col, mask=gl.expand_dims(k < K, 1) & n_ok,
                            other=0.0)
            staged.index(c - 1).store(tile)
            tile = ahead
        staged.index(K_PAD // KC - 1).store(tile)
    else:
        for c in range(K_PAD // KC):
            k = c * KC + k_pass
            ptrs = x_ptr + gl.expand_dims(k, 1) * stride_xk + col
            async_copy.async_copy_global_to_shared(staged.index(c), ptrs, mask=gl.expand_dims(k < K, 1) & n_ok)
        async_copy.commit_group()
        async_copy.wait_group(0)
    gl.thread_barrier()


@gluon.jit
def _slice_bounds(slice_ptr, s, capacity, FIXED: gl.constexpr):
    if FIXED:
        start = s.to(gl.int64) * capacity
        return start, start + capacity
    return gl.load(slice_ptr + s).to(gl.int64), gl.load(slice_ptr + s + 1).to(gl.int64)


@gluon.jit
def _spmm_staged_kernel(
    # A in sliced ELL (stuning.formats.sell), slices of SLICE_ROWS rows
    slice_ptr, col_ptr, val_ptr, row_id_ptr, capacity, n_slices,
    # X (K x N, any strides), Y (M x N, any strides), the bias
    x_ptr, y_ptr, bias_ptr, N, K, stride_xk, stride_xn, stride_ym, stride_yn,
    # template parameters
    K_PAD: gl.constexpr, KC: gl.constexpr, SLICE_ROWS: gl.constexpr, STEP: gl.constexpr,
    BLOCK_N: gl.constexpr, X_T: gl.constexpr, FIXED: gl.constexpr, HAS_BIAS: gl.constexpr,
    num_warps: gl.constexpr,
):
    GROUPS: gl.constexpr = BLOCK_N // 8
    gl.static_assert(GROUPS <= 32, "BLOCK_N of at most 256")
    # Warps split the rows; a warp's threads its rows (TR), their entries (TS, SPT each) and X's
    # columns (GROUPS, 8 each), so a row's partial sums meet by shuffles, never through shared memory.
    TR: gl.constexpr = SLICE_ROWS // num_warps
    TS: gl.constexpr = 32 // (TR * GROUPS)
    SPT: gl.constexpr = STEP // TS
    layout: gl.constexpr = gl.BlockedLayout([1, SPT, 1], [TR, TS, GROUPS], [num_warps, 1, 1], [2, 1, 0])
    idx_layout: gl.constexpr = gl.SliceLayout(2, layout)
    out_layout: gl.constexpr = gl.SliceLayout(1, layout)
    staged = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [K_PAD // KC, KC, BLOCK_N],
                                       gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))

    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    n0 = gl.program_id(1) * BLOCK_N

    first_start, first_end = _slice_bounds(slice_ptr, pid, capacity, FIXED)
    _prefetch_slice(col_ptr, val_ptr, first_start, first_end, num_warps)
    _stage_x(staged, x_ptr, n0, N, K, stride_xk, stride_xn, K_PAD, KC, BLOCK_N, X_T, num_warps)

    # A step's block of entries is row-major (step_blocks_row_major): a thread's
    # STEP entries of its row are one vector load.
    slot = gl.arange(0, SLICE_ROWS, layout=gl.SliceLayout(1, idx_layout))
    j = gl.arange(0, STEP, layout=gl.SliceLayout(0, idx_layout))
    within = gl.expand_dims(slot, 1) * STEP + gl.expand_dims(j, 0)
    group = gl.arange(0, GROUPS, layout=gl.SliceLayout(0, out_layout))
    group_byte = gl.expand_dims(gl.expand_dims(group * 16, 0), 1)
    rows_out = gl.arange(0, SLICE_ROWS, layout=gl.SliceLayout(1, out_layout))
    BF16: gl.constexpr = x_ptr.dtype.element_ty == gl.bfloat16
    for s in range(pid, n_slices, programs):
        start, end = _slice_bounds(slice_ptr, s, capacity, FIXED)
        # The next slice's entries to L2 meanwhile (the last program's last slice: its own again).
        next_start, next_end = _slice_bounds(slice_ptr, gl.minimum(s + programs, n_slices - 1), capacity, FIXED)
        _prefetch_slice(col_ptr, val_ptr, next_start, next_end, num_warps)
        a0 = gl.zeros((SLICE_ROWS, STEP, GROUPS), gl.float32, layout)
        a1 = gl.zeros((SLICE_ROWS, STEP, GROUPS), gl.float32, layout)
        a2 = gl.zeros((SLICE_ROWS, STEP, GROUPS), gl.float32, layout)
        a3 = gl.zeros((SLICE_ROWS, STEP, GROUPS), gl.float32, layout)
        a4 = gl.zeros((SLICE_ROWS, STEP, GROUPS), gl.float32, layout)
        a5 = gl.zeros((SLICE_ROWS, STEP, GROUPS), gl.float32, layout)
        a6 = gl.zeros((SLICE_ROWS, STEP, GROUPS), gl.float32, layout)
        a7 = gl.zeros((SLICE_ROWS, STEP, GROUPS), gl.float32, layout)
        # A step's entries load a step ahead, their latency (L2, prefetched) overlapping a step's
        # math; past a slice's last step that reads the next block (the arrays end in a spare
        # one), unmasked.
        # (Every slice and step block starts at a multiple of SLICE_ROWS * STEP: said of the scalar
        # base, so that each row's STEP entries load as one vector.)
        first = gl.multiple_of(start, SLICE_ROWS * STEP)
        cols_next = gl.load(col_ptr + first + within)
        vals_next = gl.load(val_ptr + first + within)
        for e0 in range(start, end, SLICE_ROWS * STEP):
            cols = cols_next.to(gl.int32)
            vals = gl.expand_dims(vals_next.to(gl.float32), 2)
            ahead = gl.multiple_of(e0 + SLICE_ROWS * STEP, SLICE_ROWS * STEP) + within
            cols_next = gl.load(col_ptr + ahead)
            vals_next = gl.load(val_ptr + ahead)
            x0, x1, x2, x3, x4, x5, x6, x7 = _read_piece(gl.expand_dims(cols * (BLOCK_N * 2), 2) + group_byte, BF16)
            a0 += vals * x0
            a1 += vals * x1
            a2 += vals * x2
            a3 += vals * x3
            a4 += vals * x4
            a5 += vals * x5
            a6 += vals * x6
            a7 += vals * x7

        # Partial sums per step slot, one FMA an element in the loop; summed once here.
        y0 = gl.sum(a0, axis=1)
        y1 = gl.sum(a1, axis=1)
        y2 = gl.sum(a2, axis=1)
        y3 = gl.sum(a3, axis=1)
        y4 = gl.sum(a4, axis=1)
        y5 = gl.sum(a5, axis=1)
        y6 = gl.sum(a6, axis=1)
        y7 = gl.sum(a7, axis=1)
        rows = gl.load(row_id_ptr + s * SLICE_ROWS + rows_out)
        row_ok = gl.expand_dims(rows >= 0, 1)
        if HAS_BIAS:
            bias = gl.expand_dims(gl.load(bias_ptr + rows, mask=rows >= 0, other=0.0).to(gl.float32), 1)
            y0 += bias
            y1 += bias
            y2 += bias
            y3 += bias
            y4 += bias
            y5 += bias
            y6 += bias
            y7 += bias
        col0 = gl.expand_dims(n0 + group * 8, 0)
        base = y_ptr + gl.expand_dims(rows.to(gl.int64), 1) * stride_ym + col0 * stride_yn
        dt = y_ptr.dtype.element_ty
        gl.store(base, y0.to(dt), mask=row_ok & (col0 < N))
        gl.store(base + stride_yn, y1.to(dt), mask=row_ok & (col0 + 1 < N))
        gl.store(base + 2 * stride_yn, y2.to(dt), mask=row_ok & (col0 + 2 < N))
        gl.store(base + 3 * stride_yn, y3.to(dt), mask=row_ok & (col0 + 3 < N))
        gl.store(base + 4 * stride_yn, y4.to(dt), mask=row_ok & (col0 + 4 < N))
        gl.store(base + 5 * stride_yn, y5.to(dt), mask=row_ok & (col0 + 5 < N))
        gl.store(base + 6 * stride_yn, y6.to(dt), mask=row_ok & (col0 + 6 < N))
        gl.store(base + 7 * stride_yn, y7.to(dt), mask=row_ok & (col0 + 7 < N))


def programs_per_column_slice(n_slices: int, n_col: int, smem: int, occupancy: int = 0) -> int:
    """Programs that share each slice of X's columns: enough to fill every SM with as many programs
    as its shared memory holds (``occupancy``, when given, caps that), and no more than slices."""
    budget = device_budget()
    per_sm = max(1, budget.shared_mem_per_block // max(smem, 1))
    if occupancy:
        per_sm = min(per_sm, occupancy)
    return max(1, min(n_slices, -(-budget.sm_count * per_sm // n_col)))


def spmm_staged(values: torch.Tensor, cols: torch.Tensor, slice_ptr: torch.Tensor, row_ids: torch.Tensor,
                x: torch.Tensor, *, m: int, rows: int, step: int, block_n: int, num_warps: int, capacity: int = 0,
                occupancy: int = 0, out: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Launch the staged SpMM on a ``SlicedELLMatrix``'s arrays in the order of
    ``step_blocks_row_major`` (slices of ``rows`` rows padded to multiples of ``step``, which must be
    ``step_of(block_n, rows, num_warps, per_thread)`` for some per_thread; ``capacity``: the entries
    of every slice where all hold as many, else 0) and dense ``x``; ``occupancy``: the most programs
    an SM (0: as many as shared memory holds)."""
    if block_n % PIECE or not PIECE <= block_n <= 256 or block_n & (block_n - 1):
        raise ValueError(f"spmm_staged: block_n must be a power of two from 8 to 256, got {block_n}")
    per_step = step_of(block_n, rows, num_warps, 1)
    if not per_step or step % per_step:
        raise ValueError(f"spmm_staged: slices of {rows} rows in steps of {step} do not tile {num_warps} warps "
                         f"with block_n={block_n} (step_of)")
    n_slices = slice_ptr.numel() - 1
    if values.numel() != cols.numel() or values.numel() % (rows * step) or values.numel() < rows * step:
        raise ValueError("spmm_staged: values and cols must hold every slice's entries and one spare block "
                         "(step_blocks_row_major)")
    out = check_b_and_out("spmm_staged", values, x, m, out)
    check_bias("spmm_staged", bias, m, values)
    if values.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"spmm_staged: fp16 or bf16 only, got {values.dtype}")
    k, n = x.shape
    if m == 0 or n == 0:
        return out
    if k == 0 or n_slices == 0:
        return fill_bias(out, bias)
    x_t = x.stride(0) == 1 and x.stride(1) != 1
    kc = stage_rows(block_n, num_warps, x_t)
    smem = stage_bytes(k, block_n, num_warps, x_t)
    if smem > device_budget().shared_mem_per_block:
        raise ValueError(f"spmm_staged: X's {k} x {block_n} slice takes {smem} bytes of shared memory, more "
                         f"than the device's {device_budget().shared_mem_per_block}")
    n_col = triton.cdiv(n, block_n)
    grid = (programs_per_column_slice(n_slices, n_col, smem, occupancy), n_col)
    kernel = _spmm_staged_kernel[grid](
        slice_ptr, cols, values, row_ids, capacity, n_slices,
        x, out, values if bias is None else bias, n, k, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        K_PAD=smem // (block_n * 2), KC=kc, SLICE_ROWS=rows, STEP=step, BLOCK_N=block_n, X_T=x_t,
        FIXED=capacity > 0, HAS_BIAS=bias is not None, num_warps=num_warps,
    )
    if kernel.metadata.shared != smem:
        # Another buffer could sit before the copy, and the reads at global_smem + offset would miss it.
        raise RuntimeError(f"spmm_staged: the kernel uses {kernel.metadata.shared} bytes of shared memory, "
                           f"expected {smem}; its reads of X would be wrong")
    return out


def step_blocks_row_major(a: SlicedELLMatrix) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, cols) of ``a`` with every step's (slice_rows x step) block row-major, entry ``j`` of
    the block's row ``r`` at ``r * step + j``, then one block of zeros (the loads a step ahead run
    one block past a slice unmasked). Blocks tile the arrays: every slice starts at a multiple of
    ``slice_rows * step``."""
    def reorder(t: torch.Tensor) -> torch.Tensor:
        t = t.view(-1, a.step, a.slice_rows).transpose(1, 2).reshape(-1)
        return torch.cat([t, t.new_zeros(a.slice_rows * a.step)])

    return reorder(a.values), reorder(a.cols)


SHAPES = [tuple(int(v) for v in s.split("x")) for s in
          os.environ.get("PROBE_SHAPES", "768x3072,3072x768,4096x4096,11008x4096").split(",")]
NS = [int(v) for v in os.environ.get("PROBE_NS", "16,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95").split(",")]
X_T = os.environ.get("PROBE_XT", "0") == "1"
SECONDS = float(os.environ.get("PROBE_SECONDS", "400"))


def configs(k: int, n: int):
    """``PROBE_CONFIGS``, else every BLOCK_N (8 to 64, no wider than N needs) x slice rows (4 to 16)
    x entries a thread (4, 8) x warps (2, 4) whose copy of X fits in shared memory and that
    tiles the warps: (block_n, rows, per_thread, warps, occupancy)."""
    wanted = os.environ.get("PROBE_CONFIGS")
    if wanted:
        for text in wanted.split(","):
            bn, rows, per_thread, warps, *occ = (int(v) for v in text.split(":"))
            yield bn, rows, per_thread, warps, occ[0] if occ else 0
        return
    for bn, rows, per_thread, warps in itertools.product((8, 16, 32, 64), (4, 8, 16), (4, 8), (2, 4)):
        if bn > max(8, n) or stage_bytes(k, bn, warps, X_T) > device_budget().shared_mem_per_block:
            continue
        step = step_of(bn, rows, warps, per_thread)
        if step and step <= 64:
            yield bn, rows, per_thread, warps, 0


def main() -> int:
    rows = []
    for m, k in SHAPES:
        for p in spmm_problems(m, k, NS, SPARSITIES, "cuda", seconds=SECONDS):
            if X_T:
                p.x = p.x.t().contiguous().t()
            row = {"m": m, "k": k, "x_t": X_T, **spmm_baseline_row(p, False), "staged": {}}
            for bn, s, per_thread, warps, occ in configs(k, p.n):
                step = step_of(bn, s, warps, per_thread)
                sell = SlicedELLMatrix.from_csr(p.a, s, True, step)
                values, cols = step_blocks_row_major(sell)
                run = functools.partial(spmm_staged, values, cols, sell.slice_ptr, sell.row_ids,
                                        p.x, m=m, rows=s, step=step, block_n=bn, num_warps=warps,
                                        capacity=sell.capacity, occupancy=occ)
                label = f"{bn}:{s}:{per_thread}:{warps}:{occ}"
                row["staged"][label] = checked_time_us(run, p.ref, f"{m}x{k} n={p.n} {p.sparsity} {label}", checks=2)
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_results(rows, "spmm_staged_probe.json")
    print(f"{'shape':>10} {'N':>4} {'zeros':>5} {'cuBLAS':>7} {'pick':>7} {'staged':>7} {'config':>12} "
          f"{'vs cuBLAS':>9} {'pick vs':>7} failed")
    for r in rows:
        best, bt, failures = best_checked(r["staged"])
        print(f"{r['m']}x{r['k']:<5} {r['n']:>4} {r['sparsity']:>5} {r['cublas_us']:>7.2f} {r['pick_us']:>7.2f} "
              f"{bt:>7.2f} {best:>12} {r['cublas_us'] / bt:>8.2f}x {r['cublas_us'] / r['pick_us']:>6.2f}x "
              f"{len(failures)}")
        for failure in failures[:3]:
            print("   ", failure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
