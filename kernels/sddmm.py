"""SDDMM: for every nonzero (i, j) of a CSR mask, ``out = alpha * A[i, :] @ B[:, j] + beta * mask[i, j]``.

The semantics of ``torch.sparse.sampled_addmm``. Three kernels, chosen per problem by the config's
``kernel`` field (the tuner ranks them in one config space):

- ``gather`` (here): each program takes ``NNZ_BLOCK`` consecutive nonzeros (so work is even
  whatever the row lengths), gathers their rows of A and columns of B ``BLOCK_K`` at a time and
  reduces in fp32 on CUDA cores. Best when nonzeros are too scattered to share output tiles.
- ``tiled`` (``sddmm_tiled.py``): dense output tiles of A @ B on tensor cores, kept only at the
  nonzeros. Best once tiles hold enough nonzeros (attention-like masks, small K).
- ``dense`` (``sddmm_dense.py``): cuBLAS's full product into a scratch matrix, the nonzeros read
  out of it. Where every tile holds nonzeros and K is large (weight masks), nothing sparse beats it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import triton
import triton.language as tl
from stuning.kernels import sddmm_dense, sddmm_tiled
from stuning.kernels.sddmm_nonzeros import nonzero_block, store_values
from stuning.kernels.target import DeviceBudget, check_device, device_budget

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit(do_not_specialize=["nnz", "K"])
def _sddmm_kernel(
    # the mask: row and column of each nonzero, and its value (read only when HAS_BETA)
    row_ptr,
    col_ptr,
    mask_val_ptr,
    # dense A (M x K), B (K x N), and the output values (nnz)
    a_ptr,
    b_ptr,
    out_ptr,
    nnz,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    alpha,
    beta,
    # template parameters
    NNZ_BLOCK: tl.constexpr,
    BLOCK_K: tl.constexpr,
    VEC: tl.constexpr,
    EVEN_K: tl.constexpr,
    HAS_BETA: tl.constexpr,
):
    offs, ok, rows, cols = nonzero_block(row_ptr, col_ptr, nnz, NNZ_BLOCK)
    a_base = a_ptr + rows[:, None] * stride_am
    b_base = b_ptr + cols[:, None] * stride_bn

    acc = tl.zeros((NNZ_BLOCK, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        offs_k = tl.max_contiguous(tl.multiple_of(offs_k, VEC), VEC)
        if EVEN_K:
            m = ok[:, None]
        else:
            m = ok[:, None] & (offs_k[None, :] < K)
        # Upcast right after loading: fp32 accumulation, and the interpreter's bf16 math is wrong.
        a = tl.load(a_base + offs_k[None, :] * stride_ak, mask=m, other=0.0).to(tl.float32)
        b = tl.load(b_base + offs_k[None, :] * stride_bk, mask=m, other=0.0).to(tl.float32)
        acc += a * b
    store_values(tl.sum(acc, axis=1), offs, ok, mask_val_ptr, out_ptr, alpha, beta, HAS_BETA)


KERNELS = ("gather", "tiled", "dense")
_GATHER_ONLY = ("nnz_block", "vec")
_TILED_ONLY = ("block_m", "block_n", "chunk", "tiles_per_program")
# What each kernel leaves unused (held at 0). The dense kernel's sampling pass takes nnz_block and
# num_warps, and block_m as its rows a program (0: a flat block of nnz_block nonzeros).
_UNUSED = {"gather": _TILED_ONLY, "tiled": _GATHER_ONLY,
           "dense": ("block_n", "chunk", "tiles_per_program", "vec", "block_k", "num_stages")}


@dataclass(frozen=True)
class SDDMMConfig:
    """A config of either kernel. The fields a kernel does not use are held at 0, so two configs
    are equal exactly when they run the same thing; entries written before ``kernel`` existed load
    as gather configs."""

    nnz_block: int = 64  # gather: nonzeros per program
    block_k: int = 32  # both: depth of the products consumed per loop step
    vec: int = 1  # gather: vector width of the loads along K (contiguity hint)
    num_warps: int = 4
    num_stages: int = 2
    # "gather" (per nonzero, CUDA cores), "tiled" (per output tile, tensor cores) or "dense" (cuBLAS, then sampled)
    kernel: str = "gather"
    block_m: int = 0  # tiled: rows of an output tile; dense: rows a program of the sampling pass (0: flat)
    block_n: int = 0  # tiled: columns of an output tile
    chunk: int = 0  # tiled: nonzeros picked from the tile per step
    # tiled: consecutive tiles of a band of rows per program (entries from before it run one each)
    tiles_per_program: int = 1

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"SDDMMConfig: kernel must be one of {KERNELS}, got {self.kernel!r}")
        for name in _UNUSED[self.kernel]:
            object.__setattr__(self, name, 0)
        if self.kernel == "tiled" and min(self.block_m, self.block_n, self.chunk, self.tiles_per_program) < 1:
            raise ValueError("SDDMMConfig: the tiled kernel needs block_m, block_n, chunk and tiles_per_program")
        rows = self.block_m
        if self.kernel == "dense" and not (0 <= rows <= self.nnz_block and rows & (rows - 1) == 0):
            raise ValueError(f"SDDMMConfig: the dense kernel's pass takes 0 or a power of two up to nnz_block "
                             f"({self.nnz_block}) rows a program, got block_m={self.block_m}")

    def as_dict(self) -> dict:
        return asdict(self)

    def reads_band_once_a_run(self, k: int) -> bool:
        """Whether a tiled program reads its band of A once for its run of tiles (one step covers
        K and it runs several), not once a tile."""
        return self.kernel == "tiled" and self.tiles_per_program > 1 and self.block_k >= k

    def tiled_params(self) -> sddmm_tiled.TiledParams:
        return sddmm_tiled.TiledParams(
            self.block_m, self.block_n, self.block_k, self.chunk, self.num_warps, self.num_stages,
            self.tiles_per_program,
        )


def _tiled_config(p: sddmm_tiled.TiledParams) -> SDDMMConfig:
    return SDDMMConfig(
        kernel="tiled", block_m=p.block_m, block_n=p.block_n, block_k=p.block_k, chunk=p.chunk,
        num_warps=p.num_warps, num_stages=p.num_stages, tiles_per_program=p.tiles_per_program,
    )


@dataclass(frozen=True)
class SDDMMProblem:
    m: int
    n: int
    k: int
    nnz: int
    dtype: torch.dtype


def check_dtypes(a: torch.Tensor, b: torch.Tensor, mask_values: torch.Tensor) -> None:
    """Raise unless A is a supported dtype and B and the mask's values are the same one (also what
    the compiled operator's fake checks, so a bad input fails while tracing as it would eagerly)."""
    if a.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"sddmm: dtype {a.dtype} is not supported; use one of {SUPPORTED_DTYPES}")
    if b.dtype != a.dtype or mask_values.dtype != a.dtype:
        raise TypeError(f"sddmm: A is {a.dtype}, B is {b.dtype}, mask is {mask_values.dtype}; they must match")


def sddmm(
    row_ids: torch.Tensor,
    col: torch.Tensor,
    mask_values: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    alpha: float,
    beta: float,
    config: SDDMMConfig,
    tiles: Callable[[int, int, int], object] | None = None,
    crow: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Run the kernel ``config.kernel`` names on the mask (COO rows and columns, values), A and B,
    into ``out`` (the nnz values, contiguous; allocated when None).

    The gather kernel reads ``row_ids`` and ``col``; the dense one the same, or ``crow`` (the mask's
    row starts) and ``col`` in its pass by rows; the tiled one ``tiles(block_m, block_n, chunk)``,
    the mask's ``OutputTiles`` (``stuning.formats.output_tiles``: built and cached by the caller,
    who owns the mask), asked for only when it runs.
    """
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"sddmm: A and B must be 2-D, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"sddmm: inner dimensions differ: A is {tuple(a.shape)}, B is {tuple(b.shape)}")
    check_dtypes(a, b, mask_values)
    if not (a.device == b.device == mask_values.device):
        raise ValueError(f"sddmm: A on {a.device}, B on {b.device}, mask on {mask_values.device}")
    check_device(a.device, "sddmm input")
    nnz = col.numel()
    k = a.shape[1]
    out = _check_out(out, nnz, a)
    if nnz == 0:
        return out
    a, b = operands_for(config, a, b)
    if config.kernel == "tiled":
        if tiles is None:
            raise ValueError("sddmm: the tiled kernel needs the mask's output tiles (tiles=)")
        return sddmm_tiled.sddmm_tiled(
            tiles(config.block_m, config.block_n, config.chunk), mask_values, a, b, alpha=alpha, beta=beta,
            block_k=config.block_k, num_warps=config.num_warps, num_stages=config.num_stages,
            tiles_per_program=config.tiles_per_program, out=out,
        )
    if config.kernel == "dense":
        if config.block_m and (crow is None or crow.numel() != a.shape[0] + 1):
            raise ValueError(f"sddmm: the dense kernel's pass by rows needs the mask's row starts (crow=, "
                             f"{a.shape[0] + 1} entries), got {None if crow is None else crow.numel()}")
        return sddmm_dense.sddmm_dense(row_ids, crow, col, mask_values, a, b, alpha=alpha, beta=beta,
                                       rows_per_program=config.block_m, nnz_block=config.nnz_block,
                                       num_warps=config.num_warps, out=out)
    grid = (triton.cdiv(nnz, config.nnz_block),)
    _sddmm_kernel[grid](
        row_ids,
        col,
        mask_values,
        a,
        b,
        out,
        nnz,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        float(alpha),
        float(beta),
        NNZ_BLOCK=config.nnz_block,
        BLOCK_K=config.block_k,
        VEC=config.vec,
        EVEN_K=k % config.block_k == 0,
        HAS_BETA=beta != 0,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return out


def operands_for(config: SDDMMConfig, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A and B in layouts ``config``'s kernel reads at speed: copies, K contiguous, of those it does not.

    A weight gradient, ``(dY^T @ X) * spy(W)``, hands A = dY^T as a transposed view and B = X
    row-major, K strided in both. The gather kernel reads a row of A and a column of B per nonzero,
    so each of their elements became a sector of its own: 6-14x slower with B so, 1.3-2.2x with A
    (BENCHMARKS.md 9a, `scripts/probe_sddmm_layouts.py`). The tiled kernel reads A's tiles at speed
    either way where M is a whole number of tiles (its loads then need no mask along M, A's
    contiguous axis; BENCHMARKS.md 9c), so A is copied only where M is ragged, and not even then
    where one step covers K and a program runs several tiles: its band of A is read once a run, and
    the copy cost more (attention at L = 4096: 13.1 us copied, 10.8 read in place). B is copied for
    the tiled kernel only where fp32 multiplies as TF32 products (``tf32x3``): they ran 1.6x slower
    on B tiles not K-major, where fp16/bf16 ran alike (fp32's fp16 parts are fp16 tiles, split from B
    in one pass whatever its layout). cuBLAS, the dense kernel, takes any layout. A copy costs a pass over the
    operand, which PyTorch's transposing copy makes well below the memory's speed: with a 16 MB A
    copied, the tiled kernel at K = 2048 took ~40-50 us more than with A read in place (9a, 9c).
    """
    tf32 = a.dtype == torch.float32 and not sddmm_tiled.fp16_parts(a.dtype, a.device)
    copy_a, copy_b = copies_for(config, a.shape[0], a.shape[1], tf32x3=tf32)
    if copy_a and is_k_strided(a, 1):
        a = a.contiguous()
    if copy_b and is_k_strided(b, 0):
        b = b.t().contiguous().t()
    return a, b


def copies_for(config: SDDMMConfig, m: int, k: int, *, tf32x3: bool) -> tuple[bool, bool]:
    """Whether ``config``'s kernel gets A (M x K), and B, copied K-contiguous when K is strided in
    them (``operands_for``; the cost model charges the copies). ``tf32x3``: fp32 tiles multiply as
    TF32 products (not fp16 parts)."""
    if config.kernel == "dense":
        return False, False
    if config.kernel == "gather":
        return True, True
    ragged_m = m % config.block_m != 0
    return ragged_m and not config.reads_band_once_a_run(k), tf32x3


def is_k_strided(x: torch.Tensor, k_axis: int) -> bool:
    """Whether ``x`` has K (its axis ``k_axis``) strided, as a transposed view has: the layout the
    launch copies for some kernels and the database keys apart for A (``at=1``)."""
    return x.shape[k_axis] > 1 and x.stride(k_axis) != 1


def _check_out(out: torch.Tensor | None, nnz: int, a: torch.Tensor) -> torch.Tensor:
    if out is None:
        return torch.empty(nnz, dtype=a.dtype, device=a.device)
    if out.shape != (nnz,) or out.dtype != a.dtype or out.device != a.device:
        raise ValueError(f"sddmm: out must be {a.dtype} ({nnz},) on {a.device}, got {out.dtype} "
                         f"{tuple(out.shape)} on {out.device}")
    if not out.is_contiguous():
        raise ValueError("sddmm: out must be contiguous")
    return out


# ------------------------------------------------------------------------------ config space
_NNZ_BLOCKS = (16, 32, 64, 128, 256)
_BLOCK_KS = (16, 32, 64, 128)
_VECS = (8, 4, 2, 1)  # widest first: only the widest load K's alignment allows enters the space
_WARPS = (2, 4, 8)
_STAGES = (1, 2)
_MAX_TILE_PER_THREAD = 128


def config_space(problem: SDDMMProblem, budget: DeviceBudget | None = None) -> list[SDDMMConfig]:
    """Every kernel's configs: the tuner (or its cost model) chooses the kernel with the rest."""
    budget = budget or device_budget()
    tiled = sddmm_tiled.config_space(problem.m, problem.n, problem.k, problem.dtype, budget)
    return _gather_space(problem, budget) + [_tiled_config(p) for p in tiled] + _dense_space(problem)


def dense_config(rows_per_program: int = 0) -> SDDMMConfig:
    """The dense kernel, its sampling pass flat (0) or by ``rows_per_program`` rows."""
    return SDDMMConfig(kernel="dense", block_m=rows_per_program, nnz_block=sddmm_dense.NNZ_BLOCK,
                       num_warps=sddmm_dense.NUM_WARPS)


def _dense_space(problem: SDDMMProblem) -> list[SDDMMConfig]:
    """Both sampling passes (each too short to tune further: one shape), where the scratch product fits."""
    if sddmm_dense.scratch_bytes(problem.m, problem.n, problem.dtype) > sddmm_dense.SCRATCH_MAX_BYTES:
        return []
    return [dense_config(), dense_config(sddmm_dense.rows_per_program(problem.nnz, problem.m))]


def _gather_space(problem: SDDMMProblem, budget: DeviceBudget) -> list[SDDMMConfig]:
    k_cap = max(16, triton.next_power_of_2(problem.k))
    out = []
    # Narrower loads than alignment allows were 3.3-7.5x slower in every measured problem: not worth timing.
    widest = next(v for v in _VECS if problem.k % v == 0)
    for nb, bk, warps, stages in itertools.product(_NNZ_BLOCKS, _BLOCK_KS, _WARPS, _STAGES):
        threads = 32 * warps
        vec = min(widest, bk)
        if bk > k_cap:
            continue
        tile = nb * bk
        if tile // threads > _MAX_TILE_PER_THREAD or tile < threads:
            continue
        regs = 32 + 3 * tile // threads
        if regs > 255 or regs * threads > budget.registers_per_sm:
            continue
        out.append(SDDMMConfig(nb, bk, vec, warps, stages))
    return out


def heuristic(problem: SDDMMProblem) -> SDDMMConfig:
    """The gather kernel (the one measured on every kind of mask): cover K in as few steps as the
    registers allow, 8-wide loads when K is aligned."""
    block_k = min(64, max(16, triton.next_power_of_2(problem.k)))
    vec = 8 if problem.k % 8 == 0 else 4 if problem.k % 4 == 0 else 1
    nnz_block = 64 if block_k <= 32 else 32
    return SDDMMConfig(nnz_block=nnz_block, block_k=block_k, vec=min(vec, block_k), num_warps=4)


def tiled_heuristic(problem: SDDMMProblem) -> SDDMMConfig:
    """A representative tiled config (tests, and where the tiled kernel is asked for by name)."""
    return _tiled_config(sddmm_tiled.heuristic(problem.m, problem.n, problem.k))


def repair(config: SDDMMConfig, problem: SDDMMProblem) -> SDDMMConfig:
    """The nearest valid config to one tuned for a neighbouring problem."""
    if config.kernel == "dense":
        # The same pass; rows a program sized to this problem's rows.
        space = _dense_space(problem)
        return space[bool(config.block_m)] if space else heuristic(problem)
    if config.kernel == "tiled":
        elem = problem.dtype.itemsize
        return _tiled_config(sddmm_tiled.repair(config.tiled_params(), problem.m, problem.n, problem.k, elem))
    block_k = min(config.block_k, max(16, triton.next_power_of_2(problem.k)))
    vec = config.vec
    while vec > 1 and (problem.k % vec or vec > block_k):
        vec //= 2
    return SDDMMConfig(config.nnz_block, block_k, vec, config.num_warps, config.num_stages)
