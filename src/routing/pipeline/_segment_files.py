"""Segments of a local plain journal file: where its snapshot lines are (`FileSegments.scan`,
a byte scan on the driver) and a segment's lines read from its byte offset on
(`lines_from`), numbered as the whole file's (`_files.raw_lines`) numbers them.

The scan looks for the recorder's ``"op":"snapshot",`` in large blocks (``bytes.find``,
C speed) and checks each hit's line start against `routing.journal.snapshot_key`'s
pattern; line numbers come from counting newlines between hits (``bytes.count``). No line
is decoded or parsed. Cost: one read of the file, about 0.5 s per GB from the page cache
on this machine (docs/performance.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

import attrs

from ._segments import SegLine

__all__ = ["FileSegments", "lines_from"]

#: `routing.journal._segments._SNAPSHOT`, on bytes.
_SNAPSHOT = re.compile(
    rb'\{"ns":"([^"\\]*)","seq":([1-9][0-9]{0,17}),"ts":(0|[1-9][0-9]{0,17}),"op":"snapshot",')
_MARK = b'"op":"snapshot",'
_BLOCK = 16 << 20


@attrs.frozen(kw_only=True)
class FileSegments:
    """A journal file's segments: segment ``k`` starts at byte ``offsets[k]``, line
    ``numbers[k]`` (1-based); segment 0 at the file's start. ``names``: the name server
    each later segment's snapshot line names (by its prefix)."""

    path: str
    offsets: tuple[int, ...]
    numbers: tuple[int, ...]
    names: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.offsets)

    def sizes(self, k: int) -> list[int | None]:
        """The line counts of segments ``k`` on (the last one: None, to the end)."""
        ends = [*self.numbers[k + 1:]]
        starts = self.numbers[k:]
        return [*(b - a for a, b in zip(starts, ends, strict=False)), None]

    @classmethod
    def scan(cls, path: str) -> FileSegments:
        """Find the snapshot lines of the plain (not gzip) file at ``path``: every line but
        the first that starts as `snapshot_key` recognises. O(bytes), one pass, memory
        O(block)."""
        offsets, numbers, names = [0], [1], []
        with open(path, "rb") as handle:
            for offset, number, name in _snapshot_lines(handle):
                if number > 1:
                    offsets.append(offset)
                    numbers.append(number)
                    names.append(name)
        return cls(path=path, offsets=tuple(offsets), numbers=tuple(numbers),
                   names=tuple(names))


def _snapshot_lines(handle: BinaryIO) -> Iterator[tuple[int, int, str]]:
    """(byte offset, line number, name server) of each line starting with a snapshot's
    prefix. Blocks are cut after their last newline; the rest is carried over."""
    carry = b""
    base = 0  # byte offset of carry[0]
    lines = 0  # newlines before base
    while True:
        block = handle.read(_BLOCK)
        buf = carry + block
        cut = len(buf) if not block else buf.rfind(b"\n") + 1
        if cut <= 0:
            carry = buf
            if not block:
                return
            continue
        counted = 0  # newlines of buf[:at] counted so far
        at = 0
        hit = buf.find(_MARK, 0, cut)
        while hit >= 0:
            start = buf.rfind(b"\n", 0, hit) + 1
            found = _SNAPSHOT.match(buf, start, hit + len(_MARK))
            if found is not None and found.end() == hit + len(_MARK):
                counted += buf.count(b"\n", at, start)
                at = start
                yield base + start, lines + counted + 1, found.group(1).decode(
                    "utf-8", "surrogateescape")
            hit = buf.find(_MARK, hit + len(_MARK), cut)
        lines += counted + buf.count(b"\n", at, cut)
        base += cut
        carry = buf[cut:]
        if not block:
            return


def lines_from(path: str, source: str, offset: int, number: int) -> Iterator[SegLine]:
    """The lines of the file at ``path`` from byte ``offset`` (a line start, line
    ``number``) to its end, as `_files.raw_lines` gives them: split on ``\\n`` only,
    ``(source, number, text, None)``, or ``(source, number, None, raw)`` for a line that
    is not UTF-8. O(lines read), lazily."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        for n, raw in enumerate(handle, start=number):
            raw = raw.rstrip(b"\n")
            try:
                yield source, n, raw.decode("utf-8"), None
            except UnicodeDecodeError:
                yield source, n, None, raw
