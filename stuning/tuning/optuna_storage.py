"""Optuna storages that several tuning processes share, and the names of the studies kept in them.

A URL with a scheme (``postgresql://...``, ``mysql://...``, ``sqlite:///file.db``) opens Optuna's
RDB storage, the one to share between machines; anything else is the path of a journal file
(``journal:`` in front is allowed), the simple choice for the processes of one machine or for a
file system every machine mounts.

Names are derived from the tuning database's keys, so every process that tunes the same problem
for the same device and strategy, on any machine, meets the same studies.
"""

from __future__ import annotations

from pathlib import Path

import optuna

JOURNAL_PREFIX = "journal:"
SEARCH_PREFIX = "stuning-search"
CLAIM_PREFIX = "stuning-claim"


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """The storage ``url`` names (see the module's docstring)."""
    url = str(url)
    if "://" in url:
        try:
            return optuna.storages.RDBStorage(url)
        except Exception as e:  # a malformed URL, a missing driver, a database that cannot be reached
            detail = " ".join(str(e).split("(Background on this error")[0].split())[:300]
            raise ValueError(f"storage {_shown(url)}: cannot open it ({type(e).__name__}: {detail})") from e
    path = Path(url.removeprefix(JOURNAL_PREFIX)).expanduser()
    if path.is_dir():
        raise ValueError(f"storage {url!r} is a directory; name a journal file in it, e.g. {path / 'tune.journal'}")
    from optuna.storages.journal import JournalFileBackend

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    except OSError as e:
        raise ValueError(f"storage {url!r}: cannot open the journal file {path} ({e})") from e


def _shown(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        from sqlalchemy.engine import make_url

        return repr(make_url(url).render_as_string(hide_password=True))
    except Exception:
        return repr(url.split("@")[-1]) if "@" in url else repr(url)


def namespace(device: str, strategy: str) -> str:
    """What separates the studies of different targets: a problem tuned for another device or by
    another strategy is another search."""
    return f"{device}/{strategy}"


def search_study_name(space: str, key: str) -> str:
    """The Optuna study that holds one problem's search (its trials, so a retry resumes them)."""
    return f"{SEARCH_PREFIX}:{space}:{key}"


def claim_study_name(space: str, key: str, attempt: int) -> str:
    return f"{CLAIM_PREFIX}:{space}:{key}#{attempt}"


def parse_claim_study_name(name: str, space: str) -> tuple[str, int] | None:
    """(key, attempt) of a claim study of ``space``, else None."""
    prefix = f"{CLAIM_PREFIX}:{space}:"
    if not name.startswith(prefix):
        return None
    key, sep, attempt = name[len(prefix):].rpartition("#")
    if not sep or not attempt.isdigit():
        return None
    return key, int(attempt)
