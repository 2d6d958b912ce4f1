"""The synthetic timer of the multi-worker pretune tests, imported inside the worker processes
(``STUNING_SYNTHETIC_TIMER=pretune_test_timer:time_us``, with this directory on ``PYTHONPATH``).

``time_us(features, config)`` is stuning's synthetic timer (a pure function of the problem and the
config) that also:

- appends ``pid<TAB>key<TAB>config`` to ``$STUNING_TEST_TIMER_LOG`` for every config timed, so a test
  can count who timed what (one short ``O_APPEND`` write per line: lines never interleave);
- with ``$STUNING_TEST_CRASH_MARKER`` naming a file that does not exist yet, kills the first process
  that times its third config of a problem, as a worker killed mid-trial would die: it creates the
  file (holding the problem's key, so the test knows which) and leaves with ``os._exit(CRASH_EXIT)``,
  no cleanup, no claim released. Creating the file is atomic (``O_EXCL``), so exactly one crash
  happens per marker.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from stuning.tuning.session import key_for
from stuning.tuning.synthetic_timer import synthetic_time_us

CRASH_EXIT = 17
CRASH_AT_CALL = 3

_calls: Counter = Counter()  # this process's timings per problem key


def time_us(features, config) -> float:
    key = key_for(features)
    log = os.environ.get("STUNING_TEST_TIMER_LOG")
    if log:
        line = f"{os.getpid()}\t{key}\t{json.dumps(config.as_dict(), sort_keys=True)}\n"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    _calls[key] += 1
    marker = os.environ.get("STUNING_TEST_CRASH_MARKER")
    if marker and _calls[key] == CRASH_AT_CALL:
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            pass
        else:
            os.write(fd, key.encode())
            os.close(fd)
            os._exit(CRASH_EXIT)
    return synthetic_time_us(features, config)


def read_log(path) -> list[tuple[int, str, str]]:
    """(pid, key, config JSON) per timing, in the order written."""
    out = []
    for line in Path(path).read_text().splitlines():
        pid, key, config = line.split("\t")
        out.append((int(pid), key, config))
    return out
