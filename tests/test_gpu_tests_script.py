"""scripts/gpu_tests.sh: the GPU suite sharded side by side, the tests that time the GPU alone after.

Run here on the CPU the gpu-marked tests skip, which is enough to check how the script splits and
reports; on the GPU the same selection runs for real.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "gpu_tests.sh"

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("split") is None, reason="needs bash and coreutils' split"
)


def _run(tmp_path, *selection, **env):
    return subprocess.run(
        ["bash", str(SCRIPT), *selection],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**_base_env(), "OUT": str(tmp_path), "PYTHON": sys.executable, **env},
    )


def _base_env():
    env = dict(os.environ)
    env.pop("PHASE_OUT", None)  # it would take precedence over OUT
    return env


def test_shards_the_selection_and_runs_the_timing_tests_alone(tmp_path):
    proc = _run(tmp_path, "tests/test_nn.py", "tests/test_timing.py", GPU_TEST_SHARDS="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shards = sorted(tmp_path.glob("shard*.log"))
    assert [p.name for p in shards] == ["shard00.log", "shard01.log"]
    # Each shard got its share of the selection and none of tests/test_timing.py; the timing tests
    # ran on their own.
    shard_text = "".join(p.read_text() for p in shards)
    assert "test_timing" not in shard_text
    counts = [_ran(p.read_text()) for p in shards]
    assert sum(counts) == len(_collected("tests/test_nn.py"))
    assert _ran((tmp_path / "timed.log").read_text()) == len(_collected("tests/test_timing.py"))
    assert "shard00.log:" in proc.stdout and "timed.log:" in proc.stdout


def test_a_selection_without_gpu_tests_fails_with_a_message(tmp_path):
    proc = _run(tmp_path, "tests/test_formats.py")
    assert proc.returncode == 1
    assert "collected no tests" in proc.stderr


def test_a_shard_killed_at_its_time_limit_fails_the_run(tmp_path):
    proc = _run(tmp_path, "tests/test_nn.py", GPU_TEST_SHARDS="1", GPU_TEST_SECONDS="1")
    assert proc.returncode == 1
    assert "no pytest summary" in proc.stdout


def _collected(path):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p", "no:cacheprovider", path],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return [line for line in out.splitlines() if "::" in line]


def _ran(log):
    """Tests a pytest log's summary line counts (passed, skipped or failed)."""
    summary = log.strip().splitlines()[-1]
    return sum(int(n) for n in re.findall(r"(\d+) (?:passed|skipped|failed)", summary))
