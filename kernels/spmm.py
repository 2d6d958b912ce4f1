"""SpMM: ``Y = A @ B`` with A sparse in CSR (M x K) and B dense (K x N), on CUDA cores.

Sputnik-style: each program owns ``ROWS`` rows of A (subwarp tiling) and ``BLOCK_N`` columns of Y.
It walks its rows' nonzeros ``NNZ_STEP`` at a time as a (ROWS, NNZ_STEP) tile of values and column
indices, gathers the matching rows of B as a (ROWS, NNZ_STEP, BLOCK_N) tile and reduces over the
nonzeros in fp32. Rows may be visited in a swizzled order (longest first) so that the rows sharing a
program have similar lengths and the longest start first.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace

import torch
import triton
import triton.language as tl
from stuning.kernels.target import DeviceBudget, check_device, device_budget

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
KERNELS = ("csr", "sell", "scatter")


@triton.jit(do_not_specialize=["M", "N"])
def _spmm_kernel(
    # A in CSR, plus the order in which rows are visited
    crow_ptr,
    col_ptr,
    val_ptr,
    row_order_ptr,
    # B (K x N) and Y (M x N), dense (any strides), and the bias Y's rows get (HAS_BIAS)
    b_ptr,
    y_ptr,
    bias_ptr,
    M,
    N,
    stride_bk,
    stride_bn,
    stride_b_block,  # from one BLOCK_N-wide column block of B to the next (BLOCK_N * stride_bn unless reblocked)
    stride_ym,
    stride_yn,
    # template parameters
    ROWS: tl.constexpr,
    NNZ_STEP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    VEC: tl.constexpr,
    ROW_ALIGN: tl.constexpr,
    EVEN_N: tl.constexpr,
    SWIZZLE: tl.constexpr,
    PREFETCH: tl.constexpr,
    OFFSETS_32: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)

    slots = pid_m * ROWS + tl.arange(0, ROWS)
    slot_ok = slots < M
    if SWIZZLE:
        rows = tl.load(row_order_ptr + slots, mask=slot_ok, other=0).to(tl.int64)
    else:
        rows = slots.to(tl.int64)
    start = tl.load(crow_ptr + rows, mask=slot_ok, other=0).to(tl.int64)
    end = tl.load(crow_ptr + rows + 1, mask=slot_ok, other=0).to(tl.int64)
    if ROW_ALIGN > 1:
        # Padded rows start on a multiple of ROW_ALIGN: lets values and indices load as vectors.
        start = tl.multiple_of(start, ROW_ALIGN)
    # 64 bits, though a row's length fits 32: in 32 bits the loop had 9-14% fewer instructions in
    # sm_90a SASS but ran 3-10% slower on the H200 (CSR picks at N = 16 and 128; BENCHMARKS.md 7o).
    length = end - start
    max_len = tl.max(length, axis=0)

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, VEC), VEC)
    n_ok = offs_n < N
    # B's columns of this program, addressed within its column block: B may be stored block by
    # block ([N / BLOCK_N, K, BLOCK_N]) so that one block's K rows are contiguous.
    b_block = b_ptr + pid_n.to(tl.int64) * stride_b_block
    offs_bn = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_N), VEC), VEC)

    # Partial sums per (row, step slot): the reduction over the step axis crosses threads
    # (shuffles and shared memory; half the loop's instructions in sm_90a SASS when it ran every
    # step), so it runs once after the loop.
    acc = tl.zeros((ROWS, NNZ_STEP, BLOCK_N), dtype=tl.float32)
    if PREFETCH:
        # A step's gather needs its column indices, which come from memory too: loading the next
        # step's indices and values before waiting on this step's gather leaves one memory latency
        # per step instead of two (num_stages cannot: the gather's addresses are loaded values).
        cols, vals, k_ok = _load_step(col_ptr, val_ptr, start, length, 0, NNZ_STEP, OFFSETS_32)
        for step in range(0, max_len, NNZ_STEP):
            b = _gather_b(b_block, cols, k_ok, offs_bn, n_ok, stride_bk, stride_bn, EVEN_N)
            cols, vals_next, k_ok = _load_step(col_ptr, val_ptr, start, length, step + NNZ_STEP, NNZ_STEP,
                                                OFFSETS_32)
            acc += vals[:, :, None] * b.to(tl.float32)
            vals = vals_next
    else:
        for step in range(0, max_len, NNZ_STEP):
            cols, vals, k_ok = _load_step(col_ptr, val_ptr, start, length, step, NNZ_STEP, OFFSETS_32)
            b = _gather_b(b_block, cols, k_ok, offs_bn, n_ok, stride_bk, stride_bn, EVEN_N)
            acc += vals[:, :, None] * b.to(tl.float32)

    y = add_row_bias(tl.sum(acc, axis=1), bias_ptr, rows, slot_ok, HAS_BIAS)
    y_ptrs = y_ptr + rows[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=slot_ok[:, None] & n_ok[None, :])


@triton.jit
def add_row_bias(y, bias_ptr, rows, row_ok, HAS_BIAS: tl.constexpr):
    """The (ROWS, BLOCK_N) fp32 tile ``y`` plus its rows' bias: a layer's bias add is then no pass of its own."""
    if HAS_BIAS:
        y += tl.load(bias_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)[:, None]
    return y


@triton.jit
def _load_step(col_ptr, val_ptr, start, length, step, NNZ_STEP: tl.constexpr, OFFSETS_32: tl.constexpr):
    """Column indices and values (upcast to fp32) of the rows' nonzeros ``step .. step + NNZ_STEP``."""
    offs_k = step + tl.arange(0, NNZ_STEP)
    k_ok = offs_k[None, :] < length[:, None]
    idx = start[:, None] + offs_k[None, :]
    cols = b_row_index(tl.load(col_ptr + idx, mask=k_ok, other=0), OFFSETS_32)
    # Upcast right after loading: fp32 accumulation, and the interpreter's bf16 math is wrong.
    vals = tl.load(val_ptr + idx, mask=k_ok, other=0.0).to(tl.float32)
    return cols, vals, k_ok


@triton.jit
def b_row_index(cols, OFFSETS_32: tl.constexpr):
    """Column indices of A as B's row numbers, in the width B's offsets need.

    Where every element offset of B fits 32 bits (``offsets_fit_32_bits``), a gathered row's
    address costs one 32-bit multiply and one widening add in sm_90a SASS; in 64 bits it was a
    sign extension, three multiplies, an add and a two-instruction LEA, about half the gather
    loop's instructions besides its multiply-adds.
    """
    # One return: Triton 3.6 rejects branches that return different types, constexpr or not.
    if OFFSETS_32:
        rows_of_b = cols.to(tl.int32)
    else:
        rows_of_b = cols.to(tl.int64)
    return rows_of_b


@triton.jit
def _gather_b(b_block, cols, k_ok, offs_bn, n_ok, stride_bk, stride_bn, EVEN_N: tl.constexpr):
    """The rows of B the nonzeros select, as a (ROWS, NNZ_STEP, BLOCK_N) tile of one column block."""
    # The offset is summed before it meets the pointer: one widening add per gathered piece.
    b_ptrs = b_block + (cols[:, :, None] * stride_bk + offs_bn[None, None, :] * stride_bn)
    if EVEN_N:
        return tl.load(b_ptrs, mask=k_ok[:, :, None], other=0.0)
    return tl.load(b_ptrs, mask=k_ok[:, :, None] & n_ok[None, None, :], other=0.0)


@dataclass(frozen=True)
class SpMMConfig:
    rows: int = 4  # rows of A per program (Sputnik's subwarp tiling)
    nnz_step: int = 16  # nonzeros of each row consumed per loop step
    block_n: int = 64  # columns of B/Y per program
    vec: int = 1  # vector width of the loads of B rows (contiguity hint)
    swizzle: bool = False  # visit rows longest first instead of in order
    num_warps: int = 4
    num_stages: int = 2
    # Which kernel runs it: "csr" (this file), "sell" (spmm_sell.py: A in sliced ELL, ``rows`` the
    # slice height, ``nnz_step`` the unit slices are padded to, ``swizzle`` slices of sorted rows) or
    # "scatter" (spmm_scatter.py, sm_90: A's (rows x nnz_step) tiles rebuilt in shared memory and
    # multiplied on the tensor cores, ``block_n`` X's tile, ``num_stages`` X's stages in flight).
    # Last, with a default, so configs stored before it existed still load (as CSR configs).
    kernel: str = "csr"
    # Load the next step's indices and values before waiting on this step's gather (CSR kernel).
    prefetch: bool = False
    # Programs that split K and add their sums (scatter kernel).
    split_k: int = 1

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"SpMMConfig: unknown kernel {self.kernel!r}; use one of {KERNELS}")
        if self.prefetch and self.kernel != "csr":
            raise ValueError(f"SpMMConfig: prefetch is a CSR-kernel option; kernel {self.kernel!r} has none")
        if self.split_k != 1 and self.kernel != "scatter":
            raise ValueError(f"SpMMConfig: split_k is a scatter-kernel option; kernel {self.kernel!r} has none")

    def as_dict(self) -> dict:
        return asdict(self)

    def feature_items(self) -> dict:
        """The parameters the cost model's fitted effects are named by. A scatter config's rows and
        steps mean other things than a gather config's, so its names are its own ('scatter.rows');
        a gather config's are its fields as before split_k existed (stored fits stay valid)."""
        d = self.as_dict()
        if self.kernel != "scatter":
            del d["split_k"]
            return d
        kept = ("rows", "nnz_step", "block_n", "num_stages", "split_k")
        return {"kernel": "scatter", **{f"scatter.{k}": d[k] for k in kept}}


@dataclass(frozen=True)
class SpMMProblem:
    m: int
    k: int
    n: int
    nnz: int
    dtype: torch.dtype
    pad_to: int = 1  # row padding of A, which bounds the alignment the kernel may assume


def spmm(
    crow: torch.Tensor,
    col: torch.Tensor,
    values: torch.Tensor,
    b: torch.Tensor,
    *,
    m: int,
    config: SpMMConfig,
    row_order: torch.Tensor | None = None,
    pad_to: int = 1,
    out: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Launch the SpMM kernel on CSR arrays (already validated as a CSR matrix) and dense ``b``:
    ``out = A @ b (+ bias[:, None])``, ``out`` of any strides (a transposed view writes Y^T)."""
    if config.kernel != "csr":
        raise ValueError(f"spmm: config.kernel is {config.kernel!r}; this launcher runs 'csr' configs")
    if crow.numel() != m + 1:
        raise ValueError(f"spmm: crow has {crow.numel()} entries for M = {m}")
    out = check_b_and_out("spmm", values, b, m, out)
    check_bias("spmm", bias, m, values)
    n = b.shape[1]
    if m == 0 or n == 0:
        return out
    if b.shape[0] == 0 or col.numel() == 0:
        return fill_bias(out, bias)
    if config.swizzle and row_order is None:
        raise ValueError("spmm: config.swizzle needs row_order")
    grid = (triton.cdiv(m, config.rows), triton.cdiv(n, config.block_n))
    _spmm_kernel[grid](
        crow,
        col,
        values,
        row_order if config.swizzle else crow,
        b,
        out,
        values if bias is None else bias,
        m,
        n,
        b.stride(0),
        b.stride(1),
        config.block_n * b.stride(1),
        out.stride(0),
        out.stride(1),
        ROWS=config.rows,
        NNZ_STEP=config.nnz_step,
        BLOCK_N=config.block_n,
        VEC=config.vec,
        ROW_ALIGN=min(pad_to, config.nnz_step),
        EVEN_N=n % config.block_n == 0,
        SWIZZLE=config.swizzle,
        PREFETCH=config.prefetch,
        OFFSETS_32=offsets_fit_32_bits(b),
        HAS_BIAS=bias is not None,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return out


def offsets_fit_32_bits(b: torch.Tensor) -> bool:
    """Whether every element of the 2-D dense operand ``b`` lies within 2**31 - 1 elements of its
    first (strides are never negative in torch), so the gather kernels may address it with 32-bit
    offsets. Checked at every launch: plain arithmetic on the shape, no loop."""
    (rows, cols), (row_stride, col_stride) = b.shape, b.stride()
    return (rows - 1) * row_stride + (cols - 1) * col_stride < 2**31 - 1


def check_b_and_out(what: str, values: torch.Tensor, b: torch.Tensor, m: int, out: torch.Tensor | None) -> torch.Tensor:
    """Check B against A's values (shared by the SpMM launchers; only their dtype and device are read,
    so a format that carries those may stand in); return ``out``, allocated if None."""
    if b.dim() != 2:
        raise ValueError(f"{what}: B must be 2-D, got shape {tuple(b.shape)}")
    if values.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{what}: dtype {values.dtype} is not supported; use one of {SUPPORTED_DTYPES}")
    if b.dtype != values.dtype:
        raise TypeError(f"{what}: A is {values.dtype} but B is {b.dtype}; they must match")
    if values.device != b.device:
        raise ValueError(f"{what}: A is on {values.device} but B is on {b.device}")
    check_device(b.device, f"{what} input")
    n = b.shape[1]
    if out is None:
        return torch.empty((m, n), dtype=b.dtype, device=b.device)
    if out.shape != (m, n) or out.dtype != b.dtype or out.device != b.device:
        raise ValueError(f"{what}: out must be {b.dtype} ({m}, {n}) on {b.device}")
    if out.numel() > 1 and 0 in out.stride():
        raise ValueError(f"{what}: out has a zero stride {out.stride()}: its elements overlap")
    return out


def check_bias(what: str, bias: torch.Tensor | None, m: int, values: torch.Tensor) -> None:
    """Check a bias for the M rows of a product whose sparse operand stores ``values``."""
    if bias is None:
        return
    if bias.shape != (m,):
        raise ValueError(f"{what}: bias must have shape ({m},), got {tuple(bias.shape)}")
    if bias.dtype != values.dtype or bias.device != values.device:
        raise TypeError(f"{what}: bias is {bias.dtype} on {bias.device}; it must be {values.dtype} on {values.device}")
    if bias.numel() > 1 and bias.stride(0) != 1:
        raise ValueError(f"{what}: bias must be contiguous")


def fill_bias(out: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``out`` for a product with no nonzeros: the bias alone."""
    return out.zero_() if bias is None else out.copy_(bias[:, None].expand_as(out))


# ------------------------------------------------------------------------------ config space
_ROWS = (1, 2, 4, 8, 16)
_NNZ_STEPS = (8, 16, 32)
# Longer steps, up to this N only. They pay off where few programs each walk long rows, so that the
# chain of dependent loads sets the time: at 768 x 3072, N = 16 on the H200 a 64- or 128-long step
# ran 1.4-2x faster than the best of 8-32 (BENCHMARKS.md 7g). From N = 128 on (4096 x 4096) they won
# once in six problems, by 2%: there they would only dilute the search.
_LONG_STEPS = (64, 128)
LONG_STEP_MAX_N = 32
_BLOCK_NS = (16, 32, 64, 128)
_VECS = (4, 2, 1)  # widest first: only the widest load N's alignment allows enters the space
# 16-byte pieces of B's rows (8 fp16/bf16 values a thread), from this N up, beside width 4. Per
# nonzero they halve the index, value and address work (28-31% fewer loop instructions per
# multiply-add in sm_90a SASS). On the H200 (4096 x 4096, N = 128 and 2048) they ran 5-27% faster
# on the best configs and up to 48% slower on others, with no rule that told them apart
# (BENCHMARKS.md 7l): a search axis. At N = 16 they lost. Only on N tiles of 32 and up: a 16-wide
# tile left two threads a row, and the one such config timed ran 2x slower than width 4's pick.
_WIDE_VEC = 8
_WIDE_VEC_MIN_N = 64
_WIDE_VEC_MIN_BLOCK_N = 32
_WARPS = (2, 4, 8)
# The nonzero loop is a gather whose addresses come from the loop itself, so software pipelining
# (num_stages=2) gained at most 1.4% over one stage on the H100 (8 problems), for twice the configs.
_STAGES = (1,)
# fp32 elements of the gathered (ROWS, NNZ_STEP, BLOCK_N) tile a thread may hold before it spills.
_MAX_TILE_PER_THREAD = 128
# Up to this N the CSR loop prefetches (``prefetch=True``). At decode widths a step's gather is
# too little work to hide the latency of the index load it depends on: on the H200 (4096x4096 fp16,
# 90/95/98% zeros) the best prefetching config beat the best plain one by 8-10% at N = 16, and lost
# 2-11% at N = 128 and 2048, where enough programs are in flight to hide it.
PREFETCH_MAX_N = 32


def config_space(problem: SpMMProblem, budget: DeviceBudget | None = None) -> list[SpMMConfig]:
    """Every CSR config worth compiling for the problem on the device (``stuning.kernels.spmm_sell``
    has the sliced-ELL ones; the tuner's "spmm" family is the union)."""
    return tile_configs(problem, budget, _ROWS, "csr")


def prefetches(problem: SpMMProblem, kernel: str) -> bool:
    """Whether the problem's CSR configs prefetch the next step (a rule, not a search axis: it
    doubled the space for a choice that measured one way on each side of ``PREFETCH_MAX_N``)."""
    return kernel == "csr" and problem.n <= PREFETCH_MAX_N


def tile_configs(problem: SpMMProblem, budget: DeviceBudget | None, row_options: tuple, kernel: str
                 ) -> list[SpMMConfig]:
    """The configs of a (rows, nnz_step, block_n) gather tile that fit the device, for either kernel."""
    budget = budget or device_budget()
    n_cap = max(16, triton.next_power_of_2(problem.n))
    # The shortest step stays in even when rows average under 2 nonzeros (pruned pointwise convs).
    max_row_len_cap = max(min(_NNZ_STEPS), triton.next_power_of_2(max(1, problem.nnz // max(1, problem.m)) * 4))
    out = []
    # Narrower loads than alignment allows were 1.6-5x slower in every measured problem: not worth timing.
    vecs = (next(v for v in _VECS if problem.n % v == 0),)
    if problem.n >= _WIDE_VEC_MIN_N and problem.n % _WIDE_VEC == 0 and problem.dtype != torch.float32:
        vecs = (_WIDE_VEC, *vecs)
    prefetch = prefetches(problem, kernel)
    steps = _NNZ_STEPS + (_LONG_STEPS if problem.n <= LONG_STEP_MAX_N else ())
    for rows, step, bn, vec, warps, stages, swz in itertools.product(
        row_options, steps, _BLOCK_NS, vecs, _WARPS, _STAGES, (False, True)
    ):
        threads = 32 * warps
        if bn > n_cap or vec > bn or rows > max(1, triton.next_power_of_2(problem.m)):
            continue
        if vec == _WIDE_VEC and bn < _WIDE_VEC_MIN_BLOCK_N:
            continue
        if step > max_row_len_cap:
            continue  # steps far longer than the average row only load masked zeros (or padding)
        tile = rows * step * bn
        if tile // threads > _MAX_TILE_PER_THREAD or tile < threads:
            continue
        regs_per_thread = 32 + 2 * tile // threads  # estimate: gathered tile, accumulator of its shape, addresses
        if regs_per_thread > 255 or regs_per_thread * threads > budget.registers_per_sm:
            continue
        out.append(SpMMConfig(rows, step, bn, vec, swz, warps, stages, kernel, prefetch))
    return out


def heuristic(problem: SpMMProblem) -> SpMMConfig:
    """Sputnik's rules, roughly: one row per subwarp, N tile by the width of B, vector loads when
    N is aligned, more rows per program when rows are short."""
    n = problem.n
    block_n = 16 if n <= 16 else 32 if n <= 32 else 64
    avg = problem.nnz / max(1, problem.m)
    step = 8 if avg <= 16 else 16 if avg <= 64 else 32
    rows = 8 if block_n <= 16 else 4 if block_n <= 32 else 2
    vec = 4 if n % 4 == 0 and block_n >= 32 else 2 if n % 2 == 0 else 1
    warps = max(1, min(8, rows * step * block_n // (32 * 64)))
    return SpMMConfig(rows=rows, nnz_step=step, block_n=block_n, vec=vec, swizzle=True, num_warps=warps,
                      prefetch=prefetches(problem, "csr"))


def repair(config: SpMMConfig, problem: SpMMProblem) -> SpMMConfig:
    """The nearest valid config to one tuned for a neighbouring problem (other N, other rows), of
    the same kernel."""
    if config.kernel == "scatter":
        from stuning.kernels import spmm_scatter

        return spmm_scatter.repair(config, problem)
    block_n = min(config.block_n, max(16, triton.next_power_of_2(problem.n)))
    vec = config.vec
    while vec > 1 and (problem.n % vec or vec > block_n):
        vec //= 2
    rows = min(config.rows, max(1, triton.next_power_of_2(problem.m)))
    return replace(config, rows=rows, block_n=block_n, vec=vec, prefetch=prefetches(problem, config.kernel))
