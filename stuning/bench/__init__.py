"""Benchmarks of stuning's kernels: against the vendor paths (``stuning bench``) and across their
config spaces (``stuning sweep``).

``timer`` times the implementations of one row with one method, ``baselines`` builds stuning's and
the vendors' implementations of a suite case, ``runner`` turns cases into result rows, ``sweep``
turns problems x configs into tidy rows, and ``report`` writes the CSV, markdown and plots. This
package sits between the CLI and the library: it calls the public ops and the tuner's problems,
and nothing below it imports it.
"""


def error_text(e: BaseException | str, limit: int = 200) -> str:
    """An exception (or message) as one line of at most ``limit`` characters: a CSV cell, a note."""
    text = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    return " ".join(str(text).split())[:limit]
