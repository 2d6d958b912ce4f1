"""SpMM on A in sliced ELL (SELL-C-sigma): ``Y = A @ B`` on CUDA cores, one program per slice.

A slice is ``SLICE_ROWS`` rows padded to one length (a multiple of ``STEP``), stored column-major,
so each step of the loop loads a contiguous (SLICE_ROWS x STEP) block of values and column indices
with no mask along the nonzero axis (B's and Y's N tail is masked only when N does not fill the
tiles): the per-row length masks and the row-length imbalance of the CSR kernel become padding,
which sorting the rows by length makes small. Indices are int16 when K allows (upcast
here). B's rows are gathered as a (SLICE_ROWS, STEP, BLOCK_N) tile and reduced in fp32; each row
is stored to its place in Y through the slice's row ids (the sort's permutation; -1 marks padding
slots). Where the format cut long rows into pieces (``CUT``), the slots naming one row are summed
before that row is stored, once, by its first slot.

The format (``stuning.formats.sell.SlicedELLMatrix``) arrives as plain tensors, with its capacity
where every slice holds as many entries (the kernel then computes each slice's start, ``FIXED``). The config is the
CSR kernel's ``SpMMConfig`` with ``kernel="sell"``: ``rows`` is the slice height, ``nnz_step`` the
step, ``swizzle`` whether the slices were cut from rows sorted by length.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from stuning.kernels.spmm import (
    SpMMConfig,
    SpMMProblem,
    add_row_bias,
    b_row_index,
    check_b_and_out,
    check_bias,
    fill_bias,
    offsets_fit_32_bits,
    tile_configs,
)
from stuning.kernels.target import DeviceBudget


# N stays specialized (unlike the CSR kernel's): when it does not fill the last tile, the mask along
# B's and Y's contiguous axis needs N's divisibility to keep vector loads (compiled for sm_90: with N
# a multiple of 16, 8-byte B loads; unspecialized, scalar 2-byte ones). A launch compiles again only
# when N moves to another divisibility class (multiple of 16 or not) or stops filling its tiles.
# The capacity is not: it differs from weight to weight, and the kernel states what it knows of it.
@triton.jit(do_not_specialize=["capacity"])
def _spmm_sell_kernel(
    # A in sliced ELL
    slice_ptr,
    col_ptr,
    val_ptr,
    row_id_ptr,
    capacity,
    # B (K x N) and Y (M x N), dense
    b_ptr,
    y_ptr,
    bias_ptr,
    N,
    stride_bk,
    stride_bn,
    stride_ym,
    stride_yn,
    # template parameters
    SLICE_ROWS: tl.constexpr,
    STEP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    VEC: tl.constexpr,
    EVEN_N: tl.constexpr,
    OFFSETS_32: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    FIXED: tl.constexpr,
    CUT: tl.constexpr,
):
    pid_s = tl.program_id(0)
    pid_n = tl.program_id(1)

    # Every slice holds SLICE_ROWS x (a multiple of STEP) entries: its offset is a multiple of both.
    if FIXED:
        # All slices hold `capacity` entries: the first loads of A wait for no load of slice_ptr.
        # (In 64 bits, as the loaded offsets are: a 32-bit loop counter cost the 1-row loop 28 more
        # instructions in sm_90a SASS, widening each step's index.)
        entries = capacity.to(tl.int64)
        start = tl.multiple_of(pid_s.to(tl.int64) * entries, SLICE_ROWS * STEP)
        length = entries // SLICE_ROWS
    else:
        start = tl.multiple_of(tl.load(slice_ptr + pid_s).to(tl.int64), SLICE_ROWS * STEP)
        end = tl.load(slice_ptr + pid_s + 1).to(tl.int64)
        length = (end - start) // SLICE_ROWS
    slot = tl.arange(0, SLICE_ROWS)
    rows = tl.load(row_id_ptr + pid_s * SLICE_ROWS + slot).to(tl.int64)

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, VEC), VEC)
    n_ok = offs_n < N

    # Partial sums per (row, step slot): the reduction over the step axis crosses threads
    # (shuffles and shared memory), so it runs once after the loop, not every step.
    acc = tl.zeros((SLICE_ROWS, STEP, BLOCK_N), dtype=tl.float32)
    for step in range(0, length, STEP):
        # Column-major slice: entry j of slot r at start + j * SLICE_ROWS + r, a contiguous block.
        # Indexed (rows, step, 1), in the gather's shape: the indices then reach the gather's layout
        # as 32-bit words through shared memory, with no int16 pairs to unpack (8 PRMTs a step
        # fewer on 32x4x32 in sm_90a SASS; 12% faster at N = 128 on the H200, BENCHMARKS.md 7o).
        idx = start + (step + tl.arange(0, STEP))[None, :, None] * SLICE_ROWS + slot[:, None, None]
        cols = b_row_index(tl.load(col_ptr + idx), OFFSETS_32)
        # Upcast right after loading: fp32 accumulation, and the interpreter's bf16 math is wrong.
        vals = tl.load(val_ptr + idx).to(tl.float32)
        b_ptrs = b_ptr + (cols * stride_bk + offs_n[None, None, :] * stride_bn)
        if EVEN_N:
            b = tl.load(b_ptrs)
        else:
            b = tl.load(b_ptrs, mask=n_ok[None, None, :], other=0.0)
        acc += vals * b.to(tl.float32)

    y = tl.sum(acc, axis=1)
    store = rows >= 0
    if CUT:
        # A long row's pieces sit in consecutive slots: every slot takes the sum of its row's slots
        # (a segmented sum, as an S x S mask over the partial rows) and only the first one stores.
        same = rows[:, None] == rows[None, :]
        y = tl.sum(tl.where(same[:, :, None], y[None, :, :], 0.0), axis=1)
        prev = tl.load(row_id_ptr + pid_s * SLICE_ROWS + slot - 1, mask=slot > 0, other=-1).to(tl.int64)
        store = store & (rows != prev)
    y = add_row_bias(y, bias_ptr, rows, rows >= 0, HAS_BIAS)
    y_ptrs = y_ptr + rows[:, None] * stride_ym + offs_n[None, :] * stride_yn
    if EVEN_N:
        mask = store[:, None]
    else:
        mask = store[:, None] & n_ok[None, :]
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


def spmm_sell(
    values: torch.Tensor,
    cols: torch.Tensor,
    slice_ptr: torch.Tensor,
    row_ids: torch.Tensor,
    b: torch.Tensor,
    *,
    m: int,
    slice_rows: int,
    step: int,
    config: SpMMConfig,
    capacity: int = 0,
    cut: bool = False,
    out: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Launch the sliced-ELL SpMM on a ``SlicedELLMatrix``'s arrays (slices of ``slice_rows`` rows,
    padded to multiples of ``step``; ``capacity``: the entries of every slice where all hold the
    same, else 0; ``cut``: whether rows were cut into pieces, consecutive slots of a slice naming one
    row) and dense ``b``; ``out`` and ``bias`` as for the CSR kernel."""
    if config.kernel != "sell":
        raise ValueError(f"spmm_sell: config.kernel is {config.kernel!r}, not 'sell'")
    if config.rows != slice_rows or step % config.nnz_step:
        raise ValueError(
            f"spmm_sell: the config (rows={config.rows}, nnz_step={config.nnz_step}) does not match the "
            f"format (slices of {slice_rows} rows padded to multiples of {step})"
        )
    if cols.dtype not in (torch.int16, torch.int32):
        raise TypeError(f"spmm_sell: column indices must be int16 or int32, got {cols.dtype}")
    n_slices = slice_ptr.numel() - 1
    if row_ids.numel() != n_slices * slice_rows or n_slices * slice_rows < m:
        raise ValueError(f"spmm_sell: {row_ids.numel()} row ids for {n_slices} slices of {slice_rows} rows, M = {m}")
    if capacity and (capacity % (slice_rows * step) or capacity * n_slices != values.numel()):
        raise ValueError(f"spmm_sell: a capacity of {capacity} entries a slice does not fit {n_slices} slices of "
                         f"{slice_rows} rows padded to multiples of {step} holding {values.numel()} entries")
    out = check_b_and_out("spmm_sell", values, b, m, out)
    check_bias("spmm_sell", bias, m, values)
    n = b.shape[1]
    if m == 0 or n == 0:
        return out
    if b.shape[0] == 0 or values.numel() == 0:
        return fill_bias(out, bias)
    grid = (n_slices, triton.cdiv(n, config.block_n))
    _spmm_sell_kernel[grid](
        slice_ptr,
        cols,
        values,
        row_ids,
        capacity,
        b,
        out,
        values if bias is None else bias,
        n,
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        SLICE_ROWS=slice_rows,
        STEP=config.nnz_step,
        BLOCK_N=config.block_n,
        VEC=config.vec,
        EVEN_N=n % config.block_n == 0,
        OFFSETS_32=offsets_fit_32_bits(b),
        HAS_BIAS=bias is not None,
        FIXED=capacity > 0,
        CUT=cut,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return out


# ------------------------------------------------------------------------------ config space
# Slice heights: one row is the CSR kernel's rows=1 without its masks, and the CSR kernel covers it.
# (Slices of one row and one capacity, an ELL kernel loading no row pointer, won none of 20 seeded
# tunes at N = 16 and 128 on the H200, BENCHMARKS.md 8f, and were dropped again.)
_SLICE_ROWS = (2, 4, 8, 16, 32)


def config_space(problem: SpMMProblem, budget: DeviceBudget | None = None) -> list[SpMMConfig]:
    """Every sliced-ELL config worth compiling for the problem on the device: the CSR kernel's tile
    filters (registers, steps against the mean row length) over slices of 2 to 32 rows."""
    return tile_configs(problem, budget, _SLICE_ROWS, "sell")
