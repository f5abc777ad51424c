"""Snapshot records: a name server's whole `RouteInfoManager` state, written into its journal
every so often, so that a replay can start at any snapshot instead of at the header.

A snapshot is a record with ``op`` ``"snapshot"`` whose ``args`` is the
`routing.ManagerSnapshot` JSON form (``args.format`` versions it; channels as the
journal writes them). It takes a sequence number like any line and describes the state
after every line before it. Table ids end at a snapshot: the recorder writes each table
again in full on its next use, and the reader forgets the ids defined before it, so the
lines after a snapshot never need anything before it. ``docs/journal.md`` ("Snapshots",
"Splitting a replay") is the reference.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

import attrs

from .._errors import InvalidRequest
from .._manager import RouteInfoManager
from .._restore import snapshot_manager
from .._snapshot import ManagerSnapshot
from .._validate import check_int, check_name
from ._calls import decode_channel, encode_channel

__all__ = ["JournalSnapshot", "SnapshotSchedule", "decode_snapshot", "snapshot_line"]

#: The fields of a snapshot line, in the order written (a record's, ``args`` the state).
_FIELDS = ("ns", "seq", "ts", "op", "cluster", "broker_name", "broker_addr", "args")


@attrs.frozen(kw_only=True)
class JournalSnapshot:
    """A ``snapshot`` line: the state of name server ``nameserver_id`` after every line
    before sequence number ``seq``, written at ``at_ms`` (journal time). A replay that
    meets it with a manager already built compares the two (`routing.journal.Replayer`);
    one that starts at it builds the manager from ``state``."""

    nameserver_id: str
    seq: int
    at_ms: int
    state: ManagerSnapshot

    op: ClassVar[str] = "snapshot"


def snapshot_line(nameserver_id: str, seq: int, at_ms: int, manager: RouteInfoManager,
                  channel_refs: dict[Hashable, int]) -> str:
    """The line (without newline) recording ``manager``'s state as snapshot ``seq`` at
    ``at_ms``; opaque channels are numbered in ``channel_refs``, the recorder's own, so
    they match the lines around. Compact JSON, keys in record order. O(state)."""
    state = snapshot_manager(manager).to_json(lambda ch: encode_channel(ch, channel_refs))
    doc = {"ns": nameserver_id, "seq": seq, "ts": at_ms, "op": "snapshot", "cluster": None,
           "broker_name": None, "broker_addr": None, "args": state}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def decode_snapshot(doc: Mapping[str, Any]) -> JournalSnapshot:
    """A parsed ``snapshot`` line as a `JournalSnapshot`, every field checked
    (`InvalidRequest` naming it). Sequence order is the reader's business. O(size)."""
    unknown = sorted(set(doc) - set(_FIELDS))
    if unknown:
        raise InvalidRequest(f"snapshot: unknown field(s) {', '.join(map(repr, unknown))}",
                             field="snapshot")
    for key in ("cluster", "broker_name", "broker_addr"):
        if doc.get(key) is not None:
            raise InvalidRequest(f"snapshot: top-level {key} must be null", field=key,
                                 value=doc[key])
    for key in ("ns", "seq", "ts", "args"):
        if key not in doc:
            raise InvalidRequest(f"snapshot: missing field {key!r}", field=key)
    return JournalSnapshot(nameserver_id=check_name("ns", doc["ns"]),
                           seq=check_int("seq", doc["seq"], low=1),
                           at_ms=check_int("ts", doc["ts"], low=0),
                           state=ManagerSnapshot.from_json(doc["args"], decode_channel))


@attrs.define
class SnapshotSchedule:
    """When a recorder writes its next snapshot: ``every_ms`` of journal time (ms) and/or
    ``every_records`` lines after the last one (or the header), whichever comes first.
    The recorder compares two integers per line (`due_ms`, `due_seq`)."""

    every_ms: int | None
    every_records: int | None
    due_ms: float = float("inf")
    due_seq: float = float("inf")

    @classmethod
    def of(cls, every_ms: int | None, every_records: int | None) -> SnapshotSchedule:
        """Checked settings (`InvalidRequest` naming the bad one); both None: never."""
        if every_ms is not None:
            check_int("snapshot_every_ms", every_ms, low=1)
        if every_records is not None:
            check_int("snapshot_every_records", every_records, low=1)
        return cls(every_ms, every_records)

    def start(self, at_ms: int, seq: int) -> None:
        """Count from a line written at ``at_ms`` with sequence number ``seq``."""
        if self.every_ms is not None:
            self.due_ms = at_ms + self.every_ms
        if self.every_records is not None:
            self.due_seq = seq + self.every_records
