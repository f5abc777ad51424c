"""The name server's KV configuration (Java ``KVConfigManager``), optionally persisted.

In memory by default. With a path (``routing serve --kv-config PATH``) it is loaded at start
from Java's ``kvConfig.json`` layout, ``{"configTable": {namespace: {key: value}}}``, and
every change is written to a temporary file, fsynced and renamed over the file **before**
it becomes visible to readers or is answered (durable before publish). Writers that arrive
while a write is under way share the next one (group commit), so many connections putting
at once cost few fsyncs and lose nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from ..._errors import RoutingError

__all__ = ["KVConfigError", "KVStore"]

_Tables = dict[str, dict[str, str]]
# (op, namespace, key, value); op "put" or "delete"
_Op = tuple[str, str, str, str]


class KVConfigError(RoutingError):
    """The KV file cannot be read, parsed or written; names the file. Raised after the
    O(size) read or write failed; nothing changed."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class _Batch:
    __slots__ = ("done", "error", "ops")

    def __init__(self, ops: list[_Op]) -> None:
        self.ops = ops
        self.done = False
        self.error: BaseException | None = None


class KVStore:
    """Namespaces of string keys and values. Thread-safe.

    Reads are O(1) (`namespace` copies one namespace). Without ``path`` a change is O(1);
    with it, a change costs one write of the whole table (O(size)) shared with every
    change that arrived meanwhile. A change that cannot be written raises `KVConfigError`
    and is not applied.
    """

    def __init__(self, initial: Mapping[str, Mapping[str, str]] | None = None, *,
                 path: str | Path | None = None) -> None:
        self._lock = threading.Lock()          # guards _tables (the published state)
        self._write_lock = threading.Lock()    # one writer (group leader) at a time
        self._tables: _Tables = {ns: dict(t) for ns, t in (initial or {}).items()}
        self._pending: list[_Batch] = []
        self.path = Path(path) if path is not None else None
        #: Number of file writes so far (each may carry several changes).
        self.writes = 0

    @classmethod
    def open(cls, path: str | Path) -> KVStore:
        """Load ``path`` (a missing file is an empty store, as in Java) and persist to it.

        A file that is not Java's layout raises `KVConfigError` naming it; the file is
        left untouched."""
        return cls(load_kv_file(path), path=path)

    # ------------------------------------------------------------------ reads

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            table = self._tables.get(namespace)
            return None if table is None else table.get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace, or None if it never existed."""
        with self._lock:
            table = self._tables.get(namespace)
            return None if table is None else dict(table)

    def snapshot(self) -> dict[str, dict[str, str]]:
        """A deep copy of every namespace."""
        with self._lock:
            return {ns: dict(t) for ns, t in self._tables.items()}

    # ------------------------------------------------------------------ writes

    def put(self, namespace: str, key: str, value: str) -> None:
        self._change([("put", namespace, key, value)])

    def delete(self, namespace: str, key: str) -> None:
        """Remove a key; an emptied namespace stays (Java). Written even when absent."""
        self._change([("delete", namespace, key, "")])

    def flush(self) -> None:
        """Write the whole table now (a no-op in memory); for a clean shutdown."""
        if self.path is not None:
            self._change([])

    def _change(self, ops: list[_Op]) -> None:
        if self.path is None:
            with self._lock:
                _apply(self._tables, ops)
            return
        batch = _Batch(ops)
        with self._lock:
            self._pending.append(batch)
        with self._write_lock:
            if not batch.done:
                self._lead()
        if batch.error is not None:
            raise batch.error

    def _lead(self) -> None:
        """Write every pending change in one file write, then publish them (the caller
        holds the write lock)."""
        assert self.path is not None
        with self._lock:
            batches, self._pending = self._pending, []
            tables = {ns: dict(t) for ns, t in self._tables.items()}
        for batch in batches:
            _apply(tables, batch.ops)
        try:
            write_kv_file(self.path, tables)
        except KVConfigError as exc:
            for batch in batches:
                batch.error, batch.done = exc, True
            return
        with self._lock:
            self._tables = tables
            self.writes += 1
        for batch in batches:
            batch.done = True


def _apply(tables: _Tables, ops: list[_Op]) -> None:
    for op, namespace, key, value in ops:
        if op == "put":
            tables.setdefault(namespace, {})[key] = value
        else:
            table = tables.get(namespace)
            if table is not None:
                table.pop(key, None)


def load_kv_file(path: str | Path) -> _Tables:
    """Java's ``kvConfig.json``; {} if the file does not exist."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise KVConfigError(f"cannot read the KV config file: {exc}", path=str(p)) from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise KVConfigError(f"not a KV config file (invalid JSON: {exc})",
                            path=str(p)) from None
    table = doc.get("configTable") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or (table is not None and not isinstance(table, dict)):
        raise KVConfigError('not a KV config file: expected {"configTable": {namespace: '
                            "{key: value}}}", path=str(p))
    out: _Tables = {}
    for ns, entries in (table or {}).items():
        if not isinstance(entries, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in entries.items()):
            raise KVConfigError(f"not a KV config file: namespace {ns!r:.80} is not a map of "
                                "strings to strings", path=str(p))
        out[ns] = dict(entries)
    return out


def write_kv_file(path: Path, tables: Mapping[str, Mapping[str, str]]) -> None:
    """Atomically replace ``path``: write a temporary file beside it, fsync, rename, fsync
    the directory. Raises `KVConfigError`; the old file is then intact."""
    doc = {"configTable": {ns: dict(sorted(t.items())) for ns, t in sorted(tables.items())}}
    data = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    directory = path.parent
    tmp_name = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                        dir=directory)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp_name, path)
        tmp_name = None
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise KVConfigError(f"cannot write the KV config file: {exc}", path=str(path)) from None
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)

