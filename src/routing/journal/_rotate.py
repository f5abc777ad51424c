"""Rotating journal files: a new, complete file every so often, for readers of new files.

Spark's file source (and any watcher of a folder) reads new *files*, not lines appended to
a file. `RotatingJournal` is a `JournalSink` that writes one name server's lines into a
series of files ``<ns>.<first seq, 16 digits>.jsonl`` in one folder: each is written under
a hidden name (``.`` + its final name, which Spark, Hadoop and ``routing analyze`` ignore)
and renamed to its final name once closed, so a file that appears is complete and never
changes. Rotation never adds, drops or changes a line: one name server's files, in name
order, are exactly the journal an unrotated writer would have written, and the sequence
numbers continue across them. A snapshot line always starts a new file, so a file that
starts with one can be read without the files before it (retention, ``docs/journal.md``,
"Rotation"). There is no Java counterpart: RocketMQ's name server keeps no journal.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .._clock import Clock
from .._errors import InvalidRequest
from .._validate import check_int
from ._format import open_journal
from ._segments import snapshot_key

__all__ = ["DEFAULT_ROTATE_BYTES", "DEFAULT_ROTATE_EVERY_MS", "SEQ_DIGITS", "RotatingJournal",
           "finish_open_files", "journal_file_name", "parse_journal_file_name",
           "rotated_files", "safe_file_id"]

#: Default age (ms, by the writer's clock) after which a file is closed.
DEFAULT_ROTATE_EVERY_MS = 10_000
#: Default size (bytes, uncompressed) after which a file is closed.
DEFAULT_ROTATE_BYTES = 64 * 1024 * 1024
#: Width of the zero-padded first sequence number in a file name (name order = seq order
#: below 10**16 lines).
SEQ_DIGITS = 16

_NAME = re.compile(r"(?P<ns>.+)\.(?P<seq>[0-9]{" + str(SEQ_DIGITS) + r",})\.jsonl(?P<gz>\.gz)?")
#: The start of a record line as `JournalRecorder` writes it: name server, then ``seq``.
_RECORD = re.compile(r'\{"ns":"(?:[^"\\]|\\.)*","seq":([0-9]{1,18}),')


def safe_file_id(nameserver_id: str) -> str:
    """The name server id as it appears in file names: every character other than a
    letter, a digit, ``-``, ``_`` or ``.`` becomes ``_`` (``127.0.0.1:9876`` →
    ``127.0.0.1_9876``: Hadoop paths refuse ``:``). O(len)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in nameserver_id)


def journal_file_name(nameserver_id: str, first_seq: int, *, gzip: bool = False) -> str:
    """The final name of the file of ``nameserver_id`` whose first line has ``first_seq``.

    >>> journal_file_name("ns-0", 4711)
    'ns-0.0000000000004711.jsonl'
    >>> journal_file_name("127.0.0.1:9876", 0, gzip=True)
    '127.0.0.1_9876.0000000000000000.jsonl.gz'
    """
    check_int("first_seq", first_seq, low=0)
    return f"{safe_file_id(nameserver_id)}.{first_seq:0{SEQ_DIGITS}d}.jsonl" + (
        ".gz" if gzip else "")


def parse_journal_file_name(name: str) -> tuple[str, int] | None:
    """``(file id, first seq)`` of a final rotated-file name, None for any other name (a
    hidden file being written, ``ns-0.jsonl``, ``summary.json``).

    >>> parse_journal_file_name("ns-0.0000000000004711.jsonl")
    ('ns-0', 4711)
    >>> parse_journal_file_name(".ns-0.0000000000004711.jsonl") is None
    True
    """
    if name.startswith((".", "_")):
        return None
    found = _NAME.fullmatch(name)
    if found is None:
        return None
    return found.group("ns"), int(found.group("seq"))


def rotated_files(directory: str | os.PathLike[str], nameserver_id: str) -> list[Path]:
    """The final rotated files of ``nameserver_id`` in ``directory``, in sequence order
    (hidden files being written are not listed). O(files in the folder)."""
    want = safe_file_id(nameserver_id)
    found: list[tuple[int, Path]] = []
    for path in Path(directory).iterdir():
        parsed = parse_journal_file_name(path.name)
        if parsed is not None and parsed[0] == want:
            found.append((parsed[1], path))
    return [p for _, p in sorted(found)]


def finish_open_files(directory: str | os.PathLike[str], nameserver_id: str | None = None
                      ) -> list[Path]:
    """Rename the files a killed writer left under their hidden names (``.`` + a rotated
    file name) into place, those of ``nameserver_id`` only when given; an empty one is
    deleted. Returns the final paths. Their last line may be cut short: the readers reject
    that line alone. Refuses (`InvalidRequest`) to replace an existing final file.
    O(files in the folder)."""
    want = None if nameserver_id is None else safe_file_id(nameserver_id)
    finished: list[Path] = []
    for path in sorted(Path(directory).iterdir()):
        if not path.name.startswith("."):
            continue
        parsed = parse_journal_file_name(path.name[1:])
        if parsed is None or (want is not None and parsed[0] != want):
            continue
        if path.stat().st_size == 0:
            path.unlink()
            continue
        final = path.with_name(path.name[1:])
        if final.exists():
            raise InvalidRequest(f"cannot finish {path}: {final.name} exists already",
                                 field="directory", value=os.fspath(directory))
        os.rename(path, final)
        finished.append(final)
    return finished


def _first_seq(line: str) -> int:
    """The ``seq`` of a journal line: from the record prefix the recorder writes (O(1)),
    else, for a header, from its JSON (rare: one per run)."""
    found = _RECORD.match(line)
    if found is not None:
        return int(found.group(1))
    try:
        doc = json.loads(line)
        seq = doc["seq"]
    except (ValueError, TypeError, KeyError):
        seq = None
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise InvalidRequest(f"not a journal line (no seq): {line[:80]!r}", field="line",
                             value=line[:80])
    return seq


class RotatingJournal:
    """A `JournalSink` writing one name server's journal as a series of complete files.

    >>> import tempfile, routing as r
    >>> from routing.journal import JournalRecorder
    >>> folder = tempfile.mkdtemp()
    >>> clock = r.ManualClock(start_ms=0)
    >>> sink = RotatingJournal(folder, "ns-0", clock=clock, rotate_every_ms=10_000)
    >>> ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id="ns-0")
    >>> for _ in range(4):
    ...     _ = clock.advance(5_000)
    ...     _ = ns.scan_expired()
    >>> sink.close()
    >>> [p.name for p in rotated_files(folder, "ns-0")]
    ['ns-0.0000000000000000.jsonl', 'ns-0.0000000000000002.jsonl', 'ns-0.0000000000000004.jsonl']

    ``write(text)`` takes one whole line (with its newline) per call, as `JournalRecorder`
    writes them. Before writing a line it closes the current file when the file has been
    open ``rotate_every_ms`` (ms, by ``clock``, from its first line) or holds
    ``rotate_bytes`` (uncompressed), or when the line is a snapshot; the next line opens a
    new file named after its own ``seq`` (`journal_file_name`). ``0`` or None turns a
    trigger off. A file is written as ``.<name>`` and renamed to ``<name>`` when closed
    (after ``fsync`` when asked); ``line_buffered`` writes every line through to the
    operating system as it comes (``routing serve``). ``on_close(path)`` is called with
    every file that appears. `rotate_if_due` closes a file whose time is up without a
    line to write (a quiet name server). Thread-safe. Cost: O(1) per line besides writing
    it (one regex match for its ``seq`` when a file starts), plus a rename per file.
    """

    def __init__(self, directory: str | os.PathLike[str], nameserver_id: str, *,
                 clock: Clock, rotate_every_ms: int | None = DEFAULT_ROTATE_EVERY_MS,
                 rotate_bytes: int | None = DEFAULT_ROTATE_BYTES, gzip: bool = False,
                 fsync: bool = False, line_buffered: bool = False,
                 on_close: Callable[[Path], object] | None = None) -> None:
        self._every = check_int("rotate_every_ms", rotate_every_ms or 0, low=0) or None
        self._bytes = check_int("rotate_bytes", rotate_bytes or 0, low=0) or None
        self._directory = Path(directory)
        if not self._directory.is_dir():
            raise InvalidRequest(f"directory {os.fspath(directory)!r} is not a folder",
                                 field="directory", value=os.fspath(directory))
        self._nameserver_id = nameserver_id
        self._clock = clock
        self._gzip = gzip
        self._fsync = fsync
        self._line_buffered = line_buffered
        self._on_close = on_close
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._hidden: Path | None = None
        self._size = 0
        self._due_ms = 0
        self._closed = False
        self.files_closed = 0
        self.last_closed: Path | None = None

    @property
    def current_path(self) -> Path | None:
        """The hidden path of the file being written, None between files."""
        return self._hidden

    @property
    def nameserver_id(self) -> str:
        return self._nameserver_id

    def write(self, text: str, /) -> int:
        """Write one whole line (rotating first when due). Returns ``len(text)``."""
        with self._lock:
            if self._closed:
                raise InvalidRequest(f"{self!r} is closed", field="sink", value=text[:80])
            if self._file is not None and (
                    (self._every is not None and self._clock.now_ms() >= self._due_ms)
                    or (self._bytes is not None and self._size >= self._bytes)
                    or (text.startswith('{"ns":') and snapshot_key(text) is not None)):
                self._finish()
            if self._file is None:
                self._open(_first_seq(text))
            assert self._file is not None
            self._file.write(text)
            self._size += len(text) if text.isascii() else len(text.encode("utf-8"))
            return len(text)

    def rotate_if_due(self) -> bool:
        """Close the current file if its time is up (no line needed). True if one was."""
        with self._lock:
            if (self._file is None or self._every is None
                    or self._clock.now_ms() < self._due_ms):
                return False
            self._finish()
            return True

    def rotate(self) -> bool:
        """Close the current file now, if one is open. True if one was."""
        with self._lock:
            if self._file is None:
                return False
            self._finish()
            return True

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        """Close (and rename into place) the current file; later writes raise."""
        with self._lock:
            if self._file is not None:
                self._finish()
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def _open(self, seq: int) -> None:
        name = journal_file_name(self._nameserver_id, seq, gzip=self._gzip)
        final = self._directory / name
        hidden = self._directory / ("." + name)
        if final.exists() or hidden.exists():
            raise InvalidRequest(f"journal file {name} exists already in {self._directory} "
                                 f"(seq {seq} written twice?)", field="seq", value=seq)
        if self._gzip:
            self._file = open_journal(hidden, "w")
        else:
            self._file = open(hidden, "x", encoding="utf-8", newline="\n",  # noqa: SIM115
                              buffering=1 if self._line_buffered else -1)
        self._hidden = hidden
        self._size = 0
        self._due_ms = self._clock.now_ms() + (self._every or 0)

    def _finish(self) -> None:
        file, hidden = self._file, self._hidden
        assert file is not None and hidden is not None
        self._file = self._hidden = None
        file.flush()
        if self._fsync and not self._gzip:
            os.fsync(file.fileno())
        file.close()
        final = hidden.with_name(hidden.name[1:])
        os.rename(hidden, final)
        self.files_closed += 1
        self.last_closed = final
        if self._on_close is not None:
            self._on_close(final)

    def __enter__(self) -> RotatingJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<RotatingJournal {self._nameserver_id} in {self._directory} "
                f"files_closed={self.files_closed}>")
