"""pretune: one tuning per distinct database key, resumable, and what the layers then look up."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import stuning
import stuning.tuning.driver as driver
from stuning.nn.examples import tiny_encoder
from stuning.ops.selection import SELECTOR
from stuning.tuning.session import key_for

TOKENS = [16, 40]



def _twin_model() -> nn.Module:
    """Two layers with the same weight (one database key per token count) and a different one."""
    first = nn.Linear(64, 64)
    model = nn.Sequential(first, nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 48))
    model[2].load_state_dict(first.state_dict())
    stuning.sparsify(model, sparsity=0.8, min_size=0)
    return model


def _entries(path) -> dict:
    return json.loads(path.read_text())["entries"]


def test_tunes_each_key_once_then_skips_everything(db_dir):
    model = _twin_model()
    report = stuning.pretune(model, tokens=TOKENS, strategy="model", device="h100", progress=False)
    assert (report.tuned, report.skipped, report.unsupported) == (4, 0, 0)
    shared = [p for p in report.problems if p.shape == (64, 64)]
    assert all(p.layers == ["0", "2"] for p in shared) and {p.tokens for p in shared} == set(TOKENS)
    stored = _entries(db_dir / "nvidia-h100-sxm.json")
    assert set(stored) == {p.key for p in report.problems}
    assert all(not e["measured"] and e["tuner"]["strategy"] == "model" for e in stored.values())

    again = stuning.pretune(model, tokens=TOKENS, strategy="model", device="h100", progress=False)
    assert (again.tuned, again.skipped) == (0, 4)
    assert [p.config for p in again.problems] == [p.config for p in report.problems]


def test_an_interrupted_run_keeps_what_it_finished(db_dir, monkeypatch, interrupt_second_tune):
    model = tiny_encoder()
    stuning.sparsify(model, sparsity=0.8, min_size=0)
    with pytest.raises(KeyboardInterrupt):
        stuning.pretune(model, tokens=TOKENS, db=db_dir / "mine", strategy="model", progress=False)
    (written,) = (db_dir / "mine").glob("*.json")
    assert len(_entries(written)) == 1
    monkeypatch.setattr(driver, "tune_problem", interrupt_second_tune)
    resumed = stuning.pretune(model, tokens=TOKENS, db=db_dir / "mine", strategy="model", progress=False)
    assert resumed.skipped == 1 and resumed.tuned == len(resumed.problems) - 1
    assert len(_entries(written)) == len(resumed.problems)


@pytest.mark.parametrize("shared", [False, True])
def test_max_seconds_leaves_the_rest_for_a_rerun(db_dir, shared):
    # The first problem always starts; past the limit, the others are left, reported, and not stored.
    model = _twin_model()
    options = {"workers": 1} if shared else {}
    report = stuning.pretune(model, tokens=TOKENS, strategy="model", device="h100", progress=False,
                             max_seconds=1e-9, **options)
    assert (report.tuned, report.not_started, report.failed) == (1, 3, 0)
    assert report.to_dict()["not_started"] == 3
    stored = _entries(db_dir / "nvidia-h100-sxm.json")
    assert set(stored) == {p.key for p in report.problems if p.status == "tuned"}
    again = stuning.pretune(model, tokens=TOKENS, strategy="model", device="h100", progress=False, **options)
    assert (again.tuned, again.skipped, again.not_started) == (3, 1, 0)


def test_a_problem_that_cannot_be_tuned_does_not_stop_the_others(db_dir, monkeypatch):
    real = driver.tune_problem

    def no_config_for_16(problem, **kwargs):
        if problem.features["n"] == 16:
            raise ValueError("no valid spmm config")
        return real(problem, **kwargs)

    monkeypatch.setattr(driver, "tune_problem", no_config_for_16)
    report = stuning.pretune(_twin_model(), tokens=TOKENS, strategy="model", progress=False)
    assert (report.failed, report.tuned) == (2, 2)
    assert all(p.note == "no valid spmm config" for p in report.problems if p.status == "failed")


def test_layers_look_up_the_tuned_entries(db_dir):
    model = _twin_model()
    stuning.pretune(model, tokens=[16], strategy="model", progress=False, check=False)  # this device's db
    weight = model[0].sparse_weight
    assert model[0].reads_x_transposed(16)  # 16 x 64 fp32: a small X, read through a view, tuned so
    features = weight.features(16, x_transposed=True)
    assert SELECTOR.choose(features, key_for(features))[1] == "exact"
    assert key_for(features) != key_for(weight.features(16))
    with torch.no_grad():
        assert model(torch.randn(16, 64)).shape == (16, 48)


def test_2_4_layers_look_up_the_entries_of_the_layout_they_read(db_dir):
    # The layer hands the 2:4 kernels X^T as a view; pretune must time (and key) that, not a copy.
    model = nn.Sequential(nn.Linear(64, 32)).half()
    stuning.sparsify(model, sparsity=0.5, pattern="2:4", min_size=0)
    stuning.pretune(model, tokens=[1, 16], strategy="model", progress=False, check=False)
    layer = model[0]
    assert not layer.reads_x_transposed(1) and layer.reads_x_transposed(16)
    viewed = layer.sparse_weight.features(16, x_transposed=True)
    assert "bt=1" in key_for(viewed) and SELECTOR.choose(viewed, key_for(viewed))[1] == "exact"
    one_token = layer.sparse_weight.features(1)
    assert SELECTOR.choose(one_token, key_for(one_token))[1] == "exact"


def test_unsupported_dtypes_are_reported_not_tuned(db_dir):
    model = nn.Sequential(nn.Linear(64, 32))
    stuning.sparsify(model, sparsity=0.5, pattern="2:4", min_size=0)
    report = stuning.pretune(model, tokens=[16], strategy="model", progress=False)
    assert report.unsupported == 1 and "no torch.float32" in report.problems[0].note
    half = stuning.pretune(model, tokens=[16], strategy="model", dtype=torch.float16, progress=False)
    assert half.tuned == 1 and half.problems[0].dtype == "float16"


@pytest.mark.parametrize(
    "model,kwargs,error,match",
    [
        (nn.Sequential(nn.Linear(8, 8)), {}, ValueError, "no sparse layers"),
        (None, {"tokens": [0, 16]}, ValueError, "positive integers"),
        pytest.param(None, {"strategy": "model+optuna"}, RuntimeError, "needs a CUDA GPU",
                     marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU can measure")),
    ],
)
def test_bad_requests_raise(db_dir, model, kwargs, error, match):
    with pytest.raises(error, match=match):
        stuning.pretune(model or _twin_model(), **{"strategy": "model", "progress": False, **kwargs})


def test_a_measured_pretune_reports_each_problem_against_its_dense_layer(db_dir, fake_measuring):
    from stuning.tuning.search import Budget

    fake_measuring.extend([4.0, 10.0, 20.0, 2.5])  # configs all time at 5 us
    model = _twin_model()
    report = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False)
    assert report.tuned == 4
    assert sorted(p.speedup_vs_dense for p in report.problems) == [0.5, 0.8, 2.0, 4.0]
    assert all(p.to_dict()["speedup_vs_dense"] == p.speedup_vs_dense for p in report.problems)
    again = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False)
    assert again.skipped == 4 and [p.dense_us for p in again.problems] == [p.dense_us for p in report.problems]


@pytest.mark.parametrize("shared", [False, True])
def test_a_measured_pretune_refits_the_cost_model_on_what_it_stored(db_dir, fake_measuring, shared):
    from stuning.tuning.search import Budget

    model = _twin_model()
    stuning.pretune(model, tokens=TOKENS, strategy="model", progress=False, check=False)  # predictions: no refit
    (path,) = db_dir.glob("*.json")
    assert "spmm" not in json.loads(path.read_text()).get("model_coefficients", {})
    options = {"workers": 1} if shared else {}
    fake_measuring.extend([10.0] * 4)  # the dense baselines
    report = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False, **options)
    assert report.tuned == 4
    fit = json.loads(path.read_text())["model_coefficients"]["spmm"]
    # Fitted on the stored entries' timed configs (at least one a problem), as `stuning tune` does.
    assert fit["fitted_on"] >= 4 and fit["effects"]


def test_measurements_of_an_older_timer_are_tuned_again(db_dir, fake_measuring):
    from stuning.tuning.search import Budget
    from stuning.tuning.timing import TIMER_REVISION

    model = _twin_model()
    stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False)
    (path,) = db_dir.glob("*.json")
    doc = json.loads(path.read_text())
    assert {e["env"]["timer"] for e in doc["entries"].values()} == {TIMER_REVISION}
    for e in doc["entries"].values():
        del e["env"]["timer"]  # as entries timed before the timer had revisions (warm-L2 graphs)
    path.write_text(json.dumps(doc))
    SELECTOR.reset()
    again = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False)
    assert (again.tuned, again.skipped) == (4, 0)
    assert {e["env"]["timer"] for e in _entries(path).values()} == {TIMER_REVISION}
    third = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False)
    assert (third.tuned, third.skipped) == (0, 4)


@pytest.mark.parametrize("shared", [False, True])
def test_refresh_tunes_answered_problems_again_from_their_stored_configs(db_dir, fake_measuring, monkeypatch, shared):
    from stuning.tuning.search import Budget

    model = _twin_model()
    first = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False)
    assert first.tuned == 4
    (path,) = db_dir.glob("*.json")
    stored = {k: e["top_k"][0]["config"] for k, e in _entries(path).items()}
    seeds = []
    real = driver.tune_problem

    def spy(problem, **options):
        seeds.append(options["db"].get(key_for(problem.features)).top_k[0].config)
        return real(problem, **options)

    monkeypatch.setattr(driver, "tune_problem", spy)
    SELECTOR.reset()
    options = {"workers": 1} if shared else {}
    again = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False, refresh=True, **options)
    assert (again.tuned, again.skipped) == (4, 0)
    assert sorted(map(str, seeds)) == sorted(map(str, stored.values()))  # each search saw its stored entry
    plain = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False, **options)
    assert (plain.tuned, plain.skipped) == (0, 4)


def test_problems_whose_search_never_tried_a_kernel_are_tuned_again(db_dir, fake_measuring):
    """After an upgrade adds a kernel to a problem's space, a stored measurement no longer answers."""
    from stuning.tuning.search import Budget

    model = _twin_model()
    assert stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False).tuned == 4
    (path,) = db_dir.glob("*.json")
    doc = json.loads(path.read_text())
    kernels = {tuple(e["tuner"]["kernels"]) for e in doc["entries"].values()}
    assert len(kernels) == 1 and "sell" in next(iter(kernels))
    (k1, e1), (k2, e2), (k3, e3), (k4, e4) = sorted(doc["entries"].items())
    e1["tuner"]["kernels"] = [k for k in e1["tuner"]["kernels"] if k != "sell"]  # searched without sell
    del e2["tuner"]["kernels"]
    e2["updated"] = "2026-11-22T00:00:00+00:00"  # no record, tuned before sell joined (2026-11-23)
    del e3["tuner"]["kernels"]  # no record, tuned after every kernel of its space joined
    path.write_text(json.dumps(doc))
    SELECTOR.reset()
    again = stuning.pretune(model, tokens=TOKENS, budget=Budget(max_trials=2), progress=False)
    assert (again.tuned, again.skipped) == (2, 2)
    assert {p.key for p in again.problems if p.status == "tuned"} == {k1, k2}
    entries = _entries(path)
    assert entries[k1]["tuner"]["kernels"] == entries[k4]["tuner"]["kernels"] == entries[k2]["tuner"]["kernels"]
    assert "kernels" not in entries[k3]["tuner"]


@pytest.mark.gpu
def test_measured_pretune_on_the_gpu_then_skipped(db_dir, monkeypatch):
    from stuning.tuning.search import Budget

    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 512)).half().cuda()
    stuning.sparsify(model, sparsity=0.9, min_size=0)
    budget = Budget(max_trials=3, max_seconds=10)
    report = stuning.pretune(model, tokens=[16, 128], db=db_dir / "gpu", budget=budget, progress=False)
    assert report.tuned == 4 and all(p.measured and p.time_us > 0 for p in report.problems)
    assert all(p.dense_us > 0 and p.speedup_vs_dense == p.dense_us / p.time_us for p in report.problems)
    again = stuning.pretune(model, tokens=[16, 128], db=db_dir / "gpu", budget=budget, progress=False)
    assert again.skipped == 4
    assert [p.dense_us for p in again.problems] == [p.dense_us for p in report.problems]  # from the database
    with torch.no_grad():
        x = torch.randn(128, 512, device="cuda", dtype=torch.float16)
        assert model(x).shape == (128, 512)
    # With dense_fallback, a layer runs dense exactly at the (layer, tokens) pretune timed dense faster.
    # Serving reads the pretuned directory the way pretune's docstring says: through $STUNING_DB_DIR.
    monkeypatch.setenv("STUNING_DB_DIR", str(db_dir / "gpu"))
    SELECTOR.reset()
    for layer in (model[0], model[2]):
        layer.dense_fallback = True
    for tokens in (16, 128):
        slower = {p.shape: p.speedup_vs_dense < 1 for p in report.problems if p.tokens == tokens}
        assert {layer.sparse_weight.shape: layer._dense_is_faster(tokens) for layer in (model[0], model[2])} == slower
        x = torch.randn(tokens, 512, device="cuda", dtype=torch.float16)
        with torch.no_grad():
            y = model(x)
        ref = torch.relu(x.float() @ model[0].dense_weight().float().t() + model[0].bias.float())
        ref = ref @ model[2].dense_weight().float().t() + model[2].bias.float()
        assert (y.float() - ref).norm() / ref.norm() < 1e-2


def test_tuning_writes_y_as_the_layer_does(monkeypatch):
    """SparseLinear writes Y^T through a transposed out=; its tuning problems run and check the
    kernel the same way, so a fault of that path alone (the 2:4 split-K race of BENCHMARKS.md 7p)
    fails the check instead of being timed."""
    from stuning.nn import weights
    from stuning.nn.pretune import collect_problems
    from stuning.tuning.objective import KernelObjective
    from stuning.tuning.search import TrialFailure

    model = nn.Sequential(nn.Linear(64, 48))
    stuning.sparsify(model, sparsity=0.8, min_size=0)
    conv = stuning.nn.SparseConv2d.from_conv(nn.Conv2d(8, 16, 3), "csr")
    assert model[0].writes_y_transposed() and not conv.writes_y_transposed()
    problems, held = collect_problems(model, [16])
    assert [p.y_transposed for p in problems] == [True]
    problem = held[problems[0].key].tuning_problem(16, y_transposed=True)
    config = stuning.kernels.spmm.heuristic(stuning.kernels.spmm.SpMMProblem(48, 64, 16, 600, torch.float32))
    y = problem.run(config)
    assert y.shape == (48, 16) and y.stride() == (1, 48)
    KernelObjective(problem).check(config)

    def wrong_when_transposed(*args, out=None, **kwargs):
        y = real_spmm(*args, out=out, **kwargs)
        if out is not None and not out.is_contiguous():
            y[: y.shape[0] // 2] = 0  # rows lost only on the transposed path
        return y

    real_spmm = weights.spmm
    monkeypatch.setattr(weights, "spmm", wrong_when_transposed)
    contiguous = held[problems[0].key].tuning_problem(16)
    KernelObjective(contiguous).check(config)  # the old way: passes
    with pytest.raises(TrialFailure, match="relative error"):
        KernelObjective(problem).check(config)
