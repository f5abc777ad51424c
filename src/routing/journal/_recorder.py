"""`JournalRecorder`: a `RouteInfoManager` that writes down every write call it forwards."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from .. import _calls as calls
from .._calls import Call, CallResult
from .._clock import Clock
from .._errors import InvalidRequest
from .._manager import RouteInfoManager
from .._messages import (
    BrokerMemberGroup,
    ClusterInfo,
    ExpiredBroker,
    RegisterResult,
    Registration,
    RoutingConfig,
    TopicList,
    UnregisterRequest,
    VersionAnswer,
)
from .._restore import snapshot_manager
from .._validate import check_int
from .._values import BrokerAddr, BrokerLiveInfo, DataVersion, QueueData, TopicRouteData
from ._args import common_broker_name, common_value, encode_args, encode_channel
from ._format import JournalHeader, JournalSink, dumps
from ._snapshot import SnapshotSchedule, snapshot_line

__all__ = ["JournalRecorder"]

#: Table definitions kept per broker address; an older one referenced again is re-defined.
_TABLES_PER_ADDR = 4

#: A written table: the registration, its id, and the text of its lines after ``ts``.
_Table = tuple[Registration, int, str]


class JournalRecorder:
    """Wraps a `RouteInfoManager`: same method names, every write call forwarded and recorded.

    >>> import io, routing as r
    >>> clock = r.ManualClock(start_ms=0)
    >>> sink = io.StringIO()
    >>> ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id="ns-0")
    >>> ns.heartbeat(cluster="c", broker_addr="10.0.0.1:10911")
    False
    >>> print(sink.getvalue().splitlines()[1])
    {"ns":"ns-0","seq":1,"ts":0,"op":"heartbeat","cluster":"c","broker_name":null,"broker_addr":"10.0.0.1:10911","args":{}}

    The header line is written at construction, with the manager's config and its creation
    time (`RouteInfoManager.started_ms`) as ``start_ms``; wrap a manager before anything
    is written to it (a non-empty manager raises `routing.InvalidRequest`, a
    ``ValueError``: its earlier calls could never be replayed).
    ``after_seq`` is the last sequence number of this name server's earlier journal
    (`routing.journal.last_seq`): the header is then a restart numbered ``after_seq + 1``
    and the numbers go on from there (snapshot lines included), so the journals of every
    run read as one.

    Write calls (register, unregister, unregister_many, heartbeat, query_data_version,
    scan_expired, on_channel_closed, delete_topic, register_topic, wipe/add_write_perm) are
    applied and then written, one line each, with the next sequence number and the time the
    call used (`RouteInfoManager.last_ms` when the call read the clock, else the clock time
    read just before it), so a replay sees the times the live manager saw even when the
    clock ticks during a call. A call that raises changed nothing and is not written. Read
    calls are forwarded and not written: they change nothing.

    With ``snapshot_every_ms`` (journal time, ms) and/or ``snapshot_every_records``, a
    ``snapshot`` line with the manager's whole state and the topic tables of the live
    addresses follows the first line written once that much time or that many lines
    passed since the last snapshot (or the header); any other table is written again in
    full on its next use (``docs/journal.md``, "Snapshots"): a replay can then start at
    any snapshot. Off by default.

    Thread-safe: one lock spans apply-and-write, so line order is application order. The
    sink is not flushed or closed here. Cost per call: the manager's, plus one JSON encoding
    of the record (O(1) for a registration whose table was already written, O(topics) once
    per table).
    """

    def __init__(self, manager: RouteInfoManager, sink: JournalSink, *,
                 nameserver_id: str, after_seq: int | None = None,
                 snapshot_every_ms: int | None = None,
                 snapshot_every_records: int | None = None) -> None:
        self._snapshots = SnapshotSchedule.of(snapshot_every_ms, snapshot_every_records)
        self._lock = threading.RLock()
        self._sink = sink
        self._nameserver_id = nameserver_id
        self._seq = -1 if after_seq is None else check_int("after_seq", after_seq, low=0)
        self._next_table = 0
        #: (cluster, broker_name, broker_addr) → [(registration, table id)], newest last.
        self._tables: dict[tuple[str, str, str], list[_Table]] = {}
        #: (cluster, broker_addr) → broker_name of the last accepted registration.
        self._groups: dict[tuple[str, str], str] = {}
        #: (cluster, broker_addr) → (broker_name, data version, id) of its last table line.
        self._last_table: dict[tuple[str, str], tuple[str, DataVersion, int]] = {}
        self._channel_refs: dict[Hashable, int] = {}
        self._manager = manager
        #: Every line starts with this, then the sequence number.
        self._prefix = '{"ns":' + dumps(nameserver_id) + ',"seq":'
        self._write_header(manager)
        self._snapshots.start(manager.started_ms, self._seq)

    # ------------------------------------------------------------------ state

    @property
    def manager(self) -> RouteInfoManager:
        """The wrapped manager."""
        return self._manager

    @property
    def nameserver_id(self) -> str:
        return self._nameserver_id

    @property
    def seq(self) -> int:
        """The sequence number of the last line written (0: the header only)."""
        return self._seq

    @property
    def config(self) -> RoutingConfig:
        return self._manager.config

    @property
    def clock(self) -> Clock:
        return self._manager.clock

    def restart(self, manager: RouteInfoManager) -> None:
        """The name server restarted with ``manager`` (fresh and empty): write a restart
        header and record into it from now on. Sequence numbers, table ids and the
        snapshot schedule continue (the next snapshot, when due, describes the new
        manager)."""
        with self._lock:
            self._groups.clear()
            self._manager = manager
            self._write_header(manager)

    def _write_header(self, manager: RouteInfoManager) -> None:
        if manager.all_topics() or manager.live_brokers() or manager.cluster_info().\
                broker_addr_table:
            raise InvalidRequest(f"JournalRecorder needs a fresh manager: the earlier calls of "
                                 f"{manager!r} were not recorded and could not be replayed",
                                 field="manager", value=manager)
        self._seq += 1
        header = JournalHeader(nameserver_id=self._nameserver_id, seq=self._seq,
                               start_ms=manager.started_ms, config=manager.config)
        self._sink.write(dumps(header.to_json()) + "\n")

    # ------------------------------------------------------------------ recording

    def _record(self, call: Call, args: dict[str, Any] | None = None, *,
                cluster: str | None = None, broker_name: str | None = None,
                broker_addr: str | None = None) -> CallResult:
        """Apply ``call``; on success write its line, with ``args`` or else the call's own
        (`encode_args`). The caller holds the lock. Every line is compact JSON with the
        fields in `RECORD_FIELDS` order."""
        if args is None:  # encoded first: a call JSON cannot carry is not applied
            args = encode_args(call, self._channel_refs)
        manager = self._manager
        ts = manager.clock.now_ms()
        result = call.apply(manager)
        if manager.last_ms > ts:  # the time the call used (the clock moved since, or back)
            ts = manager.last_ms
        self._seq += 1
        line = dumps({"ts": ts, "op": call.op, "cluster": cluster, "broker_name": broker_name,
                      "broker_addr": broker_addr, "args": args})
        self._sink.write(f"{self._prefix}{self._seq},{line[1:]}\n")
        if ts >= self._snapshots.due_ms or self._seq >= self._snapshots.due_seq:
            self._snapshot(ts)
        return result

    def write_snapshot(self) -> None:
        """Write a ``snapshot`` line now (besides the scheduled ones), at the clock's time.
        O(state)."""
        with self._lock:
            self._snapshot(self._manager.clock.now_ms())

    def _snapshot(self, ts: int) -> None:
        """Write the manager's state as the next line (``_snapshot.py``) with the tables of
        the addresses still live, and forget the others' (written again in full on their
        next use): no line after the snapshot needs one before it. The caller holds the
        lock. O(state + those tables)."""
        state = snapshot_manager(self._manager)
        live = {(e.cluster, e.broker_addr) for e in state.live}
        self._tables = {k: v for k, v in self._tables.items() if (k[0], k[2]) in live}
        kept = {t[1]: t[0] for tables in self._tables.values() for t in tables}
        self._last_table = {k: v for k, v in self._last_table.items() if v[2] in kept}
        self._seq += 1
        self._sink.write(snapshot_line(self._nameserver_id, self._seq, ts, state, kept,
                                       self._channel_refs) + "\n")
        self._snapshots.start(ts, self._seq)

    def _find_table(self, reg: Registration) -> tuple[list[_Table], int]:
        """The kept tables of the registration's address, and the index of the one equal to
        ``reg`` (-1: none). O(1) when the same table object was seen, else one comparison
        per kept table of the address."""
        kept = self._tables.setdefault((reg.cluster, reg.broker_name, reg.broker_addr), [])
        for i, table in enumerate(kept):
            if table[0] == reg:  # every field but the channel (attrs eq=False on it)
                return kept, i
        return kept, -1

    # ------------------------------------------------------------------ write calls

    def register(self, registration: Registration) -> RegisterResult:
        """`RouteInfoManager.register`, recorded as ``register``: ``args.table_id`` names
        the registration's table, written in full as ``args.table`` the first time.

        A registration whose table was written before costs one comparison and a string
        concatenation: the line's text after ``ts`` is kept with the table."""
        reg = registration
        if not isinstance(reg, Registration):
            return self._manager.register(reg)  # raises InvalidRequest
        with self._lock:
            kept, found = self._find_table(reg)
            ch = reg.channel
            if ch is None:
                channel = ""
            elif type(ch) is int:
                channel = f',"channel":{ch}'
            else:
                channel = ',"channel":' + dumps(encode_channel(ch, self._channel_refs))
            manager = self._manager
            ts = manager.clock.now_ms()
            result = manager.register(reg)
            if manager.last_ms > ts:  # the time the registration used
                ts = manager.last_ms
            self._seq += 1
            if found >= 0:
                table = kept[found]
                self._sink.write(f'{self._prefix}{self._seq},"ts":{ts}{table[2]}{channel}}}}}\n')
                if found != len(kept) - 1:
                    kept.append(kept.pop(found))
            else:
                # Only now, the line being written, does the table id exist.
                self._next_table += 1
                table_id = self._next_table
                head = dumps({"op": "register", "cluster": reg.cluster,
                              "broker_name": reg.broker_name, "broker_addr": reg.broker_addr,
                              "args": {"table_id": table_id}})
                tail = "," + head[1:-2]  # without the braces closing args and the line
                self._sink.write(f'{self._prefix}{self._seq},"ts":{ts}{tail},"table":'
                                 f'{dumps(reg.to_json())}{channel}}}}}\n')
                kept.append((reg, table_id, tail))
                if len(kept) > _TABLES_PER_ADDR:
                    del kept[0]
            self._last_table[(reg.cluster, reg.broker_addr)] = (
                reg.broker_name, reg.data_version, kept[-1][1])
            if result.accepted:
                self._groups[(reg.cluster, reg.broker_addr)] = reg.broker_name
            if ts >= self._snapshots.due_ms or self._seq >= self._snapshots.due_seq:
                self._snapshot(ts)
            return result

    def unregister(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   generation: int | None = None) -> bool:
        """`RouteInfoManager.unregister`, recorded as ``unregister``."""
        call = calls.Unregister(request=UnregisterRequest(
            cluster=cluster, broker_addr=broker_addr, broker_name=broker_name,
            broker_id=broker_id, generation=generation))
        with self._lock:
            return bool(self._record(call, cluster=cluster, broker_name=broker_name,
                                     broker_addr=broker_addr))

    def unregister_many(self, requests: Iterable[UnregisterRequest]) -> tuple[bool, ...]:
        """`RouteInfoManager.unregister_many`, one ``unregister_many`` line for the batch;
        its top-level columns are set only when every request shares the value."""
        call = calls.UnregisterMany(requests=tuple(requests))
        with self._lock:
            result = self._record(call, cluster=common_value(call, "cluster"),
                                  broker_name=common_value(call, "broker_name"),
                                  broker_addr=common_value(call, "broker_addr"))
            assert isinstance(result, tuple)
            return result  # type: ignore[return-value]

    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool:
        """`RouteInfoManager.heartbeat`, recorded as ``heartbeat``."""
        call = calls.Heartbeat(cluster=cluster, broker_addr=broker_addr)
        with self._lock:
            return bool(self._record(call, cluster=cluster,
                                     broker_name=self._groups.get((cluster, broker_addr)),
                                     broker_addr=broker_addr))

    def query_data_version(self, *, cluster: str, broker_addr: str,
                           data_version: DataVersion) -> VersionAnswer:
        """`RouteInfoManager.query_data_version`, recorded as ``query_data_version``.

        When the queried version is that of the last table written for the address (the
        lightweight heartbeat of acting-master mode), ``args`` is ``{"table_id": n}``
        instead of the version itself."""
        call = calls.QueryDataVersion(cluster=cluster, broker_addr=broker_addr,
                                data_version=data_version)
        with self._lock:
            name = self._groups.get((cluster, broker_addr))
            last = self._last_table.get((cluster, broker_addr))
            if last is not None and last[0] == name and last[1] == data_version:
                args: dict[str, Any] | None = {"table_id": last[2]}
            else:
                args = None
            result = self._record(call, args, cluster=cluster, broker_name=name,
                                  broker_addr=broker_addr)
            assert isinstance(result, VersionAnswer)
            return result

    def scan_expired(self) -> tuple[ExpiredBroker, ...]:
        """`RouteInfoManager.scan_expired`, recorded as ``scan`` (every scan, even an empty
        one: its time decides what expires)."""
        with self._lock:
            result = self._record(calls.Scan(), {})
            assert isinstance(result, tuple)
            self._forget(result)  # type: ignore[arg-type]
            return result  # type: ignore[return-value]

    def on_channel_closed(self, channel: Hashable | None) -> tuple[ExpiredBroker, ...]:
        """`RouteInfoManager.on_channel_closed`, recorded as ``channel_closed``."""
        call = calls.ChannelClosed(channel=channel)
        with self._lock:
            result = self._record(call)
            assert isinstance(result, tuple)
            self._forget(result)  # type: ignore[arg-type]
            return result  # type: ignore[return-value]

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """`RouteInfoManager.delete_topic`, recorded as ``delete_topic``."""
        call = calls.DeleteTopic(topic=topic, cluster=cluster)
        with self._lock:
            return bool(self._record(call, cluster=cluster))

    def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> None:
        """`RouteInfoManager.register_topic`, recorded as ``register_topic``."""
        call = calls.RegisterTopic(topic=topic, queue_datas=tuple(queue_datas))
        with self._lock:
            self._record(call, broker_name=common_broker_name(call))

    def wipe_write_perm(self, broker_name: str) -> int:
        """`RouteInfoManager.wipe_write_perm`, recorded as ``wipe_write_perm``."""
        return self._record_perm(calls.WipeWritePerm(broker_name=broker_name))

    def add_write_perm(self, broker_name: str) -> int:
        """`RouteInfoManager.add_write_perm`, recorded as ``add_write_perm``."""
        return self._record_perm(calls.AddWritePerm(broker_name=broker_name))

    def _record_perm(self, call: calls.WipeWritePerm | calls.AddWritePerm) -> int:
        """Record a write-permission change of a group; the count of topics it touched."""
        with self._lock:
            result = self._record(call, broker_name=call.broker_name)
        assert isinstance(result, int)
        return result

    def _forget(self, gone: tuple[ExpiredBroker, ...]) -> None:
        for e in gone:
            self._groups.pop((e.cluster, e.broker_addr), None)

    # ------------------------------------------------------------------ reads (not recorded)

    def pickup_route(self, topic: str) -> TopicRouteData | None:
        return self._manager.pickup_route(topic)

    def route_version(self, topic: str) -> int:
        return self._manager.route_version(topic)

    def cluster_info(self) -> ClusterInfo:
        return self._manager.cluster_info()

    def all_topics(self) -> tuple[str, ...]:
        return self._manager.all_topics()

    def topics_by_cluster(self, cluster: str) -> tuple[str, ...]:
        return self._manager.topics_by_cluster(cluster)

    def system_topics(self) -> TopicList:
        return self._manager.system_topics()

    def unit_topics(self) -> tuple[str, ...]:
        return self._manager.unit_topics()

    def has_unit_sub_topics(self) -> tuple[str, ...]:
        return self._manager.has_unit_sub_topics()

    def has_unit_sub_non_unit_topics(self) -> tuple[str, ...]:
        return self._manager.has_unit_sub_non_unit_topics()

    def broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup:
        return self._manager.broker_member_group(cluster, broker_name)

    def live_brokers(self) -> Mapping[BrokerAddr, BrokerLiveInfo]:
        return self._manager.live_brokers()

    def check_invariants(self) -> None:
        self._manager.check_invariants()

    def __repr__(self) -> str:
        return f"<JournalRecorder {self._nameserver_id} seq={self._seq} {self._manager!r}>"
