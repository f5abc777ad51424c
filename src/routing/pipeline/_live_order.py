"""The live watcher's file order: a name server's rotated files replayed in sequence order,
even when they arrive out of order (copied in parallel by rsync or scp from remote hosts).

A rotated file is named ``<ns>.<first seq, 16 digits>.jsonl[.gz]``
(``routing.journal.journal_file_name``) and a name server's files continue each other's
sequence numbers. `FileOrder` remembers, per file series (the name's ``<ns>``), the
sequence number the next file must start with (the last read + 1). A file that arrives
*early* — its first seq above that, so a file before it is missing — is held (in the name
server's state, between micro-batches) until the missing file(s) arrive, and then all are
replayed in name order: the same lines in the same order as if they had arrived in order,
so the same rows and incidents.

The hold is bounded: once the oldest held file of a series has waited ``wait_ms`` of
processing time (Spark's batch time), or more than `MAX_HELD_FILES` files of the series
are held, the held files are replayed in name order with the gap accepted, and the reader
reports it as the batch run does (``name_servers.gaps``, the lines missing). The bound is
checked when files of that name server arrive (a Spark processing-time timeout would
check it without new files, but keeps an ``availableNow`` query from ever ending: seen
here on Spark 4.3), so a name server that writes nothing more keeps its held files, shown
by the ``held_files`` status and metric, until it does. A series'
first file is early unless its first seq is 0 or it starts with a header or a snapshot
(a file that can be read without the ones before it: the reader rejects every line of one
that cannot, "no header ... nor a snapshot"). Files whose names are not rotated
names, and the rows of lines naming no name server, are never held. There is no Java
counterpart (RocketMQ's name server keeps no journal). All times are ms.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable, Sequence
from typing import Any

from ..journal import parse_journal_file_name
from ._files import Line, line_key

__all__ = ["DEFAULT_REORDER_WAIT_MS", "MAX_HELD_FILES", "FileOrder", "Piece"]

#: How long (ms of processing time) an early file is held for the missing ones by default:
#: three rotation intervals of the default writer (10 s), enough for parallel copies. A
#: constant; the cost of waiting: the held files kept in the name server's state.
DEFAULT_REORDER_WAIT_MS = 30_000
#: At most this many files of one series are held; one more releases them all (gap
#: accepted). Bounds a name server's state: a file is about its lines' size.
MAX_HELD_FILES = 64

#: One name server's lines of one file: (source, part, pickled (lines, notes)).
Piece = tuple[str, int, bytes]


def _starts_alone(lines: Sequence[Line]) -> bool:
    """Whether a file's first line is a header or a snapshot: readable without the files
    before it. O(1)."""
    text = lines[0][2] if lines else None
    return text is not None and ('"journal"' in text[:40] or '"op":"snapshot"' in text[:200])


def _last_seq(lines: Sequence[Line]) -> int | None:
    """The sequence number of the last line that has one (None: none). O(lines) at worst,
    O(1) for a journal file."""
    for item in reversed(lines):
        if item[2] is not None:
            seq = line_key(item[2])[1]
            if seq is not None:
                return seq
    return None


class FileOrder:
    """The held files and the next expected first seq of each file series of one name
    server (see the module docstring). Cost of `admit`: O(pieces log pieces) plus one
    unpickling of each piece (which the replay needs anyway); memory: the held pieces."""

    def __init__(self) -> None:
        self.next_seq: dict[str, int] = {}  # file series -> first seq of its next file
        self.held: list[tuple[str, int, bytes, int]] = []  # (source, part, payload, since)
        self.released = 0  # files replayed with a gap accepted after the hold's bound

    def admit(self, pieces: Iterable[Piece], now_ms: int, wait_ms: int
              ) -> list[tuple[list[Line], list[Any]]]:
        """The (lines, notes) to replay now, in name order, of the pieces held before and
        the new ``pieces``; the early ones stay held (see the module docstring)."""
        items = sorted([*self.held, *((s, p, b, now_ms) for s, p, b in pieces)],
                       key=lambda item: (item[0], item[1]))
        loaded = [pickle.loads(item[2]) for item in items]
        series: dict[str, list[tuple[int, int]]] = {}  # file series -> (index, first seq)
        for i, item in enumerate(items):
            named = parse_journal_file_name(os.path.basename(item[0]))
            if named is not None:
                series.setdefault(named[0], []).append((i, named[1]))
        keep: set[int] = set()
        for fid, indices in series.items():
            oldest = min(items[i][3] for i, _first in indices)
            release = oldest + wait_ms <= now_ms or len(indices) > MAX_HELD_FILES
            holding = False
            for i, first in indices:
                lines = loaded[i][0]
                expected = self.next_seq.get(fid)
                early = (first > expected if expected is not None
                         else first > 0 and not _starts_alone(lines))
                if early and not holding and not release:
                    holding = True
                if holding:
                    keep.add(i)
                    continue
                if early:
                    self.released += 1
                last = _last_seq(lines)
                if last is not None:
                    self.next_seq[fid] = max(self.next_seq.get(fid, -1), last + 1)
        self.held = [items[i] for i in sorted(keep)]
        return [loaded[i] for i in range(len(items)) if i not in keep]
