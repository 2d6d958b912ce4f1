"""The 2:4 kernel on the sparse tensor cores (kernels/semi24_sparse_mma.py): its metadata layout, its
place in the config space and what runs where it cannot (here: the Triton kernel). The kernel itself
runs only on an sm_90 GPU (Gluon has no interpreter): tests/test_gpu.py checks it there."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from naive import TOL, assert_close, config_id, randn, random_24, semi24_ref
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels import semi24_hopper, semi24_sparse_mma
from stuning.kernels.semi24 import Semi24Config, Semi24Problem
from stuning.kernels.target import H100_BUDGET

import stuning
from stuning import Semi24Matrix
from stuning.suite import Semi24Case
from stuning.tuning.problems import build_problem


def metadata_by_definition(w: Semi24Matrix) -> torch.Tensor:
    """The metadata registers spelled out one nibble at a time. The lane layout (measured on the
    H200 by scripts/probe_mma_sp.py): with sparsity selector kk, lane 4g + 2kk + u holds groups
    4u .. 4u + 3 of the MMA's 32 columns, row g in nibbles 0-3 and row g + 8 in nibbles 4-7. The
    kernel feeds MMA kk of a 64-column step the step's groups 4i + 2kk + u as its groups 4u + i."""
    m, k = w.shape
    pos = w.positions()
    tiles, steps = -(-m // 16), -(-k // 64)
    out = torch.zeros(tiles, steps, 32, dtype=torch.int64)
    for t in range(tiles):
        for s in range(steps):
            for lane in range(32):
                g, kk, u = lane // 4, (lane % 4) // 2, lane % 2
                for half in range(2):
                    row = 16 * t + g + 8 * half
                    for i in range(4):
                        group = 16 * s + 4 * i + 2 * kk + u
                        if row < m and group < w.k_stored // 4:
                            a, b = int(pos[row, 2 * group]), int(pos[row, 2 * group + 1])
                        else:
                            a, b = 0, 1  # no row or no group there: zero values, any valid positions
                        out[t, s, lane] |= (a | b << 2) << (4 * (i + 4 * half))
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32)


@pytest.mark.parametrize("m,k", [(40, 200), (16, 64), (35, 130), (1, 4)])
def test_metadata_follows_the_lane_layout(gen, m, k):
    dense = random_24(m, (k + 3) // 4 * 4, torch.float16, gen)[:, :k]
    w = Semi24Matrix.from_dense(dense, pad=k % 4 != 0)
    meta = w.mma_metadata()
    assert meta.dtype == torch.int32 and meta.is_contiguous()
    assert torch.equal(meta, metadata_by_definition(w))


def test_metadata_is_rebuilt_when_the_masks_change(gen):
    a, b = (Semi24Matrix.from_dense(random_24(32, 128, torch.float16, gen)) for _ in range(2))
    first = a.mma_metadata()
    assert a.mma_metadata() is first  # built once
    a.masks.copy_(b.masks)
    assert torch.equal(a.mma_metadata(), b.mma_metadata())


def test_the_launcher_checks_the_metadata_it_is_given(gen):
    w = Semi24Matrix.from_dense(random_24(40, 200, torch.float16, gen))
    semi24_sparse_mma.check_metadata(w.mma_metadata(), 40, 200, w.values.device)
    with pytest.raises(ValueError, match="needs the matrix's mma_metadata"):
        semi24_sparse_mma.check_metadata(None, 40, 200, w.values.device)
    meta = w.mma_metadata()
    for wrong in (w.masks, meta[:, :-1], meta.to(torch.int64), meta.transpose(0, 1).contiguous().transpose(0, 1)):
        with pytest.raises(ValueError, match=r"mma_metadata must be a contiguous int32 \(3, 4, 32\)"):
            semi24_sparse_mma.check_metadata(wrong, 40, 200, w.values.device)


def test_metadata_of_a_matrix_built_in_inference_mode(gen):
    # Serving code builds and runs weights under torch.inference_mode(): no version counter there.
    dense = random_24(32, 128, torch.float16, gen)
    with torch.inference_mode():
        w = Semi24Matrix.from_dense(dense)
        assert torch.equal(w.mma_metadata(), metadata_by_definition(w))
        assert w.mma_metadata() is w.mma_metadata()


def test_configs_only_where_that_kernel_runs(monkeypatch):
    ampere = dataclasses.replace(H100_BUDGET, compute_capability=(8, 0))
    decode = Semi24Problem(4096, 4096, 16, torch.float16)
    monkeypatch.setattr(semi24_hopper, "available", lambda: False)
    assert not any(c.kernel == "sparse_mma" for c in semi24_kernel.config_space(decode, H100_BUDGET))
    monkeypatch.setattr(semi24_hopper, "available", lambda: True)
    ours = [c for c in semi24_kernel.config_space(decode, H100_BUDGET) if c.kernel == "sparse_mma"]
    assert {c.split_k for c in ours} >= {1, 8, 16} and {(c.block_m, c.num_warps) for c in ours} == set(
        semi24_sparse_mma.TILES)
    for cfg in ours:
        assert cfg.block_k == semi24_sparse_mma.BLOCK_K and cfg.block_n == 16
        assert semi24_kernel.why_excluded(cfg, 2, H100_BUDGET) is None
        assert semi24_kernel.why_excluded(cfg, 2, ampere) is not None
        assert semi24_kernel.repair(cfg, decode) == cfg
    assert not any(c.kernel == "sparse_mma" for c in semi24_kernel.config_space(decode, ampere))
    # Past its measured range, or X not copied in 16-byte pieces: none.
    for n in (24, 48, 128):
        problem = Semi24Problem(4096, 4096, n, torch.float16)
        assert not any(c.kernel == "sparse_mma" for c in semi24_kernel.config_space(problem, H100_BUDGET))


@pytest.mark.parametrize("config", [Semi24Config(16, 16, 64, 1, 16, 1, 3, kernel="sparse_mma"),
                                    Semi24Config(64, 32, 64, 1, 3, 4, 2, kernel="sparse_mma")], ids=config_id)
def test_a_config_elsewhere_runs_the_triton_kernel(gen, device, config):
    m, k = 40, 264
    dense = random_24(m, k, torch.float16, gen)
    x = randn(k, 16, dtype=torch.float16, gen=gen)
    if device == "cpu":
        assert not semi24_sparse_mma.takes(dense, x)
    w = Semi24Matrix.from_dense(dense.to(device))
    y = stuning.semi24_mm(w, x.to(device), config=config)
    assert_close(y, semi24_ref(dense, x), TOL[torch.float16], config_id(config))
    # Its 16-row, one-warp tiles and 16 splits are outside the Triton kernel's space: brought in.
    fallback = semi24_kernel.triton_fallback(config)
    assert fallback.kernel == "triton" and semi24_kernel.why_excluded(fallback, 2, H100_BUDGET) is None
    repaired = semi24_kernel.repair(config, Semi24Problem(m, k, 24, torch.float16))
    assert repaired.kernel == "triton"


@pytest.mark.parametrize("caller", ["op", "tuner"])
@pytest.mark.parametrize("kernel", ["hopper", "sparse_mma"])
def test_the_launcher_hands_a_gluon_kernel_its_tiles_and_arrays(gen, monkeypatch, kernel, caller):
    """Where a Gluon kernel runs (faked here: no sm_90 GPU), the launcher hands it the config's tiles,
    split-K clamped to K's steps with its workspace, and (sparse MMA) the matrix's metadata: from the
    op users call and from the tuner's problem runner alike (the runner once passed no metadata, so
    every sparse-MMA trial failed and no tune chose that kernel)."""
    module = semi24_kernel.GLUON_KERNELS[kernel]
    calls = []
    monkeypatch.setattr(module, "takes", lambda values, x: True)
    monkeypatch.setattr(module, "launch", lambda *args, **kw: calls.append((args, kw)))
    config = Semi24Config(64, 16, 64, 1, 8, 4, 3, kernel=kernel)
    if caller == "op":
        w = Semi24Matrix.from_dense(random_24(40, 128, torch.float16, gen))
        x = randn(128, 16, dtype=torch.float16, gen=gen)
        y = stuning.semi24_mm(w, x, config=config)
    else:
        problem = build_problem(Semi24Case(40, 128, 16, "fp16"), device="cpu", seed=int(torch.randint(99, (1,))))
        w, x = problem.inputs["w"], problem.inputs["x"]
        y = problem.run(config)
    (args, kw), = calls
    assert kw == dict(m=40, n=16, k=128, block_m=64, block_n=16, split_k=2, num_warps=4, num_stages=3)
    assert args[0] is w.values and args[2] is x and args[3] is y
    assert args[1] is (w.mma_metadata() if kernel == "sparse_mma" else w.masks)
    partial, counts = args[5], args[6]
    assert partial.dtype == torch.float32 and partial.numel() >= 40 * 16 and counts.numel() >= 1
