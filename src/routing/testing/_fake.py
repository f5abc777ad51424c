"""`FakeNameServer`: a `RouteInfoManager` plus a manual clock, driven by fake brokers.

The fake owns the state (like fakeredis's ``FakeServer``); `FakeBroker` handles are thin and
act the way real brokers do: a full registration at start and every 30 000 ms, a version
bump and an incremental registration when a topic is created, an unregister on shutdown,
silence when they crash, and a channel close when their connection drops. Time moves only
through the clock; scans and periodic registrations run at the exact instants they are due.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Literal, TypeVar

import attrs

from .._clock import ManualClock
from .._errors import InvalidRequest
from .._manager import RouteInfoManager
from .._messages import (
    ExpiredBroker,
    RegisterResult,
    Registration,
    RouteChange,
    RoutingConfig,
)
from .._validate import MAX_TOPIC_LENGTH, TOPIC_PATTERN, fail
from .._values import DataVersion, Perm, TopicConfig, TopicRouteData
from ._errors import NameServerUnavailable, UnknownName
from ._fake_asserts import RouteAssertions
from ._fake_clock import FakeClock, _run_until
from ._fake_lock import FakeLock, guarded

if TYPE_CHECKING:
    from ._wire_face import WireFace

__all__ = [
    "BrokerState",
    "FakeBroker",
    "FakeChannel",
    "FakeClock",
    "FakeEvent",
    "FakeNameServer",
]

#: A real broker's full-registration period (``registerNameServerPeriod``), in ms.
DEFAULT_REGISTER_INTERVAL_MS = 30_000

_T = TypeVar("_T")

BrokerState = Literal["new", "online", "quiet", "offline"]


@attrs.frozen(kw_only=True)
class FakeEvent:
    """One line of a fake name server's event log.

    ``kind`` is one of ``register``, ``rejected``, ``heartbeat``, ``unregister``,
    ``expired``, ``channel_closed``, ``route_changed``, ``topic_created``,
    ``topic_updated``, ``topic_deleted``, ``quiet``, ``admin``, ``stopped``, ``started``,
    ``unavailable``; served on the wire also ``fault``, ``frozen``, ``thawed``.
    ``broker`` is the broker address involved, if any.
    """

    at_ms: int
    kind: str
    detail: str
    broker: str | None = None

    def __str__(self) -> str:
        who = f" [{self.broker}]" if self.broker else ""
        return f"{self.at_ms:>9} ms  {self.kind:<14}{who} {self.detail}"


@attrs.frozen(kw_only=True)
class FakeChannel:
    """The connection handle a fake broker registers with (any hashable works; this one
    prints well). A reconnect gets a new ``serial``."""

    nameserver: str
    broker_addr: str
    serial: int

    def __repr__(self) -> str:
        return f"<channel {self.broker_addr}->{self.nameserver} #{self.serial}>"


# --------------------------------------------------------------------------- brokers


def _system_topic(name: str) -> TopicConfig | None:
    """Java's ``TopicConfigManager`` auto-creates a topic named after the broker and one
    after the cluster: 1 read and 1 write queue, perm ``INHERIT|READ|WRITE`` (7). A name
    that is not a valid topic name gets none."""
    if not TOPIC_PATTERN.match(name) or len(name) > MAX_TOPIC_LENGTH:
        return None
    return TopicConfig(topic_name=name, read_queue_nums=1, write_queue_nums=1,
                       perm=Perm.INHERIT | Perm.READ | Perm.WRITE)


@guarded(lambda broker: broker.server._lock)
@attrs.define(kw_only=True, eq=False, repr=False)
class FakeBroker:
    """A broker talking to one `FakeNameServer`. Create it with `FakeNameServer.broker`.

    States: ``new`` (never registered), ``online`` (registers every 30 000 ms when the
    server's automatic registration is on), ``quiet`` (crashed or hung: sends nothing, its
    connection stays open), ``offline`` (shut down or disconnected).
    """

    server: FakeNameServer
    cluster: str
    name: str
    broker_id: int
    addr: str
    ha_server_addr: str | None
    zone_name: str | None
    heartbeat_timeout_ms: int | None
    enable_acting_master: bool | None
    _topics: dict[str, TopicConfig]  # the server builds it for this broker alone
    #: Whether this broker re-registers on its own while online (see `FakeNameServer`
    #: ``register_interval_ms``).
    auto_register: bool
    data_version: DataVersion = attrs.field(init=False, default=attrs.Factory(
        lambda self: DataVersion().next(self.server.clock.now_ms()), takes_self=True))
    state: BrokerState = attrs.field(init=False, default="new")
    channel: FakeChannel | None = attrs.field(init=False, default=None)
    #: The generation of this broker's last accepted registration (D2), if any.
    generation: int | None = attrs.field(init=False, default=None)
    #: The result of the last registration sent, accepted or not.
    last_result: RegisterResult | None = attrs.field(init=False, default=None)
    _next_register_ms: int | None = attrs.field(init=False, default=None)

    def __repr__(self) -> str:
        return (f"<FakeBroker {self.cluster}/{self.name} id={self.broker_id} {self.addr} "
                f"{self.state}>")

    @property
    def topics(self) -> Mapping[str, TopicConfig]:
        """The broker's topic table (a copy), system topics included."""
        return dict(self._topics)

    @property
    def is_live(self) -> bool:
        """True when the name server has a live entry for this broker's address."""
        return any(k.cluster == self.cluster and k.addr == self.addr
                   for k in self.server.manager.live_brokers())

    # ------------------------------------------------------------------ registration

    def registration(self, *, topics: Mapping[str, TopicConfig] | None = None,
                     partial: bool = False) -> Registration:
        """The REGISTER_BROKER request this broker would send now."""
        return Registration(
            cluster=self.cluster, broker_name=self.name, broker_id=self.broker_id,
            broker_addr=self.addr, ha_server_addr=self.ha_server_addr,
            zone_name=self.zone_name, heartbeat_timeout_ms=self.heartbeat_timeout_ms,
            enable_acting_master=self.enable_acting_master, data_version=self.data_version,
            topics=self._topics if topics is None else topics, channel=self._ensure_channel(),
            partial=partial)

    def register(self) -> RegisterResult:
        """Send a full registration now (what a broker does at start and every 30 s).

        Brings a ``new``, ``quiet`` or ``offline`` broker back ``online`` (a new
        connection if its last one was closed). Raises `NameServerUnavailable` if the
        name server is stopped.
        """
        self.state = "online"
        self._schedule(self.server.clock.now_ms())
        return self.server._register(self, self.registration(), how="full")

    def heartbeat(self) -> bool:
        """Send a lightweight BROKER_HEARTBEAT (refreshes liveness only; False if the name
        server does not know this broker)."""
        ok = self.server._call(lambda m: m.heartbeat(cluster=self.cluster,
                                                     broker_addr=self.addr))
        self.server._log("heartbeat", "known" if ok else "unknown broker: ignored", self.addr)
        return ok

    def promote(self, broker_id: int = 0) -> RegisterResult:
        """Re-register under ``broker_id`` (a slave becoming master keeps its address)."""
        self.broker_id = broker_id
        return self.register()

    # ------------------------------------------------------------------ topics

    def create_topic(self, topic: str, *, queues: int | None = None,
                     read_queue_nums: int | None = None, write_queue_nums: int | None = None,
                     perm: int = Perm.READ | Perm.WRITE, topic_sys_flag: int = 0
                     ) -> TopicConfig:
        """Create or update a topic on this broker, bump the data version and, when online,
        send an incremental registration carrying only that topic (Java's
        ``registerIncrementBrokerData``). ``queues`` sets both queue counts (default 16).
        """
        read = read_queue_nums if read_queue_nums is not None else (queues or 16)
        write = write_queue_nums if write_queue_nums is not None else (queues or 16)
        config = TopicConfig(topic_name=topic, read_queue_nums=read, write_queue_nums=write,
                             perm=perm, topic_sys_flag=topic_sys_flag)
        kind = "topic_updated" if topic in self._topics else "topic_created"
        self._topics[topic] = config
        self._bump()
        self.server._log(kind, f"{topic} r{read}/w{write} {Perm.to_string(config.perm)} "
                               f"(version counter {self.data_version.counter})", self.addr)
        if self.state == "online":
            self.server._register(self, self.registration(topics={topic: config},
                                                          partial=True), how="increment")
        return config

    def delete_topic(self, topic: str) -> None:
        """Delete a topic on this broker: bump the data version and, when online, send a
        full registration without it.

        As in Java, the name server keeps the row unless
        ``RoutingConfig.delete_topic_with_broker_registration`` is on; an operator removes
        it with `FakeNameServer.delete_topic` (DELETE_TOPIC_IN_NAMESRV).
        """
        if self._topics.pop(topic, None) is None:
            raise UnknownName(f"{self.name} has no topic {topic!r}", field="topic", value=topic)
        self._bump()
        self.server._log("topic_deleted", f"{topic} (version counter "
                                          f"{self.data_version.counter})", self.addr)
        if self.state == "online":
            self.server._register(self, self.registration(), how="full")

    # ------------------------------------------------------------------ failures

    def go_quiet(self) -> None:
        """Crash or hang: send nothing from now on; the connection stays open, so only
        expiry (``last_update + timeout < now`` at a scan) removes the broker."""
        self.state = "quiet"
        self._next_register_ms = None
        self.server._log("quiet", "stopped sending", self.addr)

    crash = go_quiet

    def disconnect(self) -> tuple[ExpiredBroker, ...]:
        """The connection drops: the name server removes every broker on the channel at
        once (D6). The broker goes ``offline``; `register` reconnects it. Against a
        stopped server this only takes the broker offline."""
        channel, self.channel = self.channel, None
        self.state = "offline"
        self._next_register_ms = None
        if channel is None:
            return ()
        return self.server._channel_closed(channel)

    def shutdown(self) -> bool:
        """Graceful stop: UNREGISTER_BROKER (fenced by this broker's generation, D2), then
        close the connection. Returns whether the name server removed something."""
        removed = False
        if self.generation is not None:
            removed = self.server._call(lambda m: m.unregister(
                cluster=self.cluster, broker_addr=self.addr, broker_name=self.name,
                broker_id=self.broker_id, generation=self.generation))
            self.server._log("unregister", "removed" if removed else "nothing to remove",
                             self.addr)
        self.state = "offline"
        self._next_register_ms = None
        self.channel = None
        return removed

    # ------------------------------------------------------------------ internals

    def _bump(self) -> None:
        self.data_version = self.data_version.next(self.server.clock.now_ms(),
                                                   self.data_version.state_version)

    def _ensure_channel(self) -> FakeChannel:
        if self.channel is None:
            self.channel = FakeChannel(nameserver=self.server.name, broker_addr=self.addr,
                                       serial=next(self.server._serials))
        return self.channel

    def _schedule(self, now_ms: int) -> None:
        interval = self.server.register_interval_ms
        self._next_register_ms = (now_ms + interval if interval is not None
                                  and self.auto_register else None)


# --------------------------------------------------------------------------- name server


@guarded(lambda server: server._lock)
class FakeNameServer(RouteAssertions):
    """A name server for tests: one `RouteInfoManager`, one clock, fake brokers.

    >>> from routing.testing import FakeNameServer
    >>> ns = FakeNameServer()
    >>> a = ns.broker(name="broker-a", topics=["TopicTest"], queues=4)
    >>> route = ns.assert_route("TopicTest", brokers=["broker-a"], writable_queues=4)
    >>> [q.broker_name for q in route.queue_datas]
    ['broker-a']
    >>> a.go_quiet()
    >>> ns.tick(120_000)          # last_update + 120 000 == now: not yet expired (strict)
    120000
    >>> ns.route("TopicTest") is not None
    True
    >>> ns.tick(5_000)            # the scan at 125 000 ms removes it
    125000
    >>> ns.assert_no_route("TopicTest")

    ``clock`` defaults to a new `FakeClock` at ``start_ms``; pass another server's
    ``clock`` to share time (several servers, one client). ``scan_interval_ms`` defaults to
    ``config.scan_interval_ms`` (5 000 ms, Java); scans run at every multiple of it since
    the server was created (fixed rate). ``register_interval_ms`` (default 30 000 ms;
    None turns it off) is how often online brokers re-register by themselves.
    ``auto_scan=False`` leaves scanning to `scan`. Every public method holds the
    clock's lock, so a served fake (``wire``, `serve_on_wire`) can be driven from the test's
    thread while the server loop answers requests.
    """

    _names = itertools.count(1)

    def __init__(self, *, clock: ManualClock | None = None, config: RoutingConfig | None = None,
                 start_ms: int = 0, scan_interval_ms: int | None = None,
                 register_interval_ms: int | None = DEFAULT_REGISTER_INTERVAL_MS,
                 auto_scan: bool = True, name: str | None = None) -> None:
        if clock is not None and start_ms:
            raise InvalidRequest(f"pass either clock or start_ms, not both (start_ms={start_ms})",
                                 field="start_ms", value=start_ms)
        self.clock: ManualClock = clock if clock is not None else FakeClock(start_ms)
        self.config = config if config is not None else RoutingConfig()
        self.scan_interval_ms = (scan_interval_ms if scan_interval_ms is not None
                                 else self.config.scan_interval_ms)
        if self.scan_interval_ms <= 0:
            fail("scan_interval_ms", self.scan_interval_ms, "> 0")
        if register_interval_ms is not None and register_interval_ms <= 0:
            fail("register_interval_ms", register_interval_ms, "> 0 or None")
        self.register_interval_ms = register_interval_ms
        self.auto_scan = auto_scan
        self.name = name if name is not None else f"namesrv-{next(self._names)}"
        self._lock = self.clock.lock if isinstance(self.clock, FakeClock) else FakeLock()
        #: The endpoint serving this fake over TCP (a `routing.testing.WireEndpoint`, set by
        #: `serve_on_wire`), else None.
        self.wire: WireFace | None = None
        self._events: list[FakeEvent] = []
        self._pending: list[FakeEvent] = []
        self._brokers: list[FakeBroker] = []
        self._serials = itertools.count(1)
        self._hosts = itertools.count(1)
        self.running = True
        self.manager = self._new_manager()
        self._origin_ms = self.clock.now_ms()
        self._next_scan_ms = self._origin_ms + self.scan_interval_ms
        if isinstance(self.clock, FakeClock):
            self.clock._attach(self)

    def __repr__(self) -> str:
        return (f"<FakeNameServer {self.name} now={self.clock.now_ms()} ms "
                f"brokers={len(self._brokers)} {'running' if self.running else 'stopped'}>")

    def _new_manager(self) -> RouteInfoManager:
        return RouteInfoManager(clock=self.clock, config=self.config, listener=self._on_change)

    # ------------------------------------------------------------------ brokers

    def broker(self, *, cluster: str = "DefaultCluster", name: str = "broker-a",
               broker_id: int = 0, addr: str | None = None, topics: Iterable[str]
               | Mapping[str, TopicConfig] = (), queues: int | None = None,
               system_topics: bool = True, ha_server_addr: str | None = None,
               zone_name: str | None = None, heartbeat_timeout_ms: int | None = None,
               enable_acting_master: bool | None = None, auto_register: bool = True,
               register: bool = True) -> FakeBroker:
        """A new broker handle; it registers at once unless ``register=False``.

        ``topics`` is a list of names (each gets ``queues`` read and write queues, default
        16) or a mapping name → `TopicConfig`. With ``system_topics`` (default), the table
        also holds the two topics a real broker creates for itself, named after the
        broker and after the cluster (1 queue, perm 7). They matter: Java rejects a
        first registration that carries exactly one topic (D3). ``addr`` defaults to
        ``10.0.0.<n>:10911`` (n counts this server's brokers) and ``ha_server_addr`` to
        the same host on port 10912.
        """
        if addr is None:
            host = f"10.0.0.{next(self._hosts)}"
            addr = f"{host}:10911"
            if ha_server_addr is None:
                ha_server_addr = f"{host}:10912"
        table: dict[str, TopicConfig] = {}
        if system_topics:
            for sys_name in (name, cluster):
                config = _system_topic(sys_name)
                if config is not None:
                    table[sys_name] = config
        if isinstance(topics, Mapping):
            table.update(topics)
        else:
            for topic in topics:
                q = queues if queues is not None else 16
                table[topic] = TopicConfig(topic_name=topic, read_queue_nums=q,
                                           write_queue_nums=q)
        handle = FakeBroker(server=self, cluster=cluster, name=name, broker_id=broker_id, addr=addr,
                            ha_server_addr=ha_server_addr, zone_name=zone_name,
                            heartbeat_timeout_ms=heartbeat_timeout_ms,
                            enable_acting_master=enable_acting_master, topics=table,
                            auto_register=auto_register)
        self._brokers.append(handle)
        if register:
            handle.register()
        return handle

    @property
    def brokers(self) -> tuple[FakeBroker, ...]:
        """Every broker handle made by this server, in creation order."""
        return tuple(self._brokers)

    # ------------------------------------------------------------------ client side

    def route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC as a client sees it: the route, or None.

        Raises `NameServerUnavailable` while the server is stopped.
        """
        return self._call(lambda m: m.pickup_route(topic))

    @property
    def now_ms(self) -> int:
        """The clock's current instant, ms."""
        return self.clock.now_ms()

    def tick(self, ms: int) -> int:
        """Advance time by ``ms`` (>= 0) milliseconds, running every scan and periodic
        registration that falls due on the way, each at its exact instant; return the
        new time in ms. With a `FakeClock`, every server sharing it runs its work too."""
        target = self.clock.now_ms() + ms
        if ms < 0:
            raise InvalidRequest(f"time cannot go backwards: tick(ms={ms})", field="ms",
                                 value=ms)
        if isinstance(self.clock, FakeClock):
            self.clock.set(target)
        else:
            _run_until(self.clock, [self], target)
        return self.clock.now_ms()

    # ------------------------------------------------------------------ admin side

    def scan(self) -> tuple[ExpiredBroker, ...]:
        """Run one expiry scan now (in addition to the scheduled ones)."""
        return self._scan()

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """DELETE_TOPIC_IN_NAMESRV (what ``mqadmin deleteTopic`` sends after the brokers)."""
        removed = self._call(lambda m: m.delete_topic(topic, cluster))
        self._log("admin", f"delete topic {topic}" + (f" in {cluster}" if cluster else "")
                  + ("" if removed else " (nothing to delete)"))
        return removed

    def wipe_write_perm(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: make the group read-only; return topics touched."""
        count = self._call(lambda m: m.wipe_write_perm(broker_name))
        self._log("admin", f"wipe write perm of {broker_name}: {count} topic(s)")
        return count

    def add_write_perm(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER: give the group its write bit back."""
        count = self._call(lambda m: m.add_write_perm(broker_name))
        self._log("admin", f"add write perm of {broker_name}: {count} topic(s)")
        return count

    def stop(self) -> None:
        """Stop the name server: requests raise `NameServerUnavailable`, brokers' periodic
        registrations fail (and are logged), no scans run."""
        self.running = False
        self._log("stopped", "name server stopped")
        if self.wire is not None:
            self.wire._stopped()

    def start(self) -> None:
        """Start a stopped name server afresh: all routing state is lost, as with a real
        restart; brokers come back at their next periodic registration. Scans run at
        every ``scan_interval_ms`` from now."""
        if self.running:
            return
        self.running = True
        self.manager = self._new_manager()
        self._next_scan_ms = self.clock.now_ms() + self.scan_interval_ms
        for b in self._brokers:
            b.channel = None
        self._log("started", "name server started with empty tables")
        if self.wire is not None:
            self.wire._started()

    # ------------------------------------------------------------------ event log

    @property
    def events(self) -> tuple[FakeEvent, ...]:
        """Everything that happened, oldest first."""
        return tuple(self._events)

    def events_of(self, kind: str) -> tuple[FakeEvent, ...]:
        """The events of one ``kind`` (see `FakeEvent`)."""
        return tuple(e for e in self._events if e.kind == kind)

    def event_log(self, last: int | None = None) -> str:
        """The event log as text, one event a line (only the ``last`` n if given)."""
        events = self._events if last is None else self._events[-last:]
        return "\n".join(str(e) for e in events) or "(no events)"

    def clear_events(self) -> None:
        """Forget the event log."""
        self._events.clear()

    # ------------------------------------------------------------------ internals

    def _call(self, fn: Callable[[RouteInfoManager], _T]) -> _T:
        if not self.running:
            self._log("unavailable", "request refused: name server stopped")
            raise NameServerUnavailable(f"{self.name} is stopped")
        return fn(self.manager)

    def _log(self, kind: str, detail: str, broker: str | None = None, *,
             flush: bool = True) -> None:
        """Append an event, then the route changes the call behind it caused."""
        self._events.append(FakeEvent(at_ms=self.clock.now_ms(), kind=kind, detail=detail,
                                      broker=broker))
        if flush:
            self._flush_changes()

    def _flush_changes(self) -> None:
        self._events.extend(self._pending)
        self._pending.clear()

    def _on_change(self, change: RouteChange) -> None:
        if change.changed_topics:
            self._pending.append(FakeEvent(
                at_ms=change.at_ms, kind="route_changed",
                detail=f"{', '.join(sorted(change.changed_topics))} (by {change.operation})"))

    def _register(self, broker: FakeBroker, reg: Registration, *, how: str) -> RegisterResult:
        result = self._call(lambda m: m.register(reg))
        broker.last_result = result
        if result.accepted:
            broker.generation = result.generation
        self._log_registration(how, reg, result, addr=broker.addr,
                               who=f"{broker.cluster}/{broker.name} id={broker.broker_id}")
        return result

    def _log_registration(self, how: str, reg: Registration, result: RegisterResult, *,
                          addr: str, who: str) -> None:
        """The event of one registration, a fake broker's or one over the wire."""
        if result.accepted:
            self._log("register", f"{how} registration as {who}, {len(reg.topics)} topic(s), "
                                  f"version counter {reg.data_version.counter}", addr)
        else:
            self._log("rejected", f"{how} registration rejected: {result.rejection}", addr)

    def _channel_closed(self, channel: FakeChannel) -> tuple[ExpiredBroker, ...]:
        if not self.running:  # a stopped server has no connections left to close
            return ()
        gone = self._call(lambda m: m.on_channel_closed(channel))
        self._log("channel_closed", f"{channel!r}: removed "
                  + (", ".join(e.broker_addr for e in gone) or "nothing"), channel.broker_addr)
        return gone

    def _scan(self) -> tuple[ExpiredBroker, ...]:
        gone = self._call(lambda m: m.scan_expired())
        for e in gone:
            self._log("expired", f"{e.cluster}/{e.broker_name} id={e.broker_id}: last update "
                                 f"{e.last_update_ms} ms + timeout {e.timeout_ms} ms < now",
                      e.broker_addr, flush=False)
        self._flush_changes()
        if gone and self.wire is not None:
            self.wire._expired(gone)
        return gone

    def _next_due_ms(self) -> int | None:
        candidates = [b._next_register_ms for b in self._brokers
                      if b._next_register_ms is not None]
        if self.auto_scan and self.running:
            candidates.append(self._next_scan_ms)
        return min(candidates) if candidates else None

    def _run_registrations_due(self, now_ms: int) -> None:
        for b in self._brokers:
            if b._next_register_ms is not None and b._next_register_ms <= now_ms:
                b._schedule(now_ms)
                if b.state != "online":
                    continue
                if not self.running:
                    self._log("unavailable", "periodic registration failed: name server "
                                             "stopped", b.addr)
                    continue
                self._register(b, b.registration(), how="periodic")

    def _run_scan_due(self, now_ms: int) -> None:
        if self.auto_scan and self.running and self._next_scan_ms <= now_ms:
            while self._next_scan_ms <= now_ms:
                self._next_scan_ms += self.scan_interval_ms
            self._scan()

