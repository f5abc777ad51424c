"""The replay deriver: the events of `routing.journal.Replayer` turned into output rows.

One `ReplayDeriver` follows one replay partition: a whole name server (the reference, and
``partition="ns"``), or one independent set of its broker groups (``partition="group"``, see
``_groups.py``). It sees every entry of the partition in sequence order together with the
`ReplayEvent` the library produced for it, and emits:

* ``sessions`` — a live entry's life: opened by an accepted registration with
  ``first=True`` (`BrokerRegistered`), refreshed by every accepted registration, by
  ``heartbeat`` answering True and by ``query_data_version`` of a known broker, and closed
  by a `BrokerRemoved` (its reason), by a registration of the same address as another group
  member (``replaced``), by a name-server restart (``restart``) or by the end of the journal
  (``open``);
* ``expiries`` — each ``expired`` removal, with the timeout from the scan's `ExpiredBroker`;
* ``contrib`` — the partition's route of every topic in `RouteChange.changed_topics`, right
  after the write (the input of the per-topic sweep, ``_sweep.py``); or, replaying a whole
  name server with ``changes=True``, ``route_changes`` — only the routes that differ from
  the topic's previous answer there, as the sweep would emit them (it then takes their
  answers, not the route texts: `_sweep.TopicSweep.feed_changes`);
* ``rejected`` — entries the manager refused (`ReplayError`), counted in ``rejected``.

The loop that reads lines and feeds them here is ``_read_replay.py``, the same for both
engines.

Everything is taken from the library's events and results; nothing re-implements its rules.
All times are ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .._manager import RouteInfoManager
from .._messages import BrokerRegistered, BrokerRemoved, ExpiredBroker, VersionAnswer
from .._values import TopicRouteData
from ..journal import (
    Heartbeat,
    JournalEntry,
    JournalHeader,
    JournalRecord,
    QueryDataVersion,
    Register,
    Replayer,
    ReplayError,
    ReplayEvent,
    Scan,
)
from ._answers import Answer, canonical_json, change_row
from ._schema import Emitted, Row

__all__ = ["ReplayDeriver", "SourceRef"]

#: Where an entry came from: (source, line number, line text).
SourceRef = tuple[str, int, str]


class _Session:
    __slots__ = ("broker_id", "broker_name", "gap", "heartbeats", "last", "start")

    def __init__(self, reg: BrokerRegistered, at: int) -> None:
        self.broker_name = reg.broker_name
        self.broker_id = reg.broker_id
        self.start = at
        self.last = at
        self.heartbeats = 1
        self.gap = 0

    def refresh(self, at: int) -> None:
        self.heartbeats += 1
        gap = at - self.last
        if gap > self.gap:
            self.gap = gap
        self.last = at


def _route_of(manager: RouteInfoManager, topic: str) -> TopicRouteData | None:
    """The stored route, also while the readiness window (D10) makes pickup_route refuse:
    the pipeline reports what the tables held, not whether the server answered yet."""
    return manager.stored_route(topic)


class ReplayDeriver:
    """Replays one partition's entries and derives its rows (see the module docstring).

    ``ns`` is the name server, ``part`` the partition number inside it (0 when whole),
    ``end_ms`` the end of the name server's journal (the end of ``open`` sessions). Feed
    entries with `apply` in sequence order, then call `finish`. ``primary`` is False for a
    copy of an entry that is replayed in several partitions (headers, scans, topic
    deletions, channel closes): its replay rejection is reported by the primary copy only.
    ``changes`` (a whole name server only: one partition's answer is then the name server's)
    emits ``route_changes`` rows instead of contributions.
    """

    def __init__(self, ns: str, part: int, *, end_ms: int, changes: bool = False) -> None:
        self.ns = ns
        self.part = part
        self.end_ms = end_ms
        self.changes = changes
        self.replayer = Replayer()
        self.sessions: dict[tuple[str, str], _Session] = {}
        #: topics whose last route was present, with its digest (``changes``; else None)
        self.present: dict[str, str | None] = {}
        #: ``rejected`` rows emitted (replay rejections of primary copies)
        self.rejected = 0

    # ------------------------------------------------------------------ input

    def apply(self, entry: JournalEntry, where: SourceRef, *,
              primary: bool = True) -> Iterable[Emitted]:
        """Replay one entry; return the rows it produces (lazily).

        A steady re-registration (the bulk of a journal: a broker re-sending the table it
        last sent) goes through `renew` and produces no row."""
        if type(entry) is JournalRecord and type(entry.call) is Register and self.renew(
                entry.call, entry.at_ms):
            return ()
        return self._apply(entry, where, primary)

    def steady(self, call: Register | Scan, at_ms: int) -> bool:
        """Replay a record the reader accepted on its steady lane (`JournalReader.steady`)
        in O(1) and return True when it is a steady re-registration (`renew`) or a scan
        that removes nothing (`Replayer.idle_scan`: no row either way); else change
        nothing but the clock and return False (then `apply` it)."""
        if isinstance(call, Scan):
            return self.replayer.idle_scan(self.ns, at_ms)
        return self.renew(call, at_ms)

    def renew(self, call: Register, at_ms: int) -> bool:
        """Replay a ``register`` through `Replayer.renew_call` (O(1)) when it is steady,
        refreshing its session (what the full replay derives from its event), and return
        True; else change nothing but the clock and return False (then `apply` it)."""
        reg = call.registration
        session = self.sessions.get((reg.cluster, reg.broker_addr))
        if (session is not None and session.broker_id == reg.broker_id
                and session.broker_name == reg.broker_name
                and self.replayer.renew_call(self.ns, at_ms, call)):
            session.refresh(at_ms)
            return True
        return False

    def _apply(self, entry: JournalEntry, where: SourceRef,
               primary: bool) -> Iterator[Emitted]:
        if isinstance(entry, JournalHeader) and self.replayer.managers.get(self.ns) is not None:
            yield from self._restart(entry)
        try:
            event = self.replayer.apply(entry)
        except ReplayError as exc:
            if primary:
                self.rejected += 1
                source, line, text = where
                yield "rejected", {"source": source, "line": line, "stage": "replay",
                                   "reason": str(exc), "ns": self.ns, "seq": entry.seq,
                                   "text": text}
            return
        if isinstance(entry, JournalRecord):
            yield from self._record(entry, event)

    def _restart(self, header: JournalHeader) -> Iterator[Emitted]:
        """A later header: the name server restarted empty. Every session ends and every
        route disappears at the header's time."""
        at = header.start_ms
        for key in sorted(self.sessions):
            yield self._close(key, at, "restart")
        for topic in sorted(self.present):
            yield from self._route(topic, at, header.seq, None)

    def _record(self, record: JournalRecord, event: ReplayEvent) -> Iterator[Emitted]:
        at = event.at_ms
        call = record.call
        result = event.result
        # heartbeat answers True and query_data_version has a stored version exactly when
        # the manager refreshed a live entry
        refreshed = (result is True if isinstance(call, Heartbeat) else
                     isinstance(call, QueryDataVersion) and isinstance(result, VersionAnswer)
                     and result.stored is not None)
        if refreshed:
            assert isinstance(call, Heartbeat | QueryDataVersion)
            self._refresh(call.cluster, call.broker_addr, at)
        change = event.change
        if change is None:
            return
        timeouts: dict[tuple[str, str], int] = {}
        if isinstance(result, tuple):
            for gone in result:
                if isinstance(gone, ExpiredBroker):
                    timeouts[(gone.cluster, gone.broker_addr)] = gone.timeout_ms
        for removed in change.removed:
            yield from self._removed(removed, at, event.seq, timeouts)
        for registered in change.registered:
            yield from self._registered(registered, at)
        if not change.changed_topics:
            return
        manager = self.replayer.managers[self.ns]  # a snapshot mapping: built only here
        for topic in sorted(change.changed_topics):
            yield from self._route(topic, at, event.seq, _route_of(manager, topic))

    def _route(self, topic: str, at: int, seq: int,
               route: TopicRouteData | None) -> Iterator[Emitted]:
        """The row of ``topic``'s route (None: none) after record ``seq`` at ``at`` ms: its
        contribution, or with ``changes`` its ``route_changes`` row when it differs from
        the previous answer (digest against digest, as the per-topic stage compares)."""
        present = self.present
        if not self.changes:
            if route is None:
                present.pop(topic, None)
            else:
                present[topic] = None
            yield "contrib", {"ns": self.ns, "topic": topic, "at_ms": at, "seq": seq,
                              "part": self.part,
                              "route_json": None if route is None else canonical_json(route)}
            return
        if route is None:
            if topic not in present:
                return
            del present[topic]
            answer = Answer.of(None, at)
        else:
            answer = Answer.of(route, at)
            if present.get(topic, "") == answer.digest:
                return
            present[topic] = answer.digest
        yield "route_changes", change_row(self.ns, topic, seq, answer)

    # ------------------------------------------------------------------ sessions

    def _refresh(self, cluster: str, addr: str, at: int) -> None:
        session = self.sessions.get((cluster, addr))
        if session is not None:
            session.refresh(at)

    def _registered(self, reg: BrokerRegistered, at: int) -> Iterator[Emitted]:
        key = (reg.cluster, reg.broker_addr)
        session = self.sessions.get(key)
        if session is not None and (session.broker_name, session.broker_id) == (
                reg.broker_name, reg.broker_id) and not reg.first:
            session.refresh(at)
            return
        if session is not None:
            yield self._close(key, at, "replaced")
        self.sessions[key] = _Session(reg, at)

    def _removed(self, removed: BrokerRemoved, at: int, seq: int,
                 timeouts: dict[tuple[str, str], int]) -> Iterator[Emitted]:
        key = (removed.cluster, removed.broker_addr)
        if key in self.sessions:
            yield self._close(key, at, removed.reason, last=removed.last_update_ms)
        if removed.reason == "expired":
            timeout = timeouts.get(key)
            yield "expiries", {
                "ns": self.ns, "cluster": removed.cluster, "broker_name": removed.broker_name,
                "broker_id": removed.broker_id, "broker_addr": removed.broker_addr,
                "last_heartbeat_ms": removed.last_update_ms, "detected_ms": at,
                "latency_ms": at - removed.last_update_ms, "timeout_ms": timeout,
                "overdue_ms": (None if timeout is None
                               else at - (removed.last_update_ms + timeout)),
                "seq": seq}

    def _close(self, key: tuple[str, str], at: int, reason: str, *,
               last: int | None = None) -> Emitted:
        row = self.session_row(key, at, reason, last=last)
        del self.sessions[key]
        return "sessions", row

    def session_row(self, key: tuple[str, str], at: int, reason: str, *,
                    last: int | None = None) -> Row:
        """The ``sessions`` row of the open session ``key`` (cluster, address) ended at
        ``at`` ms for ``reason``, leaving it open (the live watcher's status). O(1)."""
        session = self.sessions[key]
        return {
            "ns": self.ns, "cluster": key[0], "broker_name": session.broker_name,
            "broker_id": session.broker_id, "broker_addr": key[1],
            "start_ms": session.start, "end_ms": at, "end_reason": reason,
            "duration_ms": at - session.start, "heartbeats": session.heartbeats,
            "last_heartbeat_ms": session.last if last is None else last,
            "largest_gap_ms": session.gap}

    # ------------------------------------------------------------------ end

    def finish(self) -> Iterator[Emitted]:
        """Close the sessions still open at the end of the journal (reason ``open``)."""
        end = self.end_ms
        for key in sorted(self.sessions):
            yield self._close(key, max(end, self.sessions[key].last), "open")

    def open_rows(self, end_ms: int) -> list[Row]:
        """The rows `finish` would yield if the journal ended at ``end_ms``, changing
        nothing (the live watcher's status). O(open sessions log open sessions)."""
        return [self.session_row(key, max(end_ms, self.sessions[key].last), "open")
                for key in sorted(self.sessions)]
