"""The tuner's check of a config (``KernelObjective``) on real problems of each op (interpreter or GPU).

A check that a wrong config can pass lets the tuner time and store it, so every way a run can come
back wrong is tried here: nothing written, part written, a fresh tensor in place of the output.
"""

from __future__ import annotations

import pytest
import torch
from naive import assert_close

from stuning.suite import SDDMMCase, Semi24Case, SpMMCase
from stuning.tuning.problems import build_problem
from stuning.tuning.registry import family
from stuning.tuning.search import TrialFailure

# In the interpreter without a GPU; on one, on it and among `pytest -m gpu` (the caching allocator,
# which can hand a fresh output an earlier config's product, is there).
DEVICE = pytest.param("cuda", marks=pytest.mark.gpu) if torch.cuda.is_available() else "cpu"

CASES = {
    "spmm": SpMMCase(24, 40, 16, 0.8, 0.0, "fp32"),
    "sddmm": SDDMMCase(24, 20, 16, 0.8, "fp16"),
    "semi24": Semi24Case(32, 64, 16, "fp16"),
}


@pytest.fixture(params=[DEVICE])
def dev(request) -> str:
    return request.param


@pytest.fixture(params=list(CASES), ids=list(CASES))
def problem(request, dev):
    from stuning.tuning.objective import KernelObjective

    problem = build_problem(CASES[request.param], device=dev, seed=7)
    config = family(request.param).default(problem.features)
    return problem, config, KernelObjective(problem, timer=lambda fn: float(fn().numel()))


def test_a_correct_config_passes_and_is_timed_into_one_output(problem):
    problem, config, objective = problem
    assert objective(config) == problem.reference.numel()
    first, second = objective.timed(config)(), objective.timed(config)()
    assert first.data_ptr() == second.data_ptr()  # the timed runs allocate nothing
    assert_close(second, problem.reference.double(), 1e-2)


def test_a_run_that_writes_nothing_fails(problem):
    """The output it returns is the one it was given, untouched: it may hold an earlier correct
    product on a GPU, so the check hands over NaN."""
    problem, config, objective = problem
    problem.run = lambda config, out=None: out
    with pytest.raises(TrialFailure, match="relative error inf") as e:
        objective.check(config)
    assert e.value.status == "wrong"


def test_a_run_that_writes_part_of_its_output_fails(problem):
    problem, config, objective = problem
    real_run = problem.run

    def half(config, out=None):
        full = real_run(config)
        flat = out.view(-1) if out.is_contiguous() else out.t().reshape(-1)
        flat[: flat.numel() // 2] = full.reshape(-1)[: flat.numel() // 2]  # the rest stays as it was
        return out

    problem.run = half
    with pytest.raises(TrialFailure, match="relative error inf"):
        objective.check(config)


def test_a_run_that_returns_a_fresh_tensor_fails(problem):
    """Even a correct one: the timed runs would then time an allocation, and the output the check
    prepared would prove nothing."""
    problem, config, objective = problem
    real_run = problem.run
    problem.run = lambda config, out=None: real_run(config)
    with pytest.raises(TrialFailure, match="new tensor"):
        objective.check(config)


def test_the_output_is_laid_out_as_the_layer_writes_it(dev):
    """A ``SparseLinear`` writes Y^T, so its tuning problem checks (and times) a transposed output."""
    import torch.nn as nn

    import stuning
    from stuning.tuning.objective import KernelObjective

    model = nn.Sequential(nn.Linear(40, 24))
    stuning.sparsify(model, sparsity=0.8, min_size=0)
    problem = model[0].sparse_weight.tuning_problem(16, device=dev, y_transposed=True)
    out = problem.output()
    assert out.shape == (24, 16) and out.stride() == (1, 24)
    config = family("spmm").default(problem.features)
    objective = KernelObjective(problem)
    objective.check(config)
    assert objective.timed(config)().stride() == (1, 24)


def test_trials_are_timed_short_and_finalists_longer(monkeypatch):
    """The default timers: ``SCREEN_TIMING`` for each trial, ``RETIME_TIMING`` for re-timing; a
    caller's own timer does both unless it gives a retimer too."""
    from stuning.tuning import objective as objective_module
    from stuning.tuning.objective import KernelObjective
    from stuning.tuning.timing import RETIME_TIMING, SCREEN_TIMING

    asked = []
    monkeypatch.setattr(objective_module, "bench_us", lambda fn, **settings: (asked.append(settings), (1.0, "x"))[1])
    problem = build_problem(CASES["spmm"], device="cpu", seed=7)
    objective = KernelObjective(problem)
    objective.timer(lambda: None)
    objective.retimer(lambda: None)
    assert asked == [SCREEN_TIMING, RETIME_TIMING]
    assert SCREEN_TIMING["graph_rep_ms"] < RETIME_TIMING["graph_rep_ms"]

    own = KernelObjective(problem, timer=lambda fn: 3.0)
    assert own.retimer(lambda: None) == 3.0


def test_a_tune_keeps_the_retimed_times_of_all_its_finalists():
    """Screened times can be a few percent off: every config a tune keeps is re-timed with the
    objective's retimer, and those times (not the screened ones) rank them and are stored."""
    from stuning.tuning.objective import KernelObjective
    from stuning.tuning.search import Budget
    from stuning.tuning.tuner import TOP_K, tune

    problem = build_problem(SpMMCase(64, 64, 16, 0.8, 0.0, "fp16"), device="cpu", seed=7)
    space = family("spmm").space(problem.features)
    screened = {c: 10.0 + i for i, c in enumerate(space)}  # configs in the space's order, fastest first
    retimed = {c: 100.0 - i for i, c in enumerate(space)}  # the re-timing reverses every pair

    class Recorded(KernelObjective):
        def __call__(self, config):
            return screened[config]

        def timed(self, config):
            return config  # what the retimer gets: the config itself, nothing runs

    outcome = tune(problem.features, objective=Recorded(problem, retimer=retimed.__getitem__),
                   strategy="model+optuna", budget=Budget(max_trials=12))
    kept = [family("spmm").config_from_dict(t["config"]) for t in outcome.top_k]
    assert len(kept) == TOP_K
    assert [t["time_us"] for t in outcome.top_k] == sorted(retimed[c] for c in kept)
    assert all(t["time_us"] == retimed[c] for t, c in zip(outcome.top_k, kept, strict=True))
    assert outcome.best_time_us == min(retimed[c] for c in kept)


@pytest.mark.parametrize("x_transposed", [False, True])
def test_a_layer_problem_times_the_dense_layer_its_fallback_runs(dev, x_transposed):
    """The dense baseline of a layer's problem is what ``dense_fallback`` would run instead:
    ``F.linear`` on X^T, giving Y (N x M), not W @ X."""
    import torch.nn as nn

    import stuning

    model = nn.Sequential(nn.Linear(40, 24))
    stuning.sparsify(model, sparsity=0.8, min_size=0)
    problem = model[0].sparse_weight.tuning_problem(16, device=dev, x_transposed=x_transposed, y_transposed=True)
    y = problem.dense_run()
    assert y.shape == (16, 24) and y.is_contiguous()
    assert_close(y.t(), problem.reference.double(), 1e-2)
