"""The 2:4 kernel on the sparse warpgroup MMA (kernels/semi24_wgmma_sp.py): its metadata layout, its
shared buffers, its place in the config space and what runs where it cannot (here: the Triton
kernel). The kernel itself runs only on an sm_90 GPU (Gluon has no interpreter): tests/test_gpu.py
checks it there."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
from naive import TOL, assert_close, config_id, randn, random_24, semi24_ref
from stuning.kernels import semi24 as semi24_kernel
from stuning.kernels import semi24_hopper, semi24_wgmma_sp
from stuning.kernels.semi24 import Semi24Config, Semi24Problem
from stuning.kernels.target import H100_BUDGET

import stuning
from stuning import Semi24Matrix
from stuning.suite import Semi24Case
from stuning.tuning.problems import build_problem


def metadata_by_definition(w: Semi24Matrix, ks: int) -> torch.Tensor:
    """The metadata spelled out one nibble at a time: lane 4 g + 2 kk + u of a 16-row tile holds, for
    MMA kk (its sparsity selector) of a 64-column step, the step's groups 8 kk + 4 u .. 8 kk + 4 u + 3
    (column order), row g in nibbles 0-3 and row g + 8 in nibbles 4-7; a missing row or group gets
    the valid nibble 0x4. With ks = 2 the words of a 128-column stage go lane by lane, two a lane."""
    m, k = w.shape
    pos = w.positions()
    tiles, steps = 16 * -(-m // 256), 2 * -(-k // 128)
    out = torch.zeros(tiles, steps * 32, dtype=torch.int64)
    for t in range(tiles):
        for s in range(steps):
            for lane in range(32):
                g, kk, u = lane // 4, (lane % 4) // 2, lane % 2
                word = 0
                for half in range(2):
                    row = 16 * t + g + 8 * half
                    for i in range(4):
                        group = 16 * s + 8 * kk + 4 * u + i
                        nibble = 0x4
                        if row < m and group < w.k_stored // 4:
                            nibble = int(pos[row, 2 * group]) | int(pos[row, 2 * group + 1]) << 2
                        word |= nibble << (4 * (i + 4 * half))
                at = 32 * s + lane if ks == 1 else 64 * (s // 2) + 2 * lane + s % 2
                out[t, at] = word
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32)


@pytest.mark.parametrize("ks", [1, 2])
@pytest.mark.parametrize("m,k", [(40, 200), (16, 64), (300, 144), (1, 4)])
def test_metadata_follows_the_lane_layout(gen, m, k, ks):
    dense = random_24(m, (k + 3) // 4 * 4, torch.float16, gen)[:, :k]
    w = Semi24Matrix.from_dense(dense, pad=k % 4 != 0)
    meta = w.wgmma_metadata(ks)
    assert meta.dtype == torch.int32 and meta.is_contiguous()
    assert tuple(meta.shape) == semi24_wgmma_sp.metadata_shape(m, k)
    assert torch.equal(meta, metadata_by_definition(w, ks))


def test_metadata_is_kept_per_step_width_and_rebuilt_when_the_masks_change(gen):
    a, b = (Semi24Matrix.from_dense(random_24(32, 256, torch.float16, gen)) for _ in range(2))
    one, two = a.wgmma_metadata(1), a.wgmma_metadata(2)
    assert a.wgmma_metadata(1) is one and a.wgmma_metadata(2) is two and not torch.equal(one, two)
    a.masks.copy_(b.masks)
    assert torch.equal(a.wgmma_metadata(2), b.wgmma_metadata(2))
    with pytest.raises(ValueError, match="ks must be 1 or 2"):
        a.wgmma_metadata(4)


def test_the_launcher_checks_the_metadata_it_is_given(gen):
    w = Semi24Matrix.from_dense(random_24(40, 208, torch.float16, gen))
    semi24_wgmma_sp.check_metadata(w.wgmma_metadata(1), 40, 208, w.values.device)
    with pytest.raises(ValueError, match="needs the matrix's wgmma_metadata"):
        semi24_wgmma_sp.check_metadata(None, 40, 208, w.values.device)
    meta = w.wgmma_metadata(2)
    for wrong in (w.mma_metadata(), meta[:, :-1], meta.to(torch.int64), meta.t().contiguous().t()):
        with pytest.raises(ValueError, match=r"wgmma_metadata must be a contiguous int32 \(16, 128\)"):
            semi24_wgmma_sp.check_metadata(wrong, 40, 208, w.values.device)


def _space(problem, budget=H100_BUDGET):
    return [c for c in semi24_kernel.config_space(problem, budget) if c.kernel == "wgmma_sp"]


def test_configs_only_where_that_kernel_runs(monkeypatch):
    ampere = dataclasses.replace(H100_BUDGET, compute_capability=(8, 0))
    problem = Semi24Problem(4096, 4096, 128, torch.float16)
    monkeypatch.setattr(semi24_hopper, "available", lambda: False)
    assert not _space(problem)
    monkeypatch.setattr(semi24_hopper, "available", lambda: True)
    ours = _space(problem)
    assert {(c.block_n, c.block_k, c.num_warps) for c in ours} == set(itertools.product(
        semi24_wgmma_sp.BLOCK_NS, semi24_wgmma_sp.BLOCK_KS, semi24_wgmma_sp.WARPS))
    assert {c.split_k for c in ours} == set(semi24_wgmma_sp.SPLIT_KS) and max(c.num_stages for c in ours) == 8
    for cfg in ours:
        assert cfg.block_m == 16 * cfg.num_warps
        assert semi24_kernel.shared_memory_bytes(cfg, 2) <= H100_BUDGET.shared_mem_per_block
        assert semi24_kernel.why_excluded(cfg, 2, H100_BUDGET) is None
        assert semi24_kernel.why_excluded(cfg, 2, ampere) is not None
        assert semi24_kernel.repair(cfg, Semi24Problem(4096, 4096, 128, torch.float16)) == cfg
        # The Triton kernel's stand-in for it is in that kernel's space, on the H100 and the A100.
        fallback = semi24_kernel.triton_fallback(cfg)
        a100 = dataclasses.replace(ampere, shared_mem_per_block=163 * 1024)
        assert fallback.kernel == "triton" and semi24_kernel.why_excluded(fallback, 2, a100) is None, cfg
    assert not _space(problem, ampere)
    # Wide X: no splits. Rows TMA cannot read (N not a multiple of 8, K not of 16): none.
    assert {c.split_k for c in _space(Semi24Problem(4096, 4096, 2048, torch.float16))} == {1}
    for m, k, n in ((4096, 4096, 20), (4096, 4104, 128)):
        assert not _space(Semi24Problem(m, k, n, torch.float16))
    # Narrow X: the 64-column tile, over zeros TMA fills in past N.
    assert {c.block_n for c in _space(Semi24Problem(4096, 4096, 16, torch.float16))} == {64}


def test_buffers_sit_where_the_mma_addresses_them():
    """Largest first, each after the last, every stage buffer on a 1024-byte boundary (the swizzle's
    period): for every config of the space."""
    for bn in semi24_wgmma_sp.BLOCK_NS:
        for bk in semi24_wgmma_sp.BLOCK_KS:
            for warps in semi24_wgmma_sp.WARPS:
                sizes = semi24_wgmma_sp.buffer_bytes(bn, bk, warps, 3)
                at = semi24_wgmma_sp.buffer_offsets(bn, bk, warps, 3)
                order = sorted(at, key=at.get)
                assert [sizes[b] for b in order] == sorted(sizes.values(), reverse=True)
                for a, b in itertools.pairwise(order):
                    assert at[b] == at[a] + sizes[a]
                assert all(at[b] % 1024 == 0 for b in ("x", "w", "meta"))


@pytest.mark.parametrize("config", [Semi24Config(64, 64, 128, 1, 2, 4, 8, kernel="wgmma_sp"),
                                    Semi24Config(256, 128, 64, 1, 1, 16, 3, kernel="wgmma_sp")], ids=config_id)
def test_a_config_elsewhere_runs_the_triton_kernel(gen, device, config):
    m, k, n = 40, 264, 24
    dense = random_24(m, k, torch.float16, gen)
    x = randn(k, n, dtype=torch.float16, gen=gen)
    if device == "cpu":
        assert not semi24_wgmma_sp.takes(dense, x)
    w = Semi24Matrix.from_dense(dense.to(device))
    y = stuning.semi24_mm(w, x.to(device), config=config)
    assert_close(y, semi24_ref(dense, x), TOL[torch.float16], config_id(config))
    # K = 264 is not a multiple of 16 (TMA reads W's rows in 16-byte pieces): the Triton kernel.
    repaired = semi24_kernel.repair(config, Semi24Problem(m, k, n, torch.float16))
    assert repaired.kernel == "triton" and semi24_kernel.why_excluded(repaired, 2, H100_BUDGET) is None


@pytest.mark.parametrize("caller", ["op", "op, X^T view", "tuner"])
def test_the_launcher_hands_the_kernel_its_tiles_and_metadata(gen, monkeypatch, caller):
    """Where the kernel runs (faked here: no sm_90 GPU), the op users call and the tuner's problem
    runner alike hand it the config's tiles, split-K clamped to K's steps with its workspace, and the
    matrix's metadata for the config's step width."""
    calls = []
    monkeypatch.setattr(semi24_wgmma_sp, "takes", lambda values, x: True)
    monkeypatch.setattr(semi24_wgmma_sp, "launch", lambda *args, **kw: calls.append((args, kw)))
    config = Semi24Config(128, 64, 128, 1, 8, 8, 4, kernel="wgmma_sp")
    if caller.startswith("op"):
        w = Semi24Matrix.from_dense(random_24(40, 256, torch.float16, gen))
        x = randn(256, 16, dtype=torch.float16, gen=gen)
        if caller.endswith("view"):  # read in place: no copy
            x = x.t().contiguous().t()
        y = stuning.semi24_mm(w, x, config=config)
    else:
        problem = build_problem(Semi24Case(40, 256, 16, "fp16"), device="cpu", seed=int(torch.randint(99, (1,))))
        w, x = problem.inputs["w"], problem.inputs["x"]
        y = problem.run(config)
    (args, kw), = calls
    assert kw == dict(m=40, n=16, k=256, block_m=128, block_n=64, block_k=128, split_k=2, num_warps=8,
                      num_stages=4)
    assert args[0] is w.values and args[2] is x and args[3] is y
    assert args[1] is w.wgmma_metadata(2)
    partial, counts = args[5], args[6]
    assert partial.dtype == torch.float32 and partial.numel() >= 40 * 16 and counts.numel() >= 1


# Timed on the H200 at N = 128 (fp16, CUDA-graph replays with L2 flushed):
# benchmarks/h200-semi24-wgmma-tma/library-vs-probe-n128.txt, (M, K) -> {"block_n:KS:split:warps:stages": us}.
H200_TIMES_N128 = {
    (4096, 4096): {"64:2:1:4:8": 11.4, "128:2:1:8:4": 18.2, "64:2:2:4:4": 15.7, "64:2:1:4:6": 12.4,
                   "128:2:1:4:4": 16.0, "64:2:2:4:8": 18.0, "128:2:2:8:4": 19.2, "64:1:1:4:8": 22.0},
    (11008, 4096): {"64:2:1:4:8": 31.8, "128:2:1:8:4": 25.2, "64:2:2:4:4": 41.9, "64:2:1:4:6": 34.5,
                    "128:2:1:4:4": 34.2, "64:2:2:4:8": 50.5, "128:2:2:8:4": 39.5, "64:1:1:4:8": 45.3},
    (4096, 11008): {"64:2:1:4:8": 26.0, "128:2:1:8:4": 43.8, "64:2:2:4:4": 30.7, "64:2:1:4:6": 29.7,
                    "128:2:1:4:4": 39.6, "64:2:2:4:8": 32.1, "128:2:2:8:4": 35.7, "64:1:1:4:8": 53.6},
}


@pytest.mark.parametrize("shape", list(H200_TIMES_N128))
def test_the_cost_model_ranks_recorded_h200_timings(monkeypatch, shape):
    """The unfitted model orders the recorded configs as the H200 did (rank correlation >= 0.5) and
    puts the fastest among its first tenth of the kernel's configs, where a search starts."""
    from stuning.tuning.cost_model import CostModel
    from stuning.tuning.device import spec_for
    from stuning.tuning.features import semi24_features
    from stuning.tuning.registry import budget_of, family

    monkeypatch.setattr(semi24_hopper, "available", lambda: True)
    device = spec_for("h200")
    features = semi24_features(*shape, 128, torch.float16)
    ranked = [c for c, _ in CostModel(device).rank(features, family("semi24").space(features, budget_of(device)))
              if c.kernel == "wgmma_sp"]
    predicted = dict(CostModel(device).rank(features, ranked))
    times = H200_TIMES_N128[shape]
    configs = {}
    for label in times:
        bn, ks, split, warps, stages = map(int, label.split(":"))
        configs[label] = Semi24Config(16 * warps, bn, 64 * ks, 1, split, warps, stages, kernel="wgmma_sp")
    measured_rank = torch.tensor([sorted(times.values()).index(times[lb]) for lb in times], dtype=torch.float64)
    preds = [predicted[configs[lb]] for lb in times]
    model_rank = torch.tensor([sorted(preds).index(p) for p in preds], dtype=torch.float64)
    assert torch.corrcoef(torch.stack([measured_rank, model_rank]))[0, 1] >= 0.5
    fastest = configs[min(times, key=times.get)]
    assert ranked.index(fastest) < len(ranked) / 10


def test_a_transposed_view_of_x_runs_on_every_kernel(gen, device):
    """A transposed view of X (a linear layer's input) is copied for every kernel but the warpgroup
    one (here none runs: the Triton kernel takes the copy), and the product is right."""
    m, k, n = 40, 256, 24
    dense = random_24(m, k, torch.float16, gen)
    x = randn(k, n, dtype=torch.float16, gen=gen)
    w = Semi24Matrix.from_dense(dense.to(device))
    for config in (Semi24Config(64, 64, 128, 1, 2, 4, 4, kernel="wgmma_sp"), Semi24Config(32, 32, 64, 8, 1, 4, 2)):
        y = stuning.semi24_mm(w, x.t().contiguous().t().to(device), config=config)
        assert_close(y, semi24_ref(dense, x), TOL[torch.float16], config_id(config))
