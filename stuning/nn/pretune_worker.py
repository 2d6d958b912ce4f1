"""One pretune worker: claims problems through the shared Optuna storage and tunes them until none is
left. ``pretune(..., workers=N)`` runs N of these as processes (``python -m stuning.nn.pretune_worker
SPEC INDEX``, one per GPU); with one worker, or on a machine joining another's run, it runs in the
calling process.

A worker keeps going until every problem of its list is done or given up, by anyone: while a problem
is held by a live worker elsewhere it waits, so that if that worker dies (its heartbeats stop) this
one takes the problem over and resumes its search from the trials stored in the same storage.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from stuning.nn.pretune import DONE, FAILED, TUNED, PretuneProblem, tune_one
from stuning.nn.weights import SparseWeight
from stuning.tuning import claims
from stuning.tuning.claims import ClaimBoard, Lease
from stuning.tuning.optuna_storage import namespace, open_storage, search_study_name


@dataclass
class WorkerSpec:
    """What a worker needs, pickled for worker processes (``torch.save``)."""

    problems: list[PretuneProblem]  # only those still to tune
    weights: dict[str, SparseWeight]  # key -> the weight it is tuned on
    storage: str  # the Optuna storage's URL
    space: str  # the claims' namespace (device and strategy)
    db_device: str | None  # open_db's device: a named target for model-only tuning, else None (this GPU)
    db_search_path: list[str]
    db_write_dir: str
    strategy: str
    budget: object  # a Budget or None
    check: bool
    seed: int
    lease: Lease
    refresh: bool = False  # search again problems the database answers
    deadline: float | None = None  # time.time() after which the worker claims nothing new (its first excepted)


def run_worker(spec: WorkerSpec, *, label: str = "worker",
               on_settled: Callable[[PretuneProblem], None] | None = None) -> None:
    """Claim and tune ``spec.problems`` until each is done or given up (by any worker), or until
    ``spec.deadline``; ``on_settled(problem)`` is called as each leaves the list (a progress bar)."""
    import optuna

    from stuning.kernels.target import interpreting
    from stuning.tuning.driver import can_measure, measuring_device
    from stuning.tuning.search import STRATEGIES
    from stuning.tuning.session import open_db

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # it logs every study created: two per problem
    storage = open_storage(spec.storage)
    board = ClaimBoard(storage, spec.space, lease=spec.lease, worker=f"{label} {os.uname().nodename}:{os.getpid()}")
    db = open_db(spec.db_device, search_path=spec.db_search_path, write_dir=spec.db_write_dir)
    if namespace(db.device_name, spec.strategy) != spec.space:
        # GPUs of different models in one machine: this one's timings would go into another's database.
        raise RuntimeError(f"{label}: its device is a {db.device_name}, but the run tunes for {spec.space}; "
                           "set CUDA_VISIBLE_DEVICES to GPUs of one model")
    measuring = STRATEGIES[spec.strategy].measures
    options = {
        "strategy": spec.strategy, "budget": spec.budget, "device_name": spec.db_device, "seed": spec.seed,
        "check": spec.check and (can_measure() or interpreting()), "run_device": measuring_device(),
        "refresh": spec.refresh,
    }
    settled = on_settled or (lambda problem: None)
    poll_s = min(1.0, spec.lease.heartbeat_s)
    todo = {p.key: p for p in spec.problems}
    claimed_any = False
    while todo:
        snapshot = board.snapshot()
        took = False
        if claimed_any and spec.deadline is not None and time.time() > spec.deadline:
            # pretune's max_seconds: what is left stays unclaimed, and the coordinator reports it.
            return
        for key, problem in list(todo.items()):
            status = board.status(snapshot.get(key))
            if status in (claims.DONE, claims.FAILED):
                del todo[key]
                settled(problem)
                continue
            if status == claims.BUSY:
                continue
            claim = board.try_claim(key, snapshot.get(key))
            if claim is None:  # another worker took this attempt a moment ago
                continue
            _tune_claimed(claim, problem, spec.weights[key], db, measuring, spec, options)
            claimed_any = True
            del todo[key]
            settled(problem)
            took = True
            break  # time has passed: read the board again before choosing the next problem
        if todo and not took:
            time.sleep(poll_s)


def _tune_claimed(claim, problem: PretuneProblem, weight: SparseWeight, db, measuring: bool, spec: WorkerSpec,
                  options: dict) -> None:
    strategy_options = None
    if spec.strategy == "model+optuna":
        strategy_options = {"storage": claim.storage, "study_name": search_study_name(spec.space, problem.key)}
    start = time.perf_counter()
    try:
        tune_one(problem, weight, db, measuring, strategy_options=strategy_options, **options)
    except (KeyboardInterrupt, SystemExit):
        claim.release()
        raise
    except Exception as e:  # a bug or a problem that cannot be built here: retrying it elsewhere would fail alike
        claim.finish(claims.FAILED, note=f"{type(e).__name__}: {' '.join(str(e).split())[:200]}",
                     seconds=time.perf_counter() - start)
        return
    if problem.status in (TUNED, DONE):
        claim.finish(claims.DONE, entry=db.get(problem.key).to_json(), seconds=time.perf_counter() - start)
    else:
        assert problem.status == FAILED, problem.status
        claim.finish(claims.FAILED, note=problem.note, seconds=time.perf_counter() - start)


def _interrupt(signum, frame) -> None:
    # One interrupt per worker: a Ctrl-C reaches it from the terminal and again from the coordinator
    # (same process group); a second KeyboardInterrupt would cut short the claim's release, leaving
    # the problem to wait out the lease and counting a death against it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # still a way to end a worker stuck giving its problem back
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """SIGINT or SIGTERM (a scheduler's kill) interrupts the worker once, so it gives its problem
    back; a SIGINT after the first is ignored while it does (a SIGTERM then ends it)."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def main(argv: list[str]) -> int:
    import torch

    if len(argv) != 2:
        print("usage: python -m stuning.nn.pretune_worker SPEC_FILE INDEX", file=sys.stderr)
        return 2
    # Results travel through the storage; stdout stays the coordinator's (its --json output).
    os.dup2(2, 1)
    stop_on_signals()
    spec = torch.load(argv[0], weights_only=False)
    try:
        run_worker(spec, label=f"worker {argv[1]}")
    except KeyboardInterrupt:  # the coordinator stopping its workers; a problem held was given back
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
