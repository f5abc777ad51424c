"""Inputs: finding journal files, numbering their lines, and reading them per name server.

The reading rules are `routing.journal.JournalReader`'s. Its state is kept per name server
(last sequence number, last time, table definitions), so feeding it one name server's lines
in reading order gives exactly what it gives for all lines: that is how Spark reads, one
name server per task. `line_key` names the name server a line belongs to, the way the
reader itself would look it up; a line without one is rejected before the reader consults
any state, so a throwaway reader gives the same verdict.

Parquet input (``routing analyze --to-parquet``) stores the lines themselves with their
original file name and line number (`LINES_SCHEMA_DDL`), so a Parquet copy is read with the
same rules and reports the same places.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..journal import (
    JournalEntry,
    JournalHeader,
    JournalReader,
    Register,
    RejectedLine,
    Scan,
    open_journal_bytes,
)
from ._outputs import Row

__all__ = [
    "JOURNAL_SUFFIXES",
    "LINES_SCHEMA_DDL",
    "InputFile",
    "file_row",
    "NsStats",
    "expand_local",
    "is_parquet_path",
    "iter_lines",
    "raw_lines",
    "line_key",
    "name_server_rows",
    "count_rejected",
    "rejected_counts",
]

#: The columns of a Parquet copy of journals.
LINES_SCHEMA_DDL = "source string, source_index long, line long, text string"

#: Inside a folder, only files whose names end in one of these are read as journals (plus
#: Parquet copies); every other file (``summary.json``, ``timeline.png``, ``NOTES.txt``) is
#: skipped and listed in ``rejected`` with stage ``skipped``. A file named explicitly is
#: always read.
JOURNAL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")


@attrs.frozen(kw_only=True)
class InputFile:
    """One input: a JSON Lines file (``text``, gzip recognised), a Parquet copy
    (``parquet``, a file or a folder), or a file of a folder that is not a journal
    (``skipped``). ``path`` is what was given (or found inside a given folder); it is also
    the ``source`` of its lines."""

    kind: str
    path: str


def file_row(source: str, line: int, stage: str, reason: str) -> Row:
    """A ``rejected`` row about a whole file (skipped, empty, or cut short)."""
    return {"source": source, "line": line, "stage": stage, "reason": reason, "ns": None,
            "seq": None, "text": None}


SKIPPED_REASON = ("not a journal file name (" + ", ".join(f"*{x}" for x in JOURNAL_SUFFIXES)
                  + ", *.parquet): skipped")
EMPTY_REASON = "empty journal file: no lines"


def kind_in_folder(name: str) -> str:
    if is_parquet_path(name):
        return "parquet"
    return "text" if name.endswith(JOURNAL_SUFFIXES) else "skipped"


def is_parquet_path(path: str) -> bool:
    return path.endswith(".parquet") or path.endswith(".parq")


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def expand_local(paths: Sequence[str | os.PathLike[str]]) -> list[InputFile]:
    """Local paths to inputs, in the order given; a folder's files are sorted by name,
    hidden and ``_``-prefixed names ignored, other names than `JOURNAL_SUFFIXES` skipped
    (kind ``skipped``). A folder holding ``*.parquet`` files is one Parquet input. Raises
    FileNotFoundError for a missing path."""
    found: list[InputFile] = []
    for given in paths:
        path = os.fspath(given)
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"no such journal file or folder: {path}")
        if p.is_file():
            found.append(InputFile(kind="parquet" if is_parquet_path(path) else "text",
                                   path=path))
            continue
        children = sorted(c for c in p.iterdir() if not _hidden(c.name))
        if any(c.is_file() and is_parquet_path(c.name) for c in children):
            found.append(InputFile(kind="parquet", path=path))
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not _hidden(d))
            for name in sorted(files):
                if not _hidden(name):
                    found.append(InputFile(kind=kind_in_folder(name),
                                           path=os.path.join(root, name)))
    return found


def line_key(text: str) -> tuple[str | None, int | None]:
    """(name server, sequence number) of a line as the reader would look them up, or None
    where the line has none (it will be rejected without touching reader state)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(doc, dict):
        return None, None
    ns = doc.get("nameserver") if "journal" in doc else doc.get("ns")
    seq = doc.get("seq")
    return (ns if isinstance(ns, str) else None,
            seq if isinstance(seq, int) and not isinstance(seq, bool) else None)


def iter_lines(inputs: Sequence[InputFile], notes: list[Row] | None = None
               ) -> Iterator[tuple[str, int, str]]:
    """(source, line number, text) of every line, in reading order. Parquet copies are
    read with pyarrow, ordered by (source index, line). Rows about whole files (skipped,
    empty, a gzip file cut short) are appended to ``notes``."""
    notes = notes if notes is not None else []
    for item in inputs:
        if item.kind == "skipped":
            notes.append(file_row(item.path, 0, "skipped", SKIPPED_REASON))
        elif item.kind == "text":
            yield from _text_lines(item.path, notes)
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(item.path, columns=["source", "source_index", "line", "text"])
            rows = sorted(zip(table.column("source_index").to_pylist(),
                              table.column("line").to_pylist(),
                              table.column("source").to_pylist(),
                              table.column("text").to_pylist(), strict=True))
            for _index, number, source, text in rows:
                yield source, number, text


def decode_line(raw: bytes) -> str:
    """A line's text; bytes that are not UTF-8 become lone surrogates (``surrogateescape``)
    so that the reader rejects the line as "not valid UTF-8" (its ``text`` then shows
    U+FFFD), on both engines."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="surrogateescape")


def _text_lines(path: str, notes: list[Row]) -> Iterator[tuple[str, int, str]]:
    """Lines split on ``\\n`` only (as Spark does), gzip recognised by its magic bytes.
    A file without lines, and a gzip file that ends early (the lines read so far are
    kept), add a row to ``notes``."""
    import zlib

    number = 0
    try:
        for number, text, raw in raw_lines(path):
            yield path, number, text if text is not None else decode_line(raw or b"")
    except (EOFError, OSError, zlib.error) as exc:
        notes.append(file_row(path, number + 1, "read", truncated_reason(exc)))
        return
    if number == 0:
        notes.append(file_row(path, 0, "read", EMPTY_REASON))


def raw_lines(path: str) -> Iterator[tuple[int, str | None, bytes | None]]:
    """``(number, text, None)`` per line of a local journal file, or ``(number, None, raw)``
    for a line that is not UTF-8; split on ``\n`` only (as Spark does), gzip recognised by
    its magic bytes. A damaged gzip file raises where it ends."""
    with open_journal_bytes(path) as handle:
        for number, raw in enumerate(handle, start=1):
            raw = raw.rstrip(b"\n")
            try:
                yield number, raw.decode("utf-8"), None
            except UnicodeDecodeError:
                yield number, None, raw


def truncated_reason(exc: BaseException) -> str:
    """The ``rejected`` reason for a compressed file that cannot be read to its end."""
    return (f"gzip file cut short or damaged ({type(exc).__name__}: {exc}): the lines "
            f"from here to the end of the file are lost")


@attrs.define(kw_only=True)
class NsStats:
    """What reading one name server's journal saw (for the ``name_servers`` table)."""

    ns: str
    first_ms: int
    last_ms: int
    records: int = 0
    headers: int = 0
    gaps: int = 0
    #: (last accepted seq, next accepted seq) of the first gap.
    first_gap: tuple[int, int] | None = None

    def see(self, entry: JournalEntry) -> None:
        if isinstance(entry, JournalHeader):
            self.headers += 1
            self.last_ms = max(self.last_ms, entry.start_ms)
        else:
            self.records += 1
            if entry.at_ms > self.last_ms:
                self.last_ms = entry.at_ms

    def to_row(self, rejected: int) -> Row:
        return {"ns": self.ns, "first_ms": self.first_ms, "last_ms": self.last_ms,
                "records": self.records, "restarts": max(0, self.headers - 1),
                "gaps": self.gaps, "rejected": rejected}

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> NsStats:
        """The inverse of `to_json` (JSON makes the gap pair a list). No converter on the
        class: attrs would then hook every attribute write, about 1 µs per record."""
        gap = doc.get("first_gap")
        return cls(**{**doc, "first_gap": None if gap is None else (int(gap[0]), int(gap[1]))})


def rejected_row(bad: RejectedLine) -> Row:
    """The ``rejected`` row of a line the reader set aside."""
    ns, seq = line_key(bad.text)
    return {"source": bad.source, "line": bad.line_number, "stage": "read",
            "reason": bad.reason, "ns": ns, "seq": seq, "text": bad.text}


class NsReading:
    """Reads lines with one `JournalReader`, keeping per-name-server stats.

    Feed lines in reading order (all of them, or one name server's); `feed` returns the
    accepted entry or None (the rejection was added to ``rejected``).
    """

    def __init__(self) -> None:
        self.reader = JournalReader()
        self.stats: dict[str, NsStats] = {}
        self.rejected: list[Row] = []
        self._gaps_seen = 0

    def steady(self, text: str, ns: str | None = None
               ) -> tuple[str, int, int, Register | Scan, Any] | None:
        """`JournalReader.steady`, counted in the name server's stats: a remembered
        re-registration or scan in order is accepted without building its record (None:
        `feed` the line). O(1)."""
        hit = self.reader.steady(text, ns)
        if hit is not None:
            stats = self.stats[hit[0]]
            stats.records += 1
            if hit[2] > stats.last_ms:
                stats.last_ms = hit[2]
        return hit

    def feed(self, text: str, source: str, line: int, *,
             keyed: bool = True) -> JournalEntry | None:
        """``keyed=False`` for a line without a name server: a fresh reader judges it (it
        is rejected before any state is read)."""
        reader = self.reader if keyed else JournalReader()
        item = reader.feed(text, source=source, line_number=line)
        if isinstance(item, RejectedLine):
            self.rejected.append(rejected_row(item))
            return None
        stats = self.stats.get(item.nameserver_id)
        if stats is None:
            assert isinstance(item, JournalHeader)  # the reader wants a header first
            stats = self.stats[item.nameserver_id] = NsStats(
                ns=item.nameserver_id, first_ms=item.start_ms, last_ms=item.start_ms)
        stats.see(item)
        gaps = self.reader.gaps
        while self._gaps_seen < len(gaps):
            gap = gaps[self._gaps_seen]
            self._gaps_seen += 1
            seen = self.stats[gap.nameserver_id]
            seen.gaps += 1
            if seen.first_gap is None:
                seen.first_gap = (gap.after_seq, gap.next_seq)
        return item


def count_rejected(counts: dict[str, int], row: Row) -> None:
    """Add one ``rejected`` row to ``counts`` (per name server; a row without one is not
    counted). Both engines count with it."""
    ns = row.get("ns")
    if ns is not None:
        counts[ns] = counts.get(ns, 0) + 1


def rejected_counts(rejected: Iterable[Row]) -> dict[str, int]:
    """Rejected rows per name server (`count_rejected`)."""
    counts: dict[str, int] = {}
    for row in rejected:
        count_rejected(counts, row)
    return counts


def name_server_rows(stats: Iterable[NsStats], rejected: Mapping[str, int]) -> list[Row]:
    """The ``name_servers`` table: one row per name server with an accepted header;
    ``rejected`` counts the rejected rows of each name server."""
    return [s.to_row(rejected.get(s.ns, 0)) for s in sorted(stats, key=lambda s: s.ns)]
