"""Shared test setup.

Without a GPU the kernels run through Triton's interpreter, which is chosen when the kernels are
defined: ``TRITON_INTERPRET=1`` is set here, before any test module imports stuning. Tests marked
``gpu`` are skipped without a CUDA device.

Every test gets its own seed, derived from its node id (plus ``STUNING_TEST_SEED`` if set), so its
random inputs differ from every other test's but are the same each run: a failure reproduces with
the same command. A failing test's report shows its seed.
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# naive.py sits beside this file; make `import naive` work however pytest was started.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402

HAS_CUDA = torch.cuda.is_available()


def pytest_configure(config):
    for spec in (
        # Triton 3.6's interpreter converts 1-element arrays to scalars, which NumPy deprecates.
        "ignore:Conversion of an array with ndim > 0 to a scalar:DeprecationWarning",
        "ignore:Sparse CSR tensor support is in beta state:UserWarning",
        "ignore:Sparse invariant checks are implicitly disabled:UserWarning",
    ):
        config.addinivalue_line("filterwarnings", spec)


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _isolated_tuning_db(tmp_path_factory):
    """Default configs (``config=None``) come from the shipped tuning database, the cost model or the
    heuristic, never from this user's tuning cache or $STUNING_DB_DIR, and what the library writes
    (e.g. the misses flushed at exit) goes to a temporary directory: runs are reproducible anywhere."""
    try:
        from stuning.db import paths
        from stuning.ops.selection import SELECTOR
    except ImportError:  # a library without a tuning database
        yield
        return
    cache = tmp_path_factory.mktemp("stuning-user-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(paths.ENV_DB_DIR, raising=False)
        mp.setattr(paths, "user_cache_dir", lambda: cache)
        SELECTOR.reset()  # opened (with its write directory) afresh, inside the patch
        yield


def _seed_of(nodeid: str) -> int:
    extra = int(os.environ.get("STUNING_TEST_SEED", "0"))
    return (zlib.crc32(nodeid.encode()) + extra) % 2**31


@pytest.fixture
def seed(request) -> int:
    s = _seed_of(request.node.nodeid)
    request.node.stuning_seed = s
    return s


@pytest.fixture
def gen(seed) -> torch.Generator:
    """A fresh CPU generator seeded for this test."""
    return torch.Generator(device="cpu").manual_seed(seed)


@pytest.fixture
def db_dir(tmp_path, monkeypatch):
    """A tuning-database directory of the test's own ($STUNING_DB_DIR), and no config chosen before."""
    from stuning.ops.selection import SELECTOR

    path = tmp_path / "db"
    path.mkdir()
    monkeypatch.setenv("STUNING_DB_DIR", str(path))
    SELECTOR.reset()
    yield path
    SELECTOR.reset()


@pytest.fixture
def uncapped_effects(monkeypatch):
    """Predictions take config effects whole: for tests of what a fit learns (effects of 3x, beyond
    the cap a prediction applies, cost_model.base.EFFECT_CAP)."""
    from stuning.tuning.cost_model import base

    monkeypatch.setattr(base, "EFFECT_CAP", float("inf"))


@pytest.fixture
def isolated_db_dirs(tmp_path, monkeypatch):
    """Every test gets its own cache and shipped directories and no override, and may warn afresh."""
    from stuning.db import paths, tuning_db
    from stuning.tuning.session import reference_coefficients

    monkeypatch.delenv(paths.ENV_DB_DIR, raising=False)
    monkeypatch.setattr(paths, "user_cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(paths, "shipped_dir", lambda: tmp_path / "shipped")
    monkeypatch.setattr(tuning_db, "_stale_warned", False)
    # Read from the shipped directory once and cached: read inside the patch, it would keep the empty
    # temporary one's nothing for the tests after (test_model_check then found no SpMM fit).
    reference_coefficients.cache_clear()
    yield
    reference_coefficients.cache_clear()


@pytest.fixture
def fake_measuring(monkeypatch):
    """The driver's measuring path on a CPU: every config times at 5 us and the dense baselines
    take the times the test appends to the returned list, in order (no GPU, nothing checked)."""
    import stuning.tuning.driver as driver

    class FiveMicroseconds:
        def __init__(self, problem):
            pass

        def __call__(self, config):
            return 5.0

    dense_times: list[float] = []
    monkeypatch.setattr(driver, "can_measure", lambda: True)
    monkeypatch.setattr(driver, "measuring_device", lambda: "cpu")
    monkeypatch.setattr(driver, "KernelObjective", FiveMicroseconds)
    monkeypatch.setattr(driver, "precompile", lambda *a, **k: 0)
    monkeypatch.setattr(driver, "bench_us", lambda fn: (dense_times.pop(0), "do_bench"))
    monkeypatch.setattr("stuning.tuning.tuner.retime_alternating", lambda fns, **k: dict.fromkeys(fns, 5.0))
    return dense_times


@pytest.fixture
def interrupt_second_tune(monkeypatch):
    """The driver's tune_problem as Ctrl-C during the second problem: the first tunes, the second
    raises KeyboardInterrupt. Returns the real function (to restore it for a resumed run)."""
    import stuning.tuning.driver as driver

    real, calls = driver.tune_problem, []

    def interrupted(*args, **kwargs):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "tune_problem", interrupted)
    return real


@pytest.fixture
def device() -> str:
    return "cuda" if HAS_CUDA else "cpu"


@pytest.fixture
def device_gen(seed, device) -> torch.Generator:
    """A fresh generator on the test device (random inputs made where they are used)."""
    return torch.Generator(device=device).manual_seed(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    s = getattr(item, "stuning_seed", None)
    if s is not None and report.failed:
        report.sections.append(("seed", f"seed {s} (from the node id; STUNING_TEST_SEED shifts it)"))
