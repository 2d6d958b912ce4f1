"""A tuner stand-in for the database concurrency tests, run as its own process.

    python db_writer_proc.py write DIR WRITER_ID N_KEYS N_WRITERS
        waits until N_WRITERS writers are ready, then puts N_KEYS distinct keys into DIR's database,
        saving after each put, plus one key every writer shares (writer i times it at i + 1 us).
    python db_writer_proc.py check-imports
        imports stuning.db and fails if that loaded triton or torch.

It imports stuning.db without running stuning/__init__.py (which loads torch and the kernels): that
keeps each process's start under a second, and shows the database needs neither.
"""

from __future__ import annotations

import importlib
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEVICE = "Test GPU 80GB"
TRITON = "3.0.0"
SHARED_KEY = "spmm|float16|shared"


def import_db_alone():
    if "stuning" not in sys.modules:
        package = types.ModuleType("stuning")
        package.__path__ = [str(REPO / "stuning")]
        sys.modules["stuning"] = package
    return importlib.import_module("stuning.db")


def wait_for_peers(directory: Path, writer: int, writers: int, timeout_s: float = 60.0) -> None:
    # Start together, so that the saves really interleave.
    (directory / f"ready-{writer}").touch()
    deadline = time.monotonic() + timeout_s
    while len(list(directory.glob("ready-*"))) < writers:
        if time.monotonic() > deadline:
            raise TimeoutError("the other writers did not start")
        time.sleep(0.01)


def write(directory: Path, writer: int, n_keys: int, writers: int) -> None:
    db_module = import_db_alone()
    env = db_module.Environment(DEVICE, triton=TRITON, torch="2.5.0")
    db = db_module.TuningDB.open(DEVICE, search_path=[directory], env=env)
    wait_for_peers(directory, writer, writers)
    for i in range(n_keys):
        entry = db_module.DBEntry(
            op="spmm", dtype="float16", features={"m": 64 * (i + 1), "writer": writer},
            best=db_module.TimedConfig({"BLOCK_M": 16, "i": i}, 10.0 + i), env=env.entry_env(),
        )
        db.put(entry, f"spmm|float16|writer={writer}|i={i}")
        if i == n_keys // 2:
            shared = db_module.DBEntry(
                op="spmm", dtype="float16", features={"m": 1},
                best=db_module.TimedConfig({"writer": writer}, float(writer + 1)), env=env.entry_env(),
            )
            db.put(shared, SHARED_KEY)
        db.save()


def check_imports() -> None:
    import_db_alone()
    loaded = sorted(name for name in ("triton", "torch") if name in sys.modules)
    if loaded:
        sys.exit(f"importing stuning.db loaded {', '.join(loaded)}")


if __name__ == "__main__":
    if sys.argv[1] == "check-imports":
        check_imports()
    else:
        write(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
