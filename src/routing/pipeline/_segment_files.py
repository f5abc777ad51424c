"""Segments of a name server's local plain journal files: where their snapshot lines are
(`FileScan`, a byte scan on the driver), the segments of one name server's files in
reading order (`FileSegments`: a segment may span files) and a segment's lines read from
its byte offset on (`lines_from`), numbered as `_files.raw_lines` numbers them.

The scan looks for the recorder's ``"op":"snapshot",`` in large blocks (``bytes.find``,
C speed) and checks each hit's line start against `routing.journal.snapshot_key`'s
pattern; line numbers come from counting newlines between hits (``bytes.count``). No line
is decoded or parsed. Cost: one read of the file, about 0.5 s per GB from the page cache
on this machine (docs/performance.md).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import BinaryIO

import attrs

from .._errors import InvariantViolation
from ..journal import SNAPSHOT_PREFIX
from ._segments import SegLine

__all__ = ["FileScan", "FileSegments", "lines_from", "plan_runs"]

#: `routing.journal.SNAPSHOT_PREFIX` (what `snapshot_key` matches), on bytes.
_SNAPSHOT = re.compile(SNAPSHOT_PREFIX.encode())
_MARK = b'"op":"snapshot",'
_BLOCK = 16 << 20


@attrs.frozen(kw_only=True)
class FileScan:
    """One plain journal file: its snapshot lines (byte ``offsets``, 1-based line
    ``numbers``, the name server each one's prefix ``names``) and its number of lines."""

    path: str
    offsets: tuple[int, ...]
    numbers: tuple[int, ...]
    names: tuple[str, ...]
    lines: int

    @classmethod
    def of(cls, path: str) -> FileScan:
        """Scan the plain (not gzip) file at ``path``: every line that starts as
        `snapshot_key` recognises. O(bytes), one pass, memory O(block)."""
        offsets, numbers, names = [], [], []
        with open(path, "rb") as handle:
            for offset, number, name in _snapshot_lines(handle):
                if offset < 0:  # the end: ``number`` lines in all
                    lines = number
                    break
                offsets.append(offset)
                numbers.append(number)
                names.append(name)
        return cls(path=path, offsets=tuple(offsets), numbers=tuple(numbers),
                   names=tuple(names), lines=lines)


@attrs.frozen(kw_only=True)
class FileSegments:
    """One name server's journal, its files in reading order (``files``: the path as
    given, the path to open), cut into segments: segment ``k`` starts in file
    ``starts[k][0]`` at byte ``starts[k][1]``, line ``starts[k][2]``; segment 0 at the
    first file's start; a segment may span files. ``positions[k]``: its first line's
    position in the whole journal (0-based)."""

    files: tuple[tuple[str, str], ...]
    starts: tuple[tuple[int, int, int], ...]
    positions: tuple[int, ...]
    total: int

    @property
    def count(self) -> int:
        return len(self.starts)

    @classmethod
    def of(cls, files: Sequence[tuple[str, str]], scans: Sequence[FileScan]) -> FileSegments:
        """The segments of the files ``files`` (given, opened) with their ``scans``."""
        starts, positions = [(0, 0, 1)], [0]
        before = 0
        for index, scan in enumerate(scans):
            for offset, number in zip(scan.offsets, scan.numbers, strict=True):
                if before + number - 1 > 0:
                    starts.append((index, offset, number))
                    positions.append(before + number - 1)
            before += scan.lines
        return cls(files=tuple(files), starts=tuple(starts), positions=tuple(positions),
                   total=before)

    def sizes(self, k: int) -> list[int | None]:
        """The line counts of segments ``k`` on (the last one: None, to the end)."""
        return [*(b - a for a, b in itertools.pairwise(self.positions[k:])), None]

    def counts(self) -> list[int]:
        """Every segment's line count. O(segments)."""
        ends = [*self.positions[1:], self.total]
        return [b - a for a, b in zip(self.positions, ends, strict=True)]

    def grouped(self, firsts: Sequence[int]) -> FileSegments:
        """The same journal cut only before the segments ``firsts`` (0 first, rising):
        each run of neighbouring segments becomes one segment, its inner snapshots read
        as the whole replay reads them. O(segments)."""
        if not firsts or firsts[0] != 0 or any(a >= b for a, b in itertools.pairwise(firsts)):
            raise InvariantViolation([f"firsts: {list(firsts)!r} must rise from 0"])
        return attrs.evolve(self, starts=tuple(self.starts[k] for k in firsts),
                            positions=tuple(self.positions[k] for k in firsts))

    def lines(self, k: int) -> Iterator[SegLine]:
        """The journal's lines from segment ``k``'s first on, across its files."""
        index, offset, number = self.starts[k]
        for i in range(index, len(self.files)):
            given, opened = self.files[i]
            yield from lines_from(opened, given, offset, number)
            offset, number = 0, 1


def _snapshot_lines(handle: BinaryIO) -> Iterator[tuple[int, int, str]]:
    """(byte offset, line number, name server) of each line starting with a snapshot's
    prefix, then ``(-1, lines in the file, "")``. Blocks are cut after their last
    newline; the rest is carried over."""
    carry = b""
    base = 0  # byte offset of carry[0]
    lines = 0  # newlines before base
    while True:
        block = handle.read(_BLOCK)
        buf = carry + block
        cut = len(buf) if not block else buf.rfind(b"\n") + 1
        if cut <= 0:
            if not block:
                yield -1, lines, ""
                return
            carry = buf
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
            yield -1, lines + (1 if cut and not buf.endswith(b"\n") else 0), ""
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


def plan_runs(journals: Mapping[str, FileSegments], tasks: int) -> dict[str, list[int]]:
    """Each name server's segments cut into runs of neighbouring segments (the first
    segment of each run, in order), about ``tasks`` runs in all: a name server gets a
    share of ``tasks`` by its lines (at least one run, at most one per segment) and its
    segments go to runs of about equal lines (a segment to the run its middle line falls
    in). With ``tasks`` at least the segments, every segment is a run of its own.
    O(segments)."""
    total = sum(j.total for j in journals.values())
    alone = tasks >= sum(j.count for j in journals.values())
    out: dict[str, list[int]] = {}
    for ns, journal in journals.items():
        share = round(tasks * journal.total / total) if total else journal.count
        n = min(journal.count, max(1, share))
        if alone or n == journal.count:
            out[ns] = list(range(journal.count))
            continue
        firsts: list[int] = []
        at = 0  # lines before segment k
        last = -1
        for k, size in enumerate(journal.counts()):
            run = min(n - 1, (2 * at + size) * n // (2 * journal.total))
            if run != last:
                firsts.append(k)
                last = run
            at += size
        out[ns] = firsts
    return out
