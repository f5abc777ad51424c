"""Where an earlier journal of a name server stopped: the sequence number of its last line.

A name server that starts again into the same journal directory continues its numbering
(`JournalRecorder(..., after_seq=n)` writes its header as ``n + 1``: a restart, as
docs/journal.md describes), so ``(ns, seq)`` stays one increasing order over every file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from ._format import is_gzip, open_journal

__all__ = ["last_seq", "last_seq_of_files"]

#: Bytes read from the end of a file at first; doubled while no whole line is found.
_TAIL_BYTES = 65_536


def _seq_of(line: bytes, nameserver_id: str) -> int | None:
    """The ``seq`` of a journal line of ``nameserver_id`` (a header or a record), else None."""
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    ns = doc.get("nameserver") if "journal" in doc else doc.get("ns")
    seq = doc.get("seq")
    if ns != nameserver_id or not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return None
    return seq


def last_seq(path: str | os.PathLike[str], nameserver_id: str) -> int | None:
    """The sequence number of the last whole line of ``nameserver_id`` in the journal file
    ``path`` (None: no such line). A last line without its newline (the writer was killed
    in the middle of it) and lines that do not parse are passed over.

    A plain file is read from its end: O(length of its last lines). A gzip file (recognised
    by its magic bytes) is read whole: O(its size).
    """
    if is_gzip(path):
        found = None
        with open_journal(path) as text:
            for text_line in text:
                if text_line.endswith("\n"):
                    seq = _seq_of(text_line.encode("utf-8", "surrogateescape"), nameserver_id)
                    found = seq if seq is not None else found
        return found
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        want = _TAIL_BYTES
        while True:
            start = max(0, size - want)
            handle.seek(start)
            chunk = handle.read(size - start)
            lines = chunk.split(b"\n")[:-1]  # the piece after the last newline is not whole
            if start > 0:
                lines = lines[1:]  # the first piece may start inside a line
            for line in reversed(lines):
                seq = _seq_of(line, nameserver_id)
                if seq is not None:
                    return seq
            if start == 0:
                return None
            want *= 2


def last_seq_of_files(paths: Iterable[str | os.PathLike[str]], nameserver_id: str
                      ) -> int | None:
    """`last_seq` of the first of ``paths`` (newest first) that has a line of
    ``nameserver_id``; None if none has. O(the tails read)."""
    for path in paths:
        seq = last_seq(path, nameserver_id)
        if seq is not None:
            return seq
    return None
