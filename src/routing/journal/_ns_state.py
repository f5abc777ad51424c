"""What a `JournalReader` knows of one name server between two of its lines: the order
checks' last accepted ``seq``/``ts``, the restart epochs' numbering, the topic tables by id
and the remembered record rests of the fast lane; and how a header, a restart that numbers
from zero again, a table defined again and a snapshot line change it."""

from __future__ import annotations

from collections.abc import Hashable

import attrs

from .._calls import Call, Register
from .._messages import Registration
from ._snapshot import JournalSnapshot

__all__ = ["Known", "NsState", "after_snapshot", "built_call", "forget_table", "open_epoch"]


@attrs.frozen
class Known:
    """A decoded record rest: its columns and call (for ``register``, the table id and
    channel: the call is rebuilt through the table's `NsState.built` entry)."""

    op: str
    cluster: str | None
    broker_name: str | None
    broker_addr: str | None
    call: Call | None
    table_id: int
    channel: Hashable | None


@attrs.define
class NsState:
    """One name server's reading state (mutable; the reader's own)."""

    #: the line's own numbers of the last accepted line (within the current epoch) and its
    #: time (ms).
    last_seq: int
    last_ts: int
    tables: dict[int, Registration] = attrs.field(factory=dict)
    table_lines: dict[int, str] = attrs.field(factory=dict)
    bad_tables: dict[int, str] = attrs.field(factory=dict)
    #: table id → (channel, call) last built from it (replays reuse the object).
    built: dict[int, tuple[Hashable | None, Register]] = attrs.field(factory=dict)
    #: record text after the ``ns``/``seq``/``ts`` prefix → its decoding.
    known: dict[str, Known] = attrs.field(factory=dict)
    #: the time of the last record set aside as a clock jump, until a record is accepted.
    jump: int | None = None
    #: added to the sequence numbers of lines since a restart header whose sequence started
    #: again (`open_epoch`): entries keep one increasing ``seq`` per name server.
    offset: int = 0
    #: the table ids defined since the last header (one defined before it may be replaced).
    fresh_tables: set[int] = attrs.field(factory=set)


def open_epoch(state: NsState, seq: int, start: int) -> None:
    """A restart header whose sequence starts again (a name server that restarted without
    continuing its earlier journal's numbers, as before 0.2): a new epoch. Its entries are
    numbered on from the last accepted one (``offset``), so that ``(ns, seq)`` stays one
    increasing order; the line's own numbers are checked within the epoch. Only a header
    later than every accepted line opens one (a duplicated journal is still rejected).
    O(1)."""
    state.offset += state.last_seq + 1 - seq
    state.last_seq, state.last_ts, state.jump = seq, start, None


def forget_table(state: NsState, table_id: int) -> None:
    """Drop a table defined before the last header, which a line after it defines again (a
    restarted recorder numbers its tables from 1): references from here on mean the new
    definition. Remembered rests may name the old one: all are dropped (a restart is rare;
    they are learnt again). O(remembered rests)."""
    del state.tables[table_id]
    state.built.pop(table_id, None)
    state.known.clear()


def built_call(state: NsState, table_id: int, template: Registration,
               channel: Hashable | None) -> Register:
    """The call for ``template`` on ``channel``: the last one built when the channel is the
    same (equal calls, one object), else a new one. O(1)."""
    last = state.built.get(table_id)
    if last is not None and last[0] == channel:
        return last[1]
    reg = template if channel is None else attrs.evolve(template, channel=channel)
    call = Register(registration=reg)
    state.built[table_id] = (channel, call)
    return call


def after_snapshot(before: NsState | None, entry: JournalSnapshot, where: str) -> NsState:
    """A name server's reading state after its snapshot ``entry`` (at ``where``; ``seq``
    the line's own number): the table ids it lists, no other, all counted as defined since
    the last header (the recorder that wrote the snapshot numbers them; only a header lets
    a line define one again). The epoch's ``offset`` carries on. An unchanged table keeps
    its object, calls and remembered lines, as do remembered lines naming no table: the
    verdicts of a reader starting at the snapshot, with a warm fast lane.
    O(tables + remembered lines)."""
    after = NsState(last_seq=entry.seq, last_ts=entry.at_ms,
                    table_lines=dict.fromkeys(entry.tables, where),
                    fresh_tables=set(entry.tables))
    after.tables.update(entry.tables)
    if before is None:
        return after
    after.offset = before.offset
    kept: set[int] = set()
    for table_id, table in entry.tables.items():
        held = before.tables.get(table_id)
        if held is not None and held == table:
            after.tables[table_id] = held
            kept.add(table_id)
            if table_id in before.built:
                after.built[table_id] = before.built[table_id]
    after.known = {rest: known for rest, known in before.known.items()
                   if (known.table_id in kept if known.call is None
                       else '"table_id"' not in rest)}
    return after
