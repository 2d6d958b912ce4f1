"""Tables and progress for people, JSON for scripts."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


def console(quiet: bool = False) -> Console:
    # Tables go to stdout; with --json they are suppressed so stdout parses.
    return Console(quiet=quiet, width=None if sys.stdout.isatty() else 160)


def progress(con: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True, quiet=con.quiet),
    )


def table(title: str, columns: list[str], rows: list[list]) -> Table:
    t = Table(title=title)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(v) for v in r])
    return t


def print_json(obj) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def fmt_us(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def fmt_ratio(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def fmt_config(d: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())
