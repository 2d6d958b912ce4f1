"""Who tunes which problem: claims kept in an Optuna storage, with heartbeats, so that processes on
any number of machines share one list of problems without a scheduler.

A claim on attempt n of a problem is an Optuna study named after (namespace, key, n). Creating a
study whose name exists fails atomically in every Optuna storage (a unique column in RDB, the first
record in a journal's log), so exactly one process wins each attempt. The holder writes a heartbeat
(its wall-clock time) into the study's user attributes every few seconds and, at the end, its
result: ``done`` (with the database entry, so every machine can fill its own database from the
storage), ``failed`` (the problem cannot be tuned; nobody retries it) or ``released`` (interrupted
cleanly; anybody may take the next attempt at once). An attempt with no result and no heartbeat for
``Lease.expire_s`` belongs to a dead worker, as does one marked ``died`` by the process that saw its
worker exit (no need to wait for the lease then): the next process to look takes attempt n + 1,
until ``Lease.max_deaths`` attempts of one problem have died.

Heartbeats compare the holder's clock with the reader's: machines sharing a storage should keep
their clocks in step (NTP) to well within the lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field

from optuna.exceptions import DuplicatedStudyError
from optuna.study import StudyDirection

from stuning.tuning.optuna_storage import claim_study_name, parse_claim_study_name

DONE, FAILED, RELEASED, DIED, RUNNING = "done", "failed", "released", "died", "running"
FREE, BUSY = "free", "busy"  # what a problem is to a process looking for work (with DONE, FAILED)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    heartbeat_s: float = 10.0
    expire_s: float = 60.0  # no heartbeat for this long: the holder is dead
    max_deaths: int = 3  # attempts lost to dead workers before a problem is given up (a config may kill it)


@dataclass
class Attempt:
    key: str
    number: int
    study_id: int
    owner: dict  # {"worker", "host", "pid", "started"}
    heartbeat: float  # the holder's last sign of life (wall clock)
    result: dict | None  # {"state", "entry", "note", "seconds"} once finished

    @property
    def state(self) -> str:
        return self.result["state"] if self.result else RUNNING

    def stale(self, lease: Lease, now: float) -> bool:
        return self.result is None and now - self.heartbeat > lease.expire_s

    def dead(self, lease: Lease, now: float, last: bool) -> bool:
        """Its worker died: marked so, or unfinished and either superseded or out of heartbeats."""
        return self.state == DIED or (self.result is None and (not last or self.stale(lease, now)))


@dataclass
class ProblemClaims:
    """Every attempt at one problem that the storage holds, by number."""

    key: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def done(self) -> Attempt | None:
        """The last attempt that finished with an entry, if any. Usually the last attempt; an earlier
        one when its holder was taken for dead (a heartbeat starved past the lease) yet finished."""
        return next((a for a in reversed(self.attempts) if a.state == DONE), None)

    def lost(self, lease: Lease, now: float) -> list[Attempt]:
        """Attempts whose worker died."""
        return [a for a in self.attempts if a.dead(lease, now, a is self.last)]

    def status(self, lease: Lease, now: float) -> str:
        last = self.last
        if self.done is not None:  # an entry was stored: whatever became of a later attempt
            return DONE
        if last is None or last.state == RELEASED:
            return FREE
        if last.state == FAILED:
            return last.state
        if not last.dead(lease, now, True):
            return BUSY
        return FAILED if len(self.lost(lease, now)) >= lease.max_deaths else FREE


class Claim:
    """Attempt ``number`` at ``key``, held by this process, which heartbeats until ``finish``."""

    def __init__(self, storage, study_id: int, key: str, number: int, lease: Lease):
        self.storage, self.study_id, self.key, self.number = storage, study_id, key, number
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(lease.heartbeat_s,), daemon=True,
                                        name=f"heartbeat {key}#{number}")
        self._thread.start()

    def _beat(self, interval: float) -> None:
        failing = False
        while not self._stop.wait(interval):
            try:
                self.storage.set_study_user_attr(self.study_id, "heartbeat", time.time())
            except Exception as e:  # a storage hiccup; if it lasts, the lease expires and someone else retries
                if not failing:
                    log.warning("heartbeat of %s#%d not written (%s: %s); retrying", self.key, self.number,
                                type(e).__name__, e)
                failing = True
            else:
                failing = False

    def finish(self, state: str, *, entry: dict | None = None, note: str = "", seconds: float = 0.0) -> None:
        self._stop.set()
        self._thread.join()  # no heartbeat may follow the result
        result = {"state": state, "note": note, "seconds": round(seconds, 3), "finished": time.time()}
        if entry is not None:
            result["entry"] = entry
        self.storage.set_study_user_attr(self.study_id, "result", result)

    def release(self) -> None:
        """Give the problem back unfinished (an interrupt): the next process takes it at once."""
        self.finish(RELEASED, note="interrupted")


class ClaimBoard:
    """The claims of one namespace (device and strategy) in ``storage``, seen by worker ``worker``."""

    def __init__(self, storage, space: str, *, lease: Lease | None = None, worker: str | None = None):
        self.storage = storage
        self.space = space
        self.lease = lease or Lease()
        self.worker = worker or f"{socket.gethostname()}:{os.getpid()}"
        # A claim study exists a moment before its first heartbeat; its age is counted from when this
        # process first saw it, so that a holder that died in between still expires.
        self._first_seen: dict[tuple[str, int], float] = {}

    def snapshot(self) -> dict[str, ProblemClaims]:
        """Every problem claimed in this namespace (one read of the storage)."""
        out: dict[str, ProblemClaims] = {}
        now = time.time()
        for study in self.storage.get_all_studies():
            parsed = parse_claim_study_name(study.study_name, self.space)
            if parsed is None:
                continue
            key, number = parsed
            attrs = study.user_attrs
            heartbeat = attrs.get("heartbeat", self._first_seen.setdefault((key, number), now))
            attempt = Attempt(key, number, study._study_id, attrs.get("owner", {}), heartbeat, attrs.get("result"))
            out.setdefault(key, ProblemClaims(key)).attempts.append(attempt)
        for claims in out.values():
            claims.attempts.sort(key=lambda a: a.number)
        return out

    def status(self, claims: ProblemClaims | None) -> str:
        return FREE if claims is None else claims.status(self.lease, time.time())

    def declare_dead(self, host: str, pid: int, note: str) -> int:
        """Mark the unfinished attempts of process ``pid`` on ``host`` as died, so that others take
        them over now rather than when the lease expires; for a parent that saw the process exit.
        Returns how many were marked."""
        marked = 0
        for claims in self.snapshot().values():
            for a in claims.attempts:
                if a.result is None and a.owner.get("host") == host and a.owner.get("pid") == pid:
                    result = {"state": DIED, "note": note, "finished": time.time()}
                    self.storage.set_study_user_attr(a.study_id, "result", result)
                    marked += 1
        return marked

    def try_claim(self, key: str, claims: ProblemClaims | None) -> Claim | None:
        """Take the attempt after the last one in ``claims`` (what ``snapshot`` read), or None if
        another process took it first."""
        number = claims.last.number + 1 if claims and claims.last else 1
        try:
            study_id = self.storage.create_new_study([StudyDirection.MINIMIZE],
                                                     claim_study_name(self.space, key, number))
        except DuplicatedStudyError:
            return None
        owner = {"worker": self.worker, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        self.storage.set_study_user_attr(study_id, "owner", owner)
        self.storage.set_study_user_attr(study_id, "heartbeat", time.time())
        return Claim(self.storage, study_id, key, number, self.lease)
