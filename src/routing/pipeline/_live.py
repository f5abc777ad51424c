"""The live watcher's Python steps, without Spark: a journal file split by name server, one
name server's replay continued file by file, its state as bytes, and its incidents.

``routing watch`` (``_live_spark.py``) runs these inside Spark Structured Streaming:

1. `split_file` (stateless, per new file): the file's lines as `Line` tuples, read with the
   batch rules (``\\n`` only, gzip by its magic bytes, bytes that are not UTF-8 kept for the
   reader to reject), grouped by the name server each line names (`line_key`, the reader's
   own lookup; ``""`` for lines naming none, and for the rows about whole files: skipped
   names, empty files, gzip cut short);
2. `LiveReplay.feed` (stateful, per name server): the batch's read→replay loop
   (``_read_replay.ReadReplay``) continued over the name server's new lines, its open
   sessions kept open (``finish=False``); between micro-batches it is kept in Spark's state
   store as `dump_state` bytes (a pickle of the reader and the manager: O(state), never
   the lines). It emits the rows that are final (``sessions`` that ended, ``expiries``,
   ``route_changes``, ``rejected``), the incidents of `incidents_of` and a ``status`` row:
   what the end of the journal would add now (`LiveReplay.status`: the ``name_servers``
   row and the ``open`` sessions; the files held for a missing one). Rotated files that
   arrive early are held until the missing ones arrive (`LiveReplay.admit`,
   ``_live_order.py``), so a name server's lines are replayed in sequence order.

After the stream has consumed a folder, the final rows plus the latest status of every
name server are the rows `analyze_local` gives for the same files (``_live_tables.py``
sweeps the topics from them). All times are ms.
"""

from __future__ import annotations

import gzip
import io
import pickle
import threading
import weakref
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from ._files import (
    EMPTY_REASON,
    SKIPPED_REASON,
    Line,
    decode_line,
    file_row,
    line_key,
    truncated_reason,
)
from ._live_order import FileOrder, Piece
from ._read_replay import NsStats, ReadReplay, name_server_rows
from ._schema import Emitted, Row

__all__ = ["FINAL_TABLES", "INCIDENT", "STATUS", "LiveReplay", "dump_state", "incidents_of",
           "load_state", "split_file"]

#: The tables whose rows are final when the live replay emits them (appended as they come).
FINAL_TABLES = ("sessions", "expiries", "route_changes", "rejected")
#: The live replay's own kinds of row: an incident, and a name server's status.
INCIDENT, STATUS = "incident", "status"

_RLOCK, _LOCK = type(threading.RLock()), type(threading.Lock())


class _Gone:
    """A referent that is gone at once: what a pickled weak reference points to."""


def _dead_ref() -> weakref.ref[_Gone]:
    return weakref.ref(_Gone())


class _StatePickler(pickle.Pickler):
    """Pickles a replay's state: its locks as new locks, its weak references (the steady
    re-registration cache, ``Live.steady``) as dead ones (the next renewal takes the full
    path once and caches again: the same answers)."""

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is _RLOCK:
            return threading.RLock, ()
        if kind is _LOCK:
            return threading.Lock, ()
        if kind is weakref.ref:
            return _dead_ref, ()
        return NotImplemented


def dump_state(replay: LiveReplay) -> bytes:
    """``replay`` as bytes for Spark's state store. O(state): about 100 kB and 3 ms for a
    name server of 20 broker groups (measured on a simulator journal)."""
    out = io.BytesIO()
    _StatePickler(out, protocol=5).dump(replay)
    return out.getvalue()


def load_state(data: bytes) -> LiveReplay:
    """The inverse of `dump_state` (bytes this process or a worker wrote: never untrusted
    input — the checkpoint folder is the watcher's own)."""
    replay = pickle.loads(data)
    assert isinstance(replay, LiveReplay)
    return replay


# --------------------------------------------------------------------------- read

def _numbered(source: str, content: bytes, notes: list[Row]) -> Iterator[Line]:
    """``_files._text_lines`` on bytes in memory: the same lines, places and notes."""
    handle: Any = (gzip.GzipFile(fileobj=io.BytesIO(content), mode="rb")
                   if content[:2] == b"\x1f\x8b" else io.BytesIO(content))
    number = 0
    try:
        for number, raw in enumerate(handle, start=1):
            raw = raw.rstrip(b"\n")
            try:
                yield source, number, raw.decode("utf-8"), None, None
            except UnicodeDecodeError:
                yield source, number, None, raw, None
    except (EOFError, OSError, zlib.error) as exc:
        notes.append(file_row(source, number + 1, "read", truncated_reason(exc)))
        return
    if number == 0:
        notes.append(file_row(source, 0, "read", EMPTY_REASON))


def split_file(source: str, content: bytes, *, journal: bool = True
               ) -> dict[str, tuple[list[Line], list[Row]]]:
    """One new file's lines by name server: ``{ns: (lines, notes)}`` (``""``: lines that
    name none, and the ``rejected`` rows about the whole file). ``journal=False`` (a name
    `_files.kind_in_folder` skips) gives only its ``skipped`` row. O(lines): one JSON parse
    a line (`line_key`)."""
    out: dict[str, tuple[list[Line], list[Row]]] = {}
    notes: list[Row] = []
    if not journal:
        notes.append(file_row(source, 0, "skipped", SKIPPED_REASON))
    else:
        for item in _numbered(source, content, notes):
            text, raw = item[2], item[3]
            key = line_key(text if text is not None else decode_line(raw or b""))[0]
            out.setdefault(key or "", ([], []))[0].append(item)
    if notes:
        out.setdefault("", ([], []))[1].extend(notes)
    return out


# --------------------------------------------------------------------------- replay

def incidents_of(table: str, row: Row, writable: dict[str, bool]) -> Iterator[Row]:
    """The incidents one final row announces: ``broker_expired`` (an ``expiries`` row),
    ``channel_closed`` (a session ended by its channel), ``topic_unwritable`` /
    ``topic_writable`` (a ``route_changes`` row taking the topic's producer-writable queues
    to 0 or back from 0 on its name server; ``writable`` holds each topic's last state
    there and is updated). O(1)."""
    if table == "expiries":
        yield {"event": "broker_expired", "ns": row["ns"], "at_ms": row["detected_ms"],
               "cluster": row["cluster"], "broker_name": row["broker_name"],
               "broker_id": row["broker_id"], "broker_addr": row["broker_addr"],
               "last_heartbeat_ms": row["last_heartbeat_ms"],
               "detection_delay_ms": row["latency_ms"], "timeout_ms": row["timeout_ms"],
               "overdue_ms": row["overdue_ms"]}
    elif table == "sessions" and row["end_reason"] == "channel_closed":
        yield {"event": "channel_closed", "ns": row["ns"], "at_ms": row["end_ms"],
               "cluster": row["cluster"], "broker_name": row["broker_name"],
               "broker_id": row["broker_id"], "broker_addr": row["broker_addr"],
               "last_heartbeat_ms": row["last_heartbeat_ms"]}
    elif table == "route_changes":
        now = bool(row["present"]) and row["producer_writable_queue_count"] > 0
        before = writable.get(row["topic"])
        writable[row["topic"]] = now
        if before is not None and before != now:
            yield {"event": "topic_writable" if now else "topic_unwritable", "ns": row["ns"],
                   "at_ms": row["at_ms"], "topic": row["topic"], "present": row["present"],
                   "groups": row["groups"],
                   "producer_writable_queue_count": row["producer_writable_queue_count"]}


class LiveReplay:
    """One name server's replay, continued over its new lines micro-batch after
    micro-batch (see the module docstring). The same `ReadReplay` the batch engines run,
    never finished: `status` says what its end would add."""

    def __init__(self) -> None:
        self.loop = ReadReplay()
        self.writable: dict[str, dict[str, bool]] = {}  # ns -> topic -> producer-writable
        self.order = FileOrder()

    def admit(self, pieces: Iterable[Piece], now_ms: int, wait_ms: int
              ) -> list[tuple[list[Line], list[Row]]]:
        """`FileOrder.admit` (the files to replay now, early ones held) on this name
        server's state; a state pickled before the order was kept gets an empty one."""
        if not hasattr(self, "order"):
            self.order = FileOrder()
        return self.order.admit(pieces, now_ms, wait_ms)

    def feed(self, lines: Iterable[Line], notes: Iterable[Row] = ()) -> Iterator[Emitted]:
        """Read and replay ``lines`` (this name server's, in reading order), then pass
        ``notes`` on as ``rejected`` rows; yield every final row and incident. O(lines)."""
        for table, row in self.loop.run(lines, finish=False):
            yield table, row
            if table in ("expiries", "sessions", "route_changes"):
                for incident in incidents_of(table, row,
                                             self.writable.setdefault(row["ns"], {})):
                    yield INCIDENT, incident
        for note in notes:
            yield "rejected", note

    def status(self) -> Row:
        """What the end of the journal would add now: ``name_servers`` rows (the reader's
        stats, the rejected lines counted) and the ``open`` sessions, closed as
        `ReadReplay.finish` would close them. O(open sessions); changes nothing."""
        loop = self.loop
        rejected = dict(loop.rejected)
        open_rows: list[Row] = []
        for ns, deriver in loop.derivers.items():
            if deriver.rejected:
                rejected[ns] = rejected.get(ns, 0) + deriver.rejected
            stats = loop.reading.stats.get(ns)
            end = stats.last_ms if stats is not None else 0
            open_rows += deriver.open_rows(end)
        stats_list: list[NsStats] = list(loop.reading.stats.values())
        order = getattr(self, "order", None)
        return {"name_servers": name_server_rows(stats_list, rejected),
                "open_sessions": open_rows,
                "live_brokers": {ns: len(d.sessions) for ns, d in loop.derivers.items()},
                "held_files": len(order.held) if order is not None else 0,
                "released_files": order.released if order is not None else 0}
