"""The errors the pipeline raises on purpose: each one a `routing.RoutingError`.

A second base keeps the built-in exception callers already catch: `InputError` is a
`ValueError` (`JournalNotFound` also a `FileNotFoundError`, `SourcesTypeError` a
`TypeError`), `RejectedRecords` a `ValueError`, `SparkUnavailable` a `RuntimeError`,
`WatchUnsupported` a `ValueError`.
Bad arguments (a ``partition`` that is not ``"ns"`` or ``"group"``, a Spark Connect URL
that is not one) raise the core's `routing.InvalidRequest`, naming the field and value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import RoutingError

__all__ = ["InputError", "JournalNotFound", "RejectedRecords", "SourcesTypeError",
           "SparkUnavailable", "WatchUnsupported"]


class InputError(RoutingError, ValueError):
    """The inputs cannot be analyzed: a path is missing or unreadable, or nothing is a
    journal. The message names the path. Raised before any work starts (`check_inputs`)
    or when the journals are listed (both engines), so a failing run costs only those
    checks: a few milliseconds a file."""


class JournalNotFound(InputError, FileNotFoundError):
    """A journal file or folder named as input does not exist (also a
    `FileNotFoundError`, as it was before it was an `InputError`). Found when the paths
    are listed, before any line is read: O(paths)."""


class SourcesTypeError(InputError, TypeError):
    """``sources`` is none of: journal paths, ``{name: lines}``, decoded journal entries.
    Found before any line is read: O(sources)."""


class RejectedRecords(RoutingError, ValueError):
    """``strict`` was asked and some lines were set aside (``total`` of them; ``rows`` are
    the first ones, sorted as the ``rejected`` table is) or some name server's accepted
    sequence numbers have gaps (``gaps``: one sentence per name server). Building one is
    O(5): the message shows the first five rows."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], *, total: int | None = None,
                 gaps: Sequence[str] = ()) -> None:
        total = len(rows) if total is None else total
        parts = []
        if total:
            shown = "; ".join(f"{r['source']}:{r['line']}: {r['reason']}" for r in rows[:5])
            more = f" (and {total - 5} more)" if total > 5 else ""
            parts.append(f"{total} journal line(s) rejected: {shown}{more}")
        if gaps:
            parts.append("sequence gaps (lines lost): " + "; ".join(gaps))
        super().__init__(" and ".join(parts) + " (--strict)")
        self.rows = tuple(rows)
        self.total = total
        self.gaps = tuple(gaps)


class SparkUnavailable(RoutingError, RuntimeError):
    """Java 17+, pyspark or its ``connect`` extra is missing, or a Spark Connect server
    does not answer; the message says what to install or where nothing answered. Raised
    before any job runs: at the cost of the check (a ``java -version``, an import, at
    most `CONNECT_TIMEOUT_S` of waiting for a server)."""


class WatchUnsupported(RoutingError, ValueError):
    """A `start_watch` option the session cannot honour: on Spark Connect the sink runs in
    a server-side Python process, so ``incidents`` must be a file and ``metrics`` are fed
    by the client (``LiveRelay``). ``field`` names the option. Raised before the query
    starts or anything is written: at the cost of the check (O(1))."""
