"""Splitting one name server's journal at its snapshots, for replays that run as many tasks.

A *segment* is the run of a name server's lines (in reading order) from one snapshot line
up to the next one; the first segment starts at the journal's first line. Each segment
replays on its own: a `JournalReader` and a `Replayer` that start at the snapshot read and
rebuild exactly what the whole replay has there, provided the *boundary* is clean. The
segment before a boundary decides that by reading the boundary's snapshot line as the
whole replay would, as its last line: clean when its reader accepts the line as a
snapshot and its `Replayer` finds the replayed state equal to the recorded one (the
replay event's ``result`` is True). A segment behind a boundary that is not clean (a
damaged or lost line before it, a snapshot line that is itself damaged) is replayed again
as the continuation of the segment before. ``docs/journal.md``,
"Splitting a replay", has the rules, including what a pipeline adds for its own state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["SNAPSHOT_PREFIX", "segment_starts", "snapshot_key"]

#: The start of a snapshot line as the recorder writes it (groups: name server, seq, ts), a
#: regular expression; `snapshot_key` matches it on text, the pipeline's byte scan on bytes.
SNAPSHOT_PREFIX = (
    r'\{"ns":"([^"\\]*)","seq":([1-9][0-9]{0,17}),"ts":(0|[1-9][0-9]{0,17}),"op":"snapshot",')
_SNAPSHOT = re.compile(SNAPSHOT_PREFIX)


def snapshot_key(text: str) -> tuple[str, int, int] | None:
    """``(name server, seq, ts)`` of a line that starts as the recorder writes a snapshot,
    else None; the line is not parsed (whether it reads is the reader's business).
    O(1): one anchored regex match."""
    found = _SNAPSHOT.match(text)
    if found is None:
        return None
    return found.group(1), int(found.group(2)), int(found.group(3))


def segment_starts(texts: Iterable[str]) -> list[int]:
    """The positions (0-based, in the given order) where the segments of one name server's
    lines start: 0, then every line that `snapshot_key` recognises. Segment ``k`` is
    ``texts[starts[k]:starts[k + 1]]``. O(lines)."""
    starts = [0]
    for index, text in enumerate(texts):
        if index and snapshot_key(text) is not None:
            starts.append(index)
    return starts
