"""Where database files live: file names, the search path, and the directory writes go to.

Search order, earliest first: $STUNING_DB_DIR (an override, e.g. a team's shared directory), the
user's cache directory (what local tuning writes), the databases shipped with the package.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import platformdirs

ENV_DB_DIR = "STUNING_DB_DIR"
APP_NAME = "stuning"


def device_slug(device_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")
    if not slug:
        raise ValueError(f"device name {device_name!r} has no letters or digits to name a file by")
    return slug


def db_file_name(device_name: str) -> str:
    return f"{device_slug(device_name)}.json"


def misses_file_name(device_name: str) -> str:
    return f"misses-{device_slug(device_name)}.json"


def override_dir() -> Path | None:
    value = os.environ.get(ENV_DB_DIR, "")
    return Path(value).expanduser() if value else None


def user_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir(APP_NAME))


def shipped_dir() -> Path:
    """The package's tuning_db directory (repository's tuning_db/ when the package is not importable)."""
    try:
        from importlib.resources import files

        return Path(str(files("stuning.tuning_db")))
    except (ImportError, TypeError):
        # stuning.tuning_db is package data of an installed stuning; a bare checkout lacks the mapping.
        return Path(__file__).resolve().parents[2] / "tuning_db"


def default_search_path() -> list[Path]:
    override = override_dir()
    return ([override] if override is not None else []) + [user_cache_dir(), shipped_dir()]


def write_candidates(search_path: list[Path] | None) -> list[Path]:
    """Directories a save may go to, in order; the shipped directory is never one of them.

    Those of an explicit ``search_path``, else (or if it holds only the shipped directory)
    $STUNING_DB_DIR if set, else the user cache directory.
    """
    shipped = _resolved(shipped_dir())
    chosen = [d for d in search_path or [] if _resolved(d) != shipped]
    if chosen:
        return chosen
    override = override_dir()
    return [override] if override is not None else [user_cache_dir()]


def first_writable(candidates: list[Path]) -> Path:
    """The first directory that exists (created if need be) and is writable."""
    failures = []
    for directory in candidates:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            failures.append(f"{directory}: {e.strerror or e}")
            continue
        if os.access(directory, os.W_OK | os.X_OK):
            return directory
        failures.append(f"{directory}: not writable")
    tried = "; ".join(failures) or "no candidate directories"
    raise PermissionError(f"no writable tuning-database directory ({tried}); set {ENV_DB_DIR} to one")


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path
