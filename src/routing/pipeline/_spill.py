"""Disk spills for the reference: sorted runs of rows, and route texts kept once by digest.

The reference used to hold every output row (and every route change's answer for the sweep)
in memory until the end: its memory grew with the journal, about 1.6 GB at 8.5 M records
of the fleet shape (``docs/performance.md``). These two classes hold a bounded part in
memory and the rest in a temporary folder, so memory stays O(state + buffers):

* `SortedRuns` — tuples sorted by a key, an external merge sort: up to ``limit`` rows in
  memory; a full buffer is sorted and written as a *run* (``marshal`` blocks of `BLOCK`
  rows); `SortedRuns.sorted` merges the runs and the buffer (`heapq.merge`), one block of
  each run in memory at a time.
* `RouteTexts` — route JSON texts (≈ 1.6 kB, up to 100 kB each) written once per digest
  into one file; a row keeps a small handle ``(offset, bytes)`` instead (`RouteTexts.put`,
  `RouteTexts.get`).

``marshal`` keeps the rows' Python values exactly (str, int, float, bool, None, tuples),
and reads back at about 1 µs a row. Nothing here is Spark's (Spark spills on its own).
"""

from __future__ import annotations

import heapq
import marshal
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .._errors import InvalidRequest

__all__ = ["BLOCK", "RouteTexts", "SortedRuns", "SpillFolder"]

#: Rows per ``marshal`` block of a run: what a merge holds of each run at a time.
BLOCK = 1_024

#: A route text's place in the `RouteTexts` file: (offset, length in bytes).
Handle = tuple[int, int]


class SpillFolder:
    """A temporary folder in ``parent`` (made too if need be; default: the system's
    temporary folder), made on first use, removed by `close` (or when collected)."""

    def __init__(self, parent: str | os.PathLike[str] | None = None) -> None:
        self._parent = parent
        self._path: Path | None = None
        self._count = 0

    def new_file(self, prefix: str) -> Path:
        """A fresh file name in the folder (made now if need be)."""
        if self._path is None:
            if self._parent is not None:
                Path(self._parent).mkdir(parents=True, exist_ok=True)
            self._path = Path(tempfile.mkdtemp(prefix="routing-spill-", dir=self._parent))
            weakref.finalize(self, shutil.rmtree, self._path, True)
        self._count += 1
        return self._path / f"{prefix}-{self._count:05d}"

    def close(self) -> None:
        """Remove the folder and every file in it."""
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None


class SortedRuns:
    """Tuples in ``key`` order, at most ``limit`` of them in memory (`add`), the rest in
    sorted runs on disk; `sorted` gives them all in order.

    ``sort`` sorts a buffer in place (default: ``list.sort(key=key)``), in the order
    ``key`` gives; rows whose keys are equal must be interchangeable (equal rows), since
    a merge may order them either way. Cost: O(n log n) time; memory: ``limit`` rows plus
    one block of `BLOCK` rows per run while merging.
    """

    def __init__(self, key: Callable[[Any], Any], folder: SpillFolder, *, limit: int,
                 sort: Callable[[list[Any]], None] | None = None, name: str = "run") -> None:
        if limit < 1:
            raise InvalidRequest(f"limit must be at least 1, not {limit}", field="limit",
                                 value=limit)
        self.key = key
        self.limit = limit
        self.buffer: list[Any] = []
        self.runs: list[Path] = []
        self._folder = folder
        self._sort = sort or (lambda rows: rows.sort(key=key))
        self._name = name
        self.count = 0

    def add(self, row: Any) -> None:
        """Keep one row; a full buffer is written as a run. O(1) amortized, plus the sort."""
        self.buffer.append(row)
        self.count += 1
        if len(self.buffer) >= self.limit:
            self.spill()

    def spill(self) -> None:
        """Write the buffer as one sorted run and empty it (nothing if it is empty)."""
        if not self.buffer:
            return
        self._sort(self.buffer)
        path = self._folder.new_file(self._name)
        with open(path, "wb") as f:
            for start in range(0, len(self.buffer), BLOCK):
                marshal.dump(self.buffer[start:start + BLOCK], f)
        self.runs.append(path)
        self.buffer = []

    def __iter__(self) -> Iterator[Any]:
        """Every row added, runs first (each sorted), then the buffer; keeps them."""
        for path in self.runs:
            yield from _read_run(path, keep=True)
        yield from list(self.buffer)

    def sorted(self) -> Iterator[Any]:
        """Every row added, in ``key`` order; empties this (read once). With no run on
        disk, the buffer sorted in place."""
        buffer, runs = self.buffer, self.runs
        self.buffer, self.runs, self.count = [], [], 0
        self._sort(buffer)
        if not runs:
            yield from buffer
            return
        yield from heapq.merge(*(_read_run(p) for p in runs), buffer, key=self.key)


def _read_run(path: Path, *, keep: bool = False) -> Iterator[Any]:
    """The rows of one run, a block at a time; the file is removed once read (unless
    ``keep``)."""
    try:
        with open(path, "rb") as f:
            while True:
                try:
                    block = marshal.load(f)
                except EOFError:
                    break
                yield from block
    finally:
        if not keep:
            path.unlink(missing_ok=True)


class RouteTexts:
    """Route texts written once each into one file, found again by their handle.

    `put` keeps a text under its key (the route's digest: equal routes, equal digests)
    and returns its `Handle`; `get` reads it back (remembered while the remembered texts
    hold at most ``cache_chars`` characters). Memory: at most ``max_keys`` handles, plus
    the cache."""

    def __init__(self, folder: SpillFolder, *, cache_chars: int = 4 << 20,
                 max_keys: int = 65_536) -> None:
        self._folder = folder
        self._max_keys = max_keys
        self._handles: dict[Any, Handle] = {}
        self._file: Any = None
        self._fd = -1
        self._end = 0
        self._cache: dict[Handle, str] = {}
        self._cached = 0
        self._cache_chars = cache_chars

    def put(self, key: Any, text: str) -> Handle:
        """The handle of ``text`` stored under ``key`` (written now if the key is new).
        Keys are remembered up to ``max_keys``, then forgotten at once (a text met again
        is written again: disk, not memory, grows)."""
        handle = self._handles.get(key)
        if handle is None:
            if len(self._handles) >= self._max_keys:
                self._handles.clear()
            if self._file is None:
                self._file = open(self._folder.new_file("routes"), "w+b")  # noqa: SIM115
                self._fd = self._file.fileno()
            data = text.encode()
            self._file.write(data)
            handle = self._handles[key] = (self._end, len(data))
            self._end += len(data)
        return handle

    def get(self, handle: Handle) -> str:
        """The text behind ``handle``. O(its length)."""
        text = self._cache.get(handle)
        if text is None:
            self._file.flush()
            text = os.pread(self._fd, handle[1], handle[0]).decode()
            if self._cached + len(text) > self._cache_chars:
                self._cache.clear()
                self._cached = 0
            self._cache[handle] = text
            self._cached += len(text)
        return text

    def __len__(self) -> int:
        return len(self._handles)

    def close(self) -> None:
        """Close the file (the folder's owner removes it)."""
        if self._file is not None:
            self._file.close()
            self._file = None
