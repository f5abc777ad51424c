"""Inputs checked before any work starts: every path exists and is readable, and which files
are journals.

`check_inputs` runs in a few milliseconds per file (it reads the first line of each), so
``routing analyze`` can refuse a missing folder or a folder without journals before it
starts Spark (several seconds). A text file is a journal when its first non-empty line is a
JSON object with a ``journal`` header key or a name server and sequence number (the
journal's own lines, see ``docs/journal.md``); other files (notes, CSV, binaries) are
skipped with the reason. Inside a folder only names in ``_read.JOURNAL_SUFFIXES`` (and
Parquet copies) are read at all; any other name is skipped, with the content's reason when
it is not a journal either. Parquet copies are recognised by their ``text`` column. URIs
(``hdfs://``, ``s3a://``, …) are passed on unchecked: only Spark can read them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import attrs

from ..journal import open_journal_bytes
from ._read import SKIPPED_REASON, InputFile, expand_local

__all__ = ["InputCheck", "InputError", "check_inputs"]


class InputError(ValueError):
    """The inputs cannot be analyzed: a path is missing or unreadable, or nothing is a
    journal. The message says which."""


@attrs.frozen(kw_only=True)
class InputCheck:
    """``journals``: the inputs to read (local files and Parquet copies, in reading order);
    ``skipped``: (path, reason) of files that are not journals; ``remote``: URIs passed on
    unchecked; ``total_bytes``: the size of the local journals on disk."""

    journals: tuple[InputFile, ...]
    skipped: tuple[tuple[str, str], ...]
    remote: tuple[str, ...]
    total_bytes: int
    #: every skipped file is a folder's file with a name that is not a journal's, which the
    #: readers skip too, listing it in ``rejected`` (stage ``skipped``): the paths as given
    #: can then be read as they are
    skipped_by_name_only: bool = True

    def paths(self) -> list[str]:
        """What to give the readers: the journals and the URIs."""
        return [f.path for f in self.journals] + list(self.remote)


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _first_line(path: str) -> bytes:
    with open_journal_bytes(path) as handle:
        for _ in range(1000):
            raw = handle.readline(1 << 20)
            if not raw:
                return b""
            if raw.strip():
                return raw.strip()
    return b""


def _why_not_journal(path: str) -> str | None:
    try:
        line = _first_line(path)
    except (OSError, EOFError) as exc:
        return f"unreadable: {exc.strerror or exc}" if isinstance(exc, OSError) \
            else f"unreadable: {exc}"
    if not line:
        return None  # an empty journal: harmless, read as nothing
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        if _one_json_document(path):
            return ("not a journal: one JSON document over several lines (a journal has one "
                    "JSON object per line)")
        return "not a journal: the first line is not JSON"
    if not isinstance(doc, dict) or not ("journal" in doc or ("ns" in doc and "seq" in doc)):
        return "not a journal: the first line is neither a journal header nor a record"
    return None


#: The largest file `_one_json_document` parses whole.
_DOCUMENT_MAX_BYTES = 16 << 20


def _one_json_document(path: str) -> bool:
    """Whether ``path`` holds one JSON value spread over several lines (``summary.json``
    as ``routing simulate`` writes it, pretty-printed); only files up to 16 MiB are parsed."""
    try:
        if os.path.getsize(path) > _DOCUMENT_MAX_BYTES:
            return False
        with open_journal_bytes(path) as handle:
            json.loads(handle.read(_DOCUMENT_MAX_BYTES + 1))
    except (OSError, EOFError, ValueError, RecursionError):
        return False
    return True


def _parquet_ok(path: str) -> str | None:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - the spark extra brings pyarrow
        return None
    try:
        first = path
        if os.path.isdir(path):
            first = next(os.path.join(path, n) for n in sorted(os.listdir(path))
                         if n.endswith((".parquet", ".parq")) and not n.startswith((".", "_")))
        names = pq.read_schema(first).names
    except Exception as exc:
        return f"unreadable Parquet: {exc}"
    return None if "text" in names else "not a journal copy: no 'text' column"


def check_inputs(paths: Sequence[str | os.PathLike[str]]) -> InputCheck:
    """Check ``paths`` (files or folders) as `routing analyze` reads them; raise
    `InputError` for a missing or unreadable path, or when no file is a journal."""
    local: list[str] = []
    remote: list[str] = []
    for given in paths:
        path = os.fspath(given)
        if _is_uri(path):
            remote.append(path)
            continue
        path = path.removeprefix("file://")
        if not os.path.exists(path):
            raise InputError(f"no such journal file or folder: {path}")
        if not os.access(path, os.R_OK | (os.X_OK if os.path.isdir(path) else 0)):
            raise InputError(f"cannot read {path}: permission denied")
        local.append(path)
    try:
        found = expand_local(local)
    except OSError as exc:
        raise InputError(f"cannot list the journals: {exc}") from None
    journals: list[InputFile] = []
    skipped: list[tuple[str, str]] = []
    size = 0
    by_name_only = True
    for item in found:
        if not os.access(item.path, os.R_OK):
            raise InputError(f"cannot read {item.path}: permission denied")
        if item.kind == "skipped":  # a folder's file with another name (`JOURNAL_SUFFIXES`)
            why: str | None = _why_not_journal(item.path) or SKIPPED_REASON
        elif item.kind == "parquet":
            why = _parquet_ok(item.path)
        else:
            why = _why_not_journal(item.path)
        if why is None:
            journals.append(item)
            size += _size(item.path)
        else:
            skipped.append((item.path, why))
            by_name_only = by_name_only and item.kind == "skipped"
    if not journals and not remote:
        detail = "; ".join(f"{p}: {why}" for p, why in skipped[:5])
        where = ", ".join(os.fspath(p) for p in paths)
        raise InputError(f"no journal found in {where}" + (f" ({detail})" if detail else ""))
    return InputCheck(journals=tuple(journals), skipped=tuple(skipped), remote=tuple(remote),
                      total_bytes=size, skipped_by_name_only=by_name_only)


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(root, n))
                   for root, _dirs, files in os.walk(path) for n in files)
    return os.path.getsize(path)
