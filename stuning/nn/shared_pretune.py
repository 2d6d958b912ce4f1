"""``pretune(..., workers=N, storage=URL)``: one model's problems tuned by many processes and machines.

The work list lives in an Optuna storage (``stuning.tuning.optuna_storage``): a claim per problem
with a heartbeat (``stuning.tuning.claims``), so no two workers tune the same problem and a dead
worker's problem is taken over once its lease expires (at once when the worker was one of this
process's, which sees it exit), and one Optuna study per problem holding its search, so the taker
resumes the trials instead of starting over. Every finished problem's database
entry is stored with its claim; at the end this process merges them all (its own workers', other
machines') into its database, under the database's file lock.

``workers=N`` starts N worker processes (``stuning.nn.pretune_worker``), worker i on GPU i of
``CUDA_VISIBLE_DEVICES`` (on a machine without a GPU, N processes on the CPU); ``workers="auto"`` or
0 means one per visible GPU (one without a GPU). Without ``storage`` the run uses a journal file in
a temporary directory (a rerun still skips what reached the database). With ``storage``, the same
call on other machines joins the run, and a rerun after an interruption resumes every search.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from stuning.db import DBEntry
from stuning.nn.pretune import (
    DONE,
    FAILED,
    LEFT,
    TUNED,
    UNSUPPORTED,
    PretuneProblem,
    PretuneReport,
    answers,
    past,
    pretune_progress,
    refit_after,
)
from stuning.nn.pretune_worker import WorkerSpec, run_worker
from stuning.nn.weights import SparseWeight
from stuning.tuning import claims
from stuning.tuning.claims import ClaimBoard, Lease, ProblemClaims
from stuning.tuning.optuna_storage import namespace, open_storage

STOP_WAIT_S = 30.0  # after an interrupt, how long workers get to give their problems back
# Heartbeats every 10 s, dead after a minute without one. Tests shorten it (a module constant, so
# that the worker processes get the coordinator's through their spec).
DEFAULT_LEASE = Lease()

log = logging.getLogger(__name__)


@dataclass
class SharedPretuneReport(PretuneReport):
    storage: str = ""  # the Optuna storage's URL, or what stood in for it
    workers: list[dict] = field(default_factory=list)  # this machine's worker processes: index, gpu, exit code
    lost: list[dict] = field(default_factory=list)  # attempts lost to dead workers in this run: key, attempt, worker

    def to_dict(self) -> dict:
        return {**super().to_dict(), "storage": self.storage, "workers": self.workers, "lost": self.lost}


def visible_gpus() -> list[str]:
    """The GPUs worker processes may be given, as ``CUDA_VISIBLE_DEVICES`` names them; none without CUDA."""
    from stuning.tuning.driver import can_measure

    if not can_measure():
        return []
    count = torch.cuda.device_count()
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def worker_count(workers) -> int:
    """``workers`` as a number of processes: "auto" or 0 is one per visible GPU (one without a GPU);
    None is one, in the calling process."""
    if workers is None:
        return 1
    gpus = visible_gpus()
    if workers in ("auto", 0, "0"):
        return max(1, len(gpus))
    try:
        count = int(workers)
    except (TypeError, ValueError):
        raise ValueError(f"pretune: workers must be a positive integer or 'auto', got {workers!r}") from None
    if count < 1:
        raise ValueError(f"pretune: workers must be a positive integer or 'auto', got {workers!r}")
    if gpus and count > len(gpus):
        raise ValueError(f"pretune: {count} workers but {len(gpus)} GPUs visible: workers sharing a GPU would "
                         "time each other's kernels")
    return count


def pretune_shared(model: nn.Module, problems: list[PretuneProblem], weights: dict[str, SparseWeight], tuning_db, *,
                   strategy: str, budget, device_name: str | None, check: bool, progress: bool, seed: int,
                   workers=1, storage: str | None = None, refresh: bool = False,
                   max_seconds: float | None = None) -> SharedPretuneReport:
    """Tune ``problems`` (from ``collect_problems``) with ``workers`` processes sharing ``storage``;
    what ``pretune`` runs when given ``workers`` or ``storage``."""
    from stuning.ops.selection import SELECTOR
    from stuning.tuning.search import STRATEGIES

    count = worker_count(workers)
    lease = DEFAULT_LEASE
    measuring = STRATEGIES[strategy].measures
    start = time.perf_counter()
    report = SharedPretuneReport(strategy, tuning_db.device_name, str(tuning_db.write_path), problems,
                                 storage=storage or "a temporary journal file")
    todo = []
    for p in problems:
        held = tuning_db.get(p.key)
        if p.status == UNSUPPORTED:
            continue
        if answers(held, measuring, refresh):
            p.fill_from(held, DONE)
        else:
            todo.append(p)
    with _storage_url(storage) as url:
        board = ClaimBoard(open_storage(url), namespace(tuning_db.device_name, strategy), lease=lease)
        before = board.snapshot()
        spec = WorkerSpec([copy.copy(p) for p in todo], {p.key: weights[p.key] for p in todo}, url, board.space,
                          device_name, [str(d) for d in tuning_db.search_path], str(tuning_db.write_path.parent),
                          strategy, budget, check, seed, lease, refresh,
                          None if max_seconds is None else time.time() + max_seconds)
        if count == 1 or not todo:  # in this process: nothing to start (or nothing to do)
            with pretune_progress(progress and bool(todo)) as bar:
                task = bar.add_task(f"pretune ({strategy})", total=len(todo))
                run_worker(spec, label="worker 0", on_settled=lambda p: bar.advance(task))
        else:
            report.workers = _run_local_workers(spec, count, board, progress)
        after = board.snapshot()
    for p in todo:
        _settle(p, after.get(p.key), before.get(p.key), board, tuning_db, timed_out=past(start, max_seconds))
    report.lost = _lost(todo, before, after, lease)
    tuning_db.save()
    refit_after(tuning_db, todo, measuring)
    report.seconds = time.perf_counter() - start
    if report.tuned or report.skipped:
        # Forget the configs chosen before this run, so the layers look the new entries up.
        SELECTOR.reset()
        from stuning.nn.pretune import sparse_layers

        for _, layer in sparse_layers(model):
            layer.sparse_weight.matrix.cache.clear()
    return report


@contextlib.contextmanager
def _storage_url(storage: str | None):
    if storage is not None:
        text = str(storage)
        # A journal path travels to worker processes, which may start elsewhere than the caller.
        yield text if "://" in text else str(Path(text.removeprefix("journal:")).expanduser().resolve())
        return
    with tempfile.TemporaryDirectory(prefix="stuning-pretune-") as tmp:
        yield str(Path(tmp) / "claims.journal")


def _run_local_workers(spec: WorkerSpec, count: int, board: ClaimBoard, progress: bool) -> list[dict]:
    """Run ``count`` worker processes until all exit; returns what became of each."""
    gpus = visible_gpus()
    keys = [p.key for p in spec.problems]
    # Each worker sees its GPU as cuda:0, so weights travel on the CPU (tuning copies them over).
    spec = dataclasses.replace(spec, weights={k: w.cast(device="cpu") for k, w in spec.weights.items()})
    with tempfile.TemporaryDirectory(prefix="stuning-workers-") as tmp:
        spec_path = Path(tmp) / "spec.pt"
        torch.save(spec, spec_path)
        procs = []
        for i in range(count):
            env = dict(os.environ)
            if gpus:
                env["CUDA_VISIBLE_DEVICES"] = gpus[i]
            procs.append(subprocess.Popen([sys.executable, "-m", "stuning.nn.pretune_worker", str(spec_path), str(i)],
                                          env=env))
        try:
            with _sigterm_interrupts():
                _wait(procs, board, keys, progress)
        except BaseException:
            _stop(procs)
            raise
    return [{"index": i, "gpu": gpus[i] if gpus else None, "pid": p.pid, "exit_code": p.returncode}
            for i, p in enumerate(procs)]


def _wait(procs: list[subprocess.Popen], board: ClaimBoard, keys: list[str], progress: bool) -> None:
    mourned: set[int] = set()
    with pretune_progress(progress) as bar:
        task = bar.add_task(f"pretune ({len(procs)} workers)", total=len(keys))
        while True:
            alive = sum(p.poll() is None for p in procs)  # polled first: a worker exiting now is mourned below
            try:
                for i, p in enumerate(procs):
                    if p.returncode not in (None, 0) and i not in mourned:
                        # Its problem goes to the others now, not when its lease runs out.
                        board.declare_dead(socket.gethostname(), p.pid, f"worker {i} exited with code {p.returncode}")
                        mourned.add(i)
                if not alive:
                    return
                snapshot = board.snapshot()
            except Exception as e:  # the storage unreachable a moment: the workers carry on, so does this loop
                if not alive:
                    return
                log.warning("pretune: reading the claims failed (%s: %s); retrying", type(e).__name__, e)
            else:
                finished = sum(board.status(snapshot.get(k)) in (claims.DONE, claims.FAILED) for k in keys)
                bar.update(task, completed=finished, description=f"pretune ({alive} of {len(procs)} workers running)")
            time.sleep(0.5)


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM (``kill``, a scheduler's time limit) stops the workers as Ctrl-C does, rather than
    ending this process at once and leaving them running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise SystemExit(128 + signum)  # the workers stopped, this process exits as killed by SIGTERM would

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop(procs: list[subprocess.Popen]) -> None:
    """Interrupt the workers (they give their problems back), then kill what has not exited in time."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_WAIT_S
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _settle(p: PretuneProblem, claimed: ProblemClaims | None, before: ProblemClaims | None, board: ClaimBoard,
            tuning_db, *, timed_out: bool = False) -> None:
    """``p``'s outcome from the storage; a finished entry goes into ``tuning_db`` whoever tuned it.
    ``timed_out``: the run's max_seconds passed, so an unfinished problem was left, not lost."""
    status = board.status(claimed)
    result = claimed.last.result if claimed and claimed.last else None
    if status == claims.DONE:
        result = claimed.done.result
        try:
            held = tuning_db.put(DBEntry.from_json(result["entry"]), p.key)
        except (KeyError, TypeError, ValueError) as e:  # e.g. written by another stuning version's schema
            p.status, p.note = FAILED, f"its entry in the storage is not valid here: {e}"[:200]
            return
        done_before = before is not None and board.status(before) == claims.DONE
        p.fill_from(held, DONE if done_before else TUNED)
        p.seconds = 0.0 if done_before else result.get("seconds", 0.0)
    elif status == claims.FAILED and result is not None:
        p.status, p.note = FAILED, result.get("note", "")
    elif status == claims.FAILED:
        p.status = FAILED
        p.note = f"its worker died {board.lease.max_deaths} times (a config may crash the process); given up"
    elif timed_out:
        p.status = LEFT
    else:
        p.status, p.note = FAILED, "no worker finished it (every worker stopped)"


def _lost(todo: list[PretuneProblem], before: dict, after: dict, lease: Lease) -> list[dict]:
    """The attempts of this run whose worker died (earlier runs' losses were reported by them)."""
    now = time.time()
    out = []
    for p in todo:
        claimed = after.get(p.key)
        if claimed is None:
            continue
        earlier = {a.number for a in before[p.key].lost(lease, now)} if p.key in before else set()
        for attempt in claimed.lost(lease, now):
            if attempt.number not in earlier:
                out.append({"key": p.key, "attempt": attempt.number, "worker": attempt.owner.get("worker", "?"),
                            "retried": attempt is not claimed.last})
    return out
