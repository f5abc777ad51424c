"""Replaying journals: rebuild each name server's manager on a `ManualClock`, yield events."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import attrs

from .._calls import CallResult, Register
from .._clock import ManualClock
from .._errors import InvalidType, RoutingError
from .._frozen import FrozenMap
from .._manager import RouteInfoManager
from .._messages import RouteChange
from .._restore import restore_manager, snapshot_manager
from ._format import JournalEntry, JournalHeader, JournalRecord
from ._snapshot import JournalSnapshot

__all__ = ["ReplayError", "ReplayEvent", "Replayer", "replay"]


class ReplayError(RoutingError):
    """A journal entry cannot be applied: no header for its name server, time going back,
    or a call the manager refuses (the journal was edited or mixed up). ``nameserver_id``
    and ``seq`` say which entry."""

    def __init__(self, message: str, *, nameserver_id: str, seq: int) -> None:
        super().__init__(f"{nameserver_id} seq {seq}: {message}")
        self.nameserver_id = nameserver_id
        self.seq = seq


@attrs.frozen(kw_only=True)
class ReplayEvent:
    """What one journal entry did on replay.

    ``op`` is the record's operation, or ``"header"`` for a (re)start. ``change`` is the
    `RouteChange` the manager handed its listener for this call (None when the call changed
    nothing; a call emits at most one), and ``result`` is the call's return value: a
    `RegisterResult`, a bool, a `VersionAnswer`, the removed `ExpiredBroker` tuple of a
    scan or channel close, a count, or None. ``at_ms`` is the journal time (ms).
    """

    nameserver_id: str
    seq: int
    at_ms: int
    op: str
    change: RouteChange | None = None
    result: CallResult = None


class _ReplayClock(ManualClock):
    """The `ManualClock` a replayed manager reads; the replayer moves it forward itself
    (it has checked the order), without `set`'s argument check and lock."""

    __slots__ = ()

    def move_to(self, ms: int) -> bool:
        """Jump to ``ms`` if it is not earlier than now (True), else stay (False). O(1)."""
        if ms < self._now_ms:
            return False
        self._now_ms = ms
        return True


class Replayer:
    """Applies journal entries one at a time; each name server gets its own manager.

    A `JournalHeader` creates (or, for a restart, replaces) the name server's manager: a fresh
    `RouteInfoManager` with the header's config on a `ManualClock` set to ``start_ms``. A
    `JournalRecord` sets that clock to the record's time and applies the call. A
    `JournalSnapshot` starts a name server that has no manager yet (a replay beginning in
    the middle of a journal) and is compared with the manager of one that has
    (``check_snapshots``); it never changes a manager. Entries of
    different name servers may come interleaved in any order; each name server's own entries
    must come in sequence order. Cost per entry: the manager call's.
    """

    def __init__(self, *, check_snapshots: bool = True) -> None:
        #: Whether a snapshot met with a manager already built is compared with it.
        self.check_snapshots = check_snapshots
        self._managers: dict[str, RouteInfoManager] = {}
        self._clocks: dict[str, _ReplayClock] = {}
        self._changes: list[RouteChange] = []

    @property
    def managers(self) -> Mapping[str, RouteInfoManager]:
        """The current manager of each name server, by id (a snapshot of the mapping)."""
        return FrozenMap(self._managers)

    @property
    def clocks(self) -> Mapping[str, ManualClock]:
        return FrozenMap(self._clocks)

    def renew_call(self, ns: str, at_ms: int, call: Register) -> bool:
        """Apply a steady ``register`` record (its name server, time and call) in O(1)
        through `RouteInfoManager.renew` and return True, or return False having changed
        nothing but the clock (a record at or after its time; then `apply` it). The
        renewal builds no `ReplayEvent`: the `apply` of the same record would have returned
        one whose change only re-registers the broker (``first=False``), which the caller
        accounts for itself."""
        manager = self._managers.get(ns)
        return (manager is not None and self._clocks[ns].move_to(at_ms)
                and manager.renew(call.registration) is not None)

    def idle_scan(self, ns: str, at_ms: int) -> bool:
        """Skip a ``scan`` record of name server ``ns`` at ``at_ms`` when it would remove
        nothing (`RouteInfoManager.scan_due` is False at that time) and return True; else
        return False having changed nothing but the clock (then `apply` it). O(1). The
        `apply` of the same record would return an event without change and an empty
        result."""
        manager = self._managers.get(ns)
        return (manager is not None and self._clocks[ns].move_to(at_ms)
                and not manager.scan_due())

    def apply(self, entry: JournalEntry) -> ReplayEvent:
        """Apply one entry and return what it did. Raises `ReplayError`."""
        if isinstance(entry, JournalHeader):
            ns = entry.nameserver_id
            clock = _ReplayClock(start_ms=entry.start_ms)
            self._clocks[ns] = clock
            self._managers[ns] = RouteInfoManager(clock=clock, config=entry.config,
                                                  listener=self._changes.append)
            return ReplayEvent(nameserver_id=ns, seq=entry.seq, at_ms=entry.start_ms,
                               op="header")
        if isinstance(entry, JournalSnapshot):
            return self._snapshot(entry)
        if not isinstance(entry, JournalRecord):
            raise InvalidType(f"entry must be a JournalHeader, JournalRecord or "
                              f"JournalSnapshot, got {entry!r:.80}", field="entry",
                              value=entry)
        ns = entry.nameserver_id
        manager = self._managers.get(ns)
        if manager is None:
            raise ReplayError("no header for this name server", nameserver_id=ns,
                              seq=entry.seq)
        try:
            self._clocks[ns].set(entry.at_ms)
        except ValueError as exc:
            raise ReplayError(str(exc), nameserver_id=ns, seq=entry.seq) from None
        self._changes.clear()
        try:
            result = entry.call.apply(manager)
        except RoutingError as exc:
            raise ReplayError(f"{entry.op} failed: {exc}", nameserver_id=ns,
                              seq=entry.seq) from exc
        change = self._changes[0] if self._changes else None
        return ReplayEvent(nameserver_id=ns, seq=entry.seq, at_ms=entry.at_ms, op=entry.op,
                           change=change, result=result)

    def _snapshot(self, entry: JournalSnapshot) -> ReplayEvent:
        """A name server without a manager starts from the snapshot (`restore_manager`, its
        clock at the snapshot's time; ``result`` None). One with a manager keeps it: the
        snapshot only checks it (``result`` True when the replayed state equals the
        recorded one, False when not, None with ``check_snapshots=False``). O(state)."""
        ns = entry.nameserver_id
        manager = self._managers.get(ns)
        result: bool | None = None
        if manager is None:
            clock = self._clocks[ns] = _ReplayClock(start_ms=entry.at_ms)
            self._managers[ns] = restore_manager(entry.state, clock=clock,
                                                 listener=self._changes.append)
        else:
            if not self._clocks[ns].move_to(entry.at_ms):
                raise ReplayError(f"time going back to {entry.at_ms} ms", nameserver_id=ns,
                                  seq=entry.seq)
            if self.check_snapshots:
                result = snapshot_manager(manager) == entry.state
        return ReplayEvent(nameserver_id=ns, seq=entry.seq, at_ms=entry.at_ms, op="snapshot",
                           result=result)


def replay(records: Iterable[JournalEntry], *, changes_only: bool = False,
           replayer: Replayer | None = None) -> Iterator[ReplayEvent]:
    """Replay journal entries (from `read_journal`), yielding one `ReplayEvent` per entry in
    input order, or, with ``changes_only``, only those with a `RouteChange`.

    Pass your own ``replayer`` to inspect the rebuilt managers afterwards. A live run and the
    replay of its journal give equal events and equal routes. Lazy: each entry is applied when
    its event is requested.
    """
    player = replayer if replayer is not None else Replayer()
    for entry in records:
        event = player.apply(entry)
        if not changes_only or event.change is not None:
            yield event
