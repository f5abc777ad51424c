"""Snapshot records: a name server's whole `RouteInfoManager` state, written into its journal
every so often, so that a replay can start at any snapshot instead of at the header.

A snapshot is a record with ``op`` ``"snapshot"``; its ``args`` hold the record's format
(``args.format``, `SNAPSHOT_RECORD_FORMAT`), the `routing.ManagerSnapshot` JSON form
(``args.state``, channels as the journal writes them) and every topic table whose id stays
valid after it (``args.tables``, ``_tables.py``). It takes a sequence number like any line
and describes the state after every line before it. A table id not listed ends there (the
recorder writes that table again in full on its next use, the reader forgets the id), so
the lines after a snapshot never need anything before it. ``docs/journal.md`` ("Snapshots",
"Splitting a replay") is the reference.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

import attrs

from .._errors import InvalidRequest
from .._frozen import FrozenMap
from .._messages import Registration
from .._snapshot import ManagerSnapshot
from .._validate import check_int, check_name
from ._args import decode_channel, encode_channel
from ._tables import tables_from_json, tables_to_json

__all__ = ["SNAPSHOT_RECORD_FORMAT", "JournalSnapshot", "SnapshotSchedule", "decode_snapshot",
           "snapshot_line"]

#: The version of a snapshot line's ``args`` this module writes and reads.
SNAPSHOT_RECORD_FORMAT = 1

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
    #: The topic tables whose ids stay valid after the snapshot, by id (no channel).
    tables: FrozenMap[int, Registration] = attrs.field(factory=FrozenMap)

    op: ClassVar[str] = "snapshot"


def snapshot_line(nameserver_id: str, seq: int, at_ms: int, state: ManagerSnapshot,
                  tables: Mapping[int, Registration], channel_refs: dict[Hashable, int]
                  ) -> str:
    """The line (without newline) recording ``state`` and the still valid ``tables`` as
    snapshot ``seq`` at ``at_ms``; opaque channels are numbered in ``channel_refs``, the
    recorder's own, so they match the lines around. Compact JSON, keys in record order.
    O(state + tables)."""
    args = {"format": SNAPSHOT_RECORD_FORMAT,
            "state": state.to_json(lambda ch: encode_channel(ch, channel_refs)),
            "tables": tables_to_json(tables)}
    doc = {"ns": nameserver_id, "seq": seq, "ts": at_ms, "op": "snapshot", "cluster": None,
           "broker_name": None, "broker_addr": None, "args": args}
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
    args = doc["args"]
    if not isinstance(args, Mapping) or args.get("format") != SNAPSHOT_RECORD_FORMAT:
        got = args.get("format") if isinstance(args, Mapping) else args
        raise InvalidRequest(f"snapshot: args.format must be {SNAPSHOT_RECORD_FORMAT} (this "
                             f"reader's), got {got!r:.80}", field="args.format", value=got)
    if set(args) != {"format", "state", "tables"}:
        raise InvalidRequest(f"snapshot: args must hold format, state and tables, got "
                             f"{sorted(args)}", field="args")
    return JournalSnapshot(nameserver_id=check_name("ns", doc["ns"]),
                           seq=check_int("seq", doc["seq"], low=1),
                           at_ms=check_int("ts", doc["ts"], low=0),
                           state=ManagerSnapshot.from_json(args["state"], decode_channel),
                           tables=tables_from_json(args["tables"]))


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
