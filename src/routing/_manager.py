"""`RouteInfoManager`: the name server's routing state (Java ``RouteInfoManager``, 5.x).

Sans-I/O: every operation reads the injected clock once, changes the tables under one lock,
and returns what the host must do (channels to close, notifications to send). Routes are
kept as immutable per-topic snapshots, rebuilt only for the topics a write touched, so
``pickup_route`` is a dictionary lookup. Deliberate differences from Java are the spec's
decisions D1–D12 and are listed in ``docs/java-parity.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from . import _listings as listings
from . import _validate as validate
from ._clock import Clock, SystemClock
from ._errors import NotReady
from ._invariants import find_problems
from ._keepalive import KeepAlive
from ._messages import (
    BrokerMemberGroup,
    BrokerRegistered,
    BrokerRemoved,
    ClusterInfo,
    ExpiredBroker,
    MinBrokerIdChanged,
    RegisterResult,
    Registration,
    RemovalReason,
    RouteChange,
    RoutingConfig,
    TopicList,
    UnregisterRequest,
    expired_broker,
)
from ._registration import apply_registration, decide_registration, renew_registration
from ._removal import batch_notices, remove_member, set_write_bit
from ._routes import RouteBook
from ._state import Live, LiveKey, State
from ._validate import MAX_QUEUE_NUMS, check_int, check_name, check_topic, fail
from ._values import (
    BrokerAddr,
    BrokerLiveInfo,
    QueueData,
    TopicRouteData,
)

__all__ = ["RouteInfoManager", "RouteListener"]

#: Receives one `RouteChange` after each write that changed something, outside the lock.
RouteListener = Callable[[RouteChange], None]


class RouteInfoManager(KeepAlive):
    """Which brokers serve which topics, and which brokers are alive.

    >>> import routing as r
    >>> clock = r.ManualClock(start_ms=0)
    >>> mgr = r.RouteInfoManager(clock=clock)
    >>> topics = {t: r.TopicConfig(topic_name=t, write_queue_nums=4) for t in ("A", "B")}
    >>> mgr.register(r.Registration(cluster="c", broker_name="b", broker_id=0,
    ...     broker_addr="10.0.0.1:10911", topics=topics)).accepted
    True
    >>> mgr.pickup_route("A").writable_queue_count
    4
    >>> clock.advance(120_001) and mgr.scan_expired()[0].broker_addr
    '10.0.0.1:10911'
    >>> mgr.pickup_route("A") is None
    True

    Thread-safe. ``clock`` defaults to `SystemClock`, ``config`` to `RoutingConfig()`.
    """

    def __init__(self, clock: Clock | None = None, config: RoutingConfig | None = None, *,
                 listener: RouteListener | None = None) -> None:
        if config is not None and not isinstance(config, RoutingConfig):
            fail("config", config, "a RoutingConfig")
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._config = config if config is not None else RoutingConfig()
        self._listener = listener
        self._lock = threading.RLock()
        self._state = State()
        self._live = self._state.live  # the hot paths' shortcut to the live table
        self._deadlines = self._state.deadlines
        self._book = RouteBook(support_acting_master=self._config.support_acting_master)
        self._generation = 0
        self._last_now = self._clock.now_ms()
        self._started_ms = self._last_now
        wait = self._config.wait_for_service_ms
        self._ready_at_ms = self._last_now + (wait or 0)
        self._ready = wait is None or wait == 0

    # ================================================================== properties

    @property
    def config(self) -> RoutingConfig:
        return self._config

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def started_ms(self) -> int:
        """When the manager was created (ms): the readiness window counts from it."""
        return self._started_ms

    @property
    def last_ms(self) -> int:
        """The latest clock time (ms) a call used; a later reading below it counts as it.
        Right after a call that read the clock, that call's time (the journal records it).
        O(1)."""
        return self._last_now

    def reconfigure(self, config: RoutingConfig) -> None:
        """Replace the settings at once (a name server's UPDATE_NAMESRV_CONFIG).

        Later calls follow ``config``. The readiness window stays anchored at construction
        (Java counts from start-up): it is open until ``start + wait_for_service_ms``.
        Turning ``support_acting_master`` on or off rebuilds every route (O(T·B_t·I));
        any other change is O(1). Routes already handed out stay as they were.
        """
        if not isinstance(config, RoutingConfig):
            fail("config", config, "a RoutingConfig")
        with self._lock:
            now = self._now()
            old, self._config = self._config, config
            wait = config.wait_for_service_ms
            self._ready_at_ms = self._started_ms + (wait or 0)
            self._ready = wait is None or self._ready_at_ms <= now
            if config.support_acting_master == old.support_acting_master:
                return
            self._book.support_acting_master = config.support_acting_master
            self._state.touched.update(self._state.topics)
            event = self._commit(now, "reconfigure")
        if event is not None:
            self._emit(event)

    def __repr__(self) -> str:
        st = self._state
        return (f"<RouteInfoManager topics={len(st.topics)} groups={len(st.groups)} "
                f"live={len(st.live)}>")

    # ================================================================== registration

    def register(self, registration: Registration) -> RegisterResult:
        """Register (or refresh) a broker and its topics (Java ``registerBroker``, §2.1).

        Cost: O(I) plus O(T_payload) when the data version changed, on first registration,
        or when rows are missing; unchanged, O(I) for the same table object as last time,
        else one C-level check of its names against the group's rows (~15 ns per topic).
        A rejection (D3) changes nothing and returns ``accepted=False``.
        """
        reg = registration
        if not isinstance(reg, Registration):
            fail("registration", reg, "a Registration")
        validate.check_hashable("registration.channel", reg.channel)
        cap = self._config.max_queue_nums
        if cap < MAX_QUEUE_NUMS:
            for config in reg.topics.values():
                validate.check_queue_cap(f"topics[{config.topic_name!r}]",
                                         config.read_queue_nums, config.write_queue_nums, cap)
        with self._lock:
            now = self._now()
            result, event = self._register(reg, now)
        if event is not None:
            self._emit(event)
        return result

    def renew(self, registration: Registration) -> int | None:
        """`register` of a steady broker in O(1), telling no listener and building no
        result: when ``registration`` changes nothing but liveness (the same broker, table,
        flags and channel), refresh it and return its new generation; otherwise change
        nothing and return None (then call `register`). For the journal replay."""
        reg = registration
        if type(reg) is not Registration or self._config.max_queue_nums < MAX_QUEUE_NUMS:
            return None
        self._lock.acquire()  # acquire/release, not ``with``: about 100 ns less a call
        try:
            gen = self._generation + 1
            if not renew_registration(self._state, reg, self._now(), self._config,
                                      generation=gen):
                return None
            self._generation = gen
            return gen
        finally:
            self._lock.release()

    def _register(self, reg: Registration, now: int) -> tuple[RegisterResult, RouteChange | None]:
        decided = decide_registration(self._state, reg, self._config)
        if isinstance(decided, str):  # D3: a rejection changes nothing, not even liveness
            return RegisterResult(accepted=False, rejection=decided), None
        self._generation += 1
        applied = apply_registration(self._state, reg, now, decided, self._config,
                                     generation=self._generation)
        registered = () if self._listener is None else (BrokerRegistered(
            cluster=reg.cluster, broker_name=reg.broker_name, broker_id=reg.broker_id,
            broker_addr=reg.broker_addr, generation=self._generation, first=applied.first),)
        event = self._commit(now, "register", registered=registered, notices=applied.notices)
        return RegisterResult(accepted=True, master_addr=applied.master_addr,
                              ha_server_addr=applied.ha_server_addr,
                              generation=self._generation,
                              notifications=applied.notices), event

    # ================================================================== removal

    def unregister(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   generation: int | None = None) -> bool:
        """Remove a broker address (Java ``unregisterBroker``, applied synchronously): the
        members of ``broker_name`` at ``broker_addr`` whatever their id (``broker_id`` only
        decides the min-broker-id notice) and the live entry of (``cluster``, address).

        With ``generation``, only the live entry of that generation is removed (D2): a
        broker that re-registered since survives. True only if something was removed (D11).
        Cost: O(I), plus O(T_b) when the group disappears or loses its master in
        acting-master mode.
        """
        self._known_key(cluster, broker_addr)
        if type(broker_name) is not str or broker_name not in self._state.groups:
            check_name("broker_name", broker_name)
        check_int("broker_id", broker_id, low=0)
        if generation is not None:
            check_int("generation", generation, low=0)
        return self._apply_unregisters(
            ((cluster, broker_addr, broker_name, broker_id, generation),))[0]

    def unregister_many(self, requests: Iterable[UnregisterRequest]) -> tuple[bool, ...]:
        """Apply several unregisters under one lock (Java's batch worker), in order."""
        batch = tuple(requests)
        for i, req in enumerate(batch):
            if not isinstance(req, UnregisterRequest):
                fail(f"requests[{i}]", req, "an UnregisterRequest")
        return self._apply_unregisters(
            (r.cluster, r.broker_addr, r.broker_name, r.broker_id, r.generation) for r in batch)

    def _apply_unregisters(
        self, requests: Iterable[tuple[str, str, str, int, int | None]]
    ) -> tuple[bool, ...]:
        """Validated (cluster, addr, broker name, broker id, generation) requests, applied
        in order under one lock, with one commit and one event."""
        with self._lock:
            now = self._now()
            removed: list[BrokerRemoved] = []
            pending: dict[str, str] = {}
            unregister = self._unregister
            outcome = tuple([unregister(*req, removed, pending) for req in requests])
            event = self._commit(now, "unregister", removed=tuple(removed),
                                 notices=batch_notices(self._state, pending))
        if event is not None:
            self._emit(event)
        return outcome

    def _unregister(self, cluster: str, addr: str, broker_name: str, broker_id: int,
                    generation: int | None, removed: list[BrokerRemoved],
                    pending: dict[str, str]) -> bool:
        st = self._state
        key: LiveKey = (cluster, addr)
        live = st.live.get(key)
        if generation is not None and (live is None or live.generation != generation):
            return False
        changed = False
        if live is not None:
            st.drop_live(key)
            if self._listener is not None:
                removed.append(self._removed(key, live, "unregistered"))
            changed = True
        group = st.groups.get(broker_name)
        if group is not None:
            changed |= remove_member(self._state, self._config, group, addr, broker_id, pending)
        return changed

    def scan_expired(self) -> tuple[ExpiredBroker, ...]:
        """Remove every broker with ``last_update + timeout < now`` at once (D1).

        Java's scan only queues unregisters and can leave zombies; here the live entry and
        its memberships go together. Cost: O(1) when none is due (a clock read and one
        comparison with the deadline index's lower bound, under the lock), plus
        O(I + T_b) per expired broker whose group disappears.
        """
        self._lock.acquire()
        try:
            now = self._clock.now_ms()  # self._now(), inlined: the idle scan is a hot path
            last = self._last_now
            if now < last:
                now = last
            else:
                self._last_now = now
            bound = self._deadlines.lower_bound
            if bound is None or bound >= now:
                return ()
            expired, event = self._expire(now)
        finally:
            self._lock.release()
        if event is not None:
            self._emit(event)
        return expired

    def scan_due(self) -> bool:
        """Whether `scan_expired` now would remove a broker: some broker's
        ``last_update + timeout`` is before the clock's now. False means it would return
        ``()`` and change nothing but the clock clamp, which this call moves as the scan
        would (so a snapshot taken after it equals one taken after the scan): a host, or
        the journal replay, may skip the scan. Exact. O(1) when no filed
        deadline has passed (a clock read and a comparison under the lock); otherwise the
        index first re-files the brokers refreshed since they were filed (O(log n) each,
        at most once per broker per timeout), which changes no deadline."""
        self._lock.acquire()
        try:
            now = self._last_now = max(self._clock.now_ms(), self._last_now)
            deadlines = self._deadlines
            bound = deadlines.lower_bound
            if bound is None or bound >= now:
                return False
            deadlines.settle(now)
            bound = deadlines.lower_bound
            return bound is not None and bound < now
        finally:
            self._lock.release()

    def _expire(self, now: int) -> tuple[tuple[ExpiredBroker, ...], RouteChange | None]:
        """`scan_expired`'s work when a deadline is due, under the lock."""
        removed: list[BrokerRemoved] = []
        pending: dict[str, str] = {}
        drop = self._drop_live_entry
        keys = self._deadlines.pop_expired(now)
        if len(keys) == 1:  # the usual case: one broker gone silent (no comprehension)
            expired: tuple[ExpiredBroker, ...] = (drop(keys[0], "expired", removed, pending),)
        else:
            expired = tuple([drop(key, "expired", removed, pending) for key in keys])
        event = self._commit(now, "scan_expired", removed=tuple(removed),
                             notices=batch_notices(self._state, pending) if pending else ())
        return expired, event

    def on_channel_closed(self, channel: Hashable | None) -> tuple[ExpiredBroker, ...]:
        """Remove every broker registered on ``channel`` (D6; Java removes the first only).

        ``None`` does nothing (D11). Channels are matched by equality. Cost: O(brokers on
        the channel), plus group removals as for `scan_expired`.
        """
        if channel is None:
            return ()
        validate.check_hashable("channel", channel)
        with self._lock:
            now = self._now()
            keys = sorted(self._state.keys_of_channel.get(channel, ()))
            if not keys:
                return ()
            removed: list[BrokerRemoved] = []
            pending: dict[str, str] = {}
            gone = tuple(self._drop_live_entry(k, "channel_closed", removed, pending)
                         for k in keys)
            event = self._commit(now, "channel_closed", removed=tuple(removed),
                                 notices=batch_notices(self._state, pending))
        if event is not None:
            self._emit(event)
        return gone

    def _drop_live_entry(self, key: LiveKey, reason: RemovalReason,
                         removed: list[BrokerRemoved], pending: dict[str, str]
                         ) -> ExpiredBroker:
        """Remove a live entry and the address's memberships: every group of the same
        cluster holding it (Java matches the first only), and the group it registered
        into even if that group was created under another cluster name (a Java zombie)."""
        st = self._state
        live = st.drop_live(key, expired=reason == "expired")
        assert live is not None
        addr, own_name = key[1], live.broker_name
        held = st.groups_of_addr.get(key)  # (`State.groups_at` without its two calls)
        if held == own_name:  # the usual case: only its own group (a set never equals a str)
            group = st.groups[own_name]
            member_id = live.broker_id
            if group.member(member_id) != addr:  # re-registered under another id
                member_id = next(i for i, a in group.addrs.items() if a == addr)
            remove_member(st, self._config, group, addr, member_id, pending)
        else:
            names = st.groups_at(key)
            own = st.groups.get(own_name)
            if own is not None and own_name not in names and own.has_addr(addr):
                names = {*names, own_name}  # registered into a group of another cluster
            for name in sorted(names):
                group = st.groups[name]
                member_id = next(i for i, a in group.addrs.items() if a == addr)
                remove_member(st, self._config, group, addr, member_id, pending)
        if self._listener is not None:
            removed.append(self._removed(key, live, reason))
        return expired_broker(key[0], addr, own_name, live.broker_id, live.channel,
                              live.last_update, live.timeout, live.generation)

    def _removed(self, key: LiveKey, live: Live, reason: RemovalReason) -> BrokerRemoved:
        return BrokerRemoved(cluster=key[0], broker_name=live.broker_name,
                             broker_id=live.broker_id, broker_addr=key[1],
                             generation=live.generation, reason=reason,
                             last_update_ms=live.last_update)

    # ================================================================== liveness
    # heartbeat and query_data_version: `KeepAlive` (_keepalive.py), the base class

    # ================================================================== routes

    def pickup_route(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None (Java ``pickupTopicRouteData``). O(1).

        The answer is an immutable snapshot shared between callers (D4). While the
        readiness window is open (D10), raises `NotReady`.
        """
        if not self._ready:
            self._check_ready()
        try:
            entry = self._state.topics.get(topic)
        except TypeError:  # unhashable
            entry = None
        if entry is not None:
            return entry.route
        if not isinstance(topic, str):
            fail("topic", topic, "a str")
        return None

    def stored_route(self, topic: str) -> TopicRouteData | None:
        """The route the tables hold for ``topic``, even inside the readiness window (D10),
        for hosts and tools that report state rather than serve clients. O(1)."""
        if not isinstance(topic, str):
            fail("topic", topic, "a str")
        entry = self._state.topics.get(topic)
        return entry.route if entry is not None else None

    def route_version(self, topic: str) -> int:
        """A number that changes whenever ``topic``'s route changes; 0 for a topic that
        has not had a route since its rows appeared. When a topic's last row goes, its
        version goes with it (back to 0), so topic churn leaves nothing behind. Non-zero
        versions are unique across topics and only grow, so a topic that comes back gets
        a version it never had before: cache routes by them. O(1)."""
        entry = self._state.topics.get(topic)
        return entry.version if entry is not None else 0

    def _check_ready(self) -> None:
        now = self._clock.now_ms()
        if now < self._ready_at_ms:
            raise NotReady(f"name server not ready until {self._ready_at_ms} ms (now {now} ms)",
                           ready_at_ms=self._ready_at_ms)
        self._ready = True

    # ================================================================== admin writes

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear the write bit on every row of the group; return the number of topics it
        has (Java counts rows, changed or not). O(T_b)."""
        return self._perm_write(broker_name, False, "wipe_write_perm")

    def add_write_perm(self, broker_name: str) -> int:
        """Set the write bit, keeping the other bits (D5; Java forces perm 6). O(T_b)."""
        return self._perm_write(broker_name, True, "add_write_perm")

    def _perm_write(self, broker_name: str, writable: bool, operation: str) -> int:
        check_name("broker_name", broker_name)
        with self._lock:
            now = self._now()
            count = set_write_bit(self._state, broker_name, writable)
            event = self._commit(now, operation)
        if event is not None:
            self._emit(event)
        return count

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Remove ``topic`` (or only ``cluster``'s groups from it). Static-topic mappings
        stay (Java). True if a row was removed. O(B_t), or O(min(B_c, B_t)) per cluster."""
        check_topic("topic", topic)
        if cluster is not None:
            check_name("cluster", cluster)
        with self._lock:
            now = self._now()
            st = self._state
            if cluster is None:
                removed = st.drop_topic(topic)
            else:
                rows = st.rows_of(topic)
                names = st.clusters.get(cluster, {})
                hits = [n for n in (names if len(names) < len(rows) else rows)
                        if n in rows and n in names]
                removed = False
                for name in hits:
                    removed |= st.drop_row(topic, name)
            event = self._commit(now, "delete_topic")
        if event is not None:
            self._emit(event)
        return removed

    def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: upsert rows for existing groups, all or nothing (D11;
        Java stops at the first unknown group and keeps earlier rows). O(len(queue_datas))."""
        check_topic("topic", topic)
        rows = list(queue_datas)
        for i, row in enumerate(rows):
            if not isinstance(row, QueueData):
                fail(f"queue_datas[{i}]", row, "a QueueData")
            validate.check_queue_cap(f"queue_datas[{i}]", row.read_queue_nums,
                                     row.write_queue_nums, self._config.max_queue_nums)
        if not rows:
            return
        with self._lock:
            for i, row in enumerate(rows):
                if row.broker_name not in self._state.groups:
                    fail(f"queue_datas[{i}].broker_name", row.broker_name,
                         "the name of a registered broker group")
            now = self._now()
            for row in rows:
                self._state.put_row(topic, row)
            event = self._commit(now, "register_topic")
        if event is not None:
            self._emit(event)

    # ================================================================== listings

    def cluster_info(self) -> ClusterInfo:
        """Groups and clusters, as a snapshot (Java hands out its live maps). O(B·I)."""
        with self._lock:
            return listings.cluster_info(self._state)

    def all_topics(self) -> tuple[str, ...]:
        """Every topic with a row, sorted. O(T log T)."""
        with self._lock:
            return tuple(sorted(self._state.topics))

    def topics_by_cluster(self, cluster: str) -> tuple[str, ...]:
        """Topics with a row of any group of ``cluster``, sorted; () for an unknown cluster
        (D8). O(Σ T_b log) over the cluster's groups (Java: O(B_c · T))."""
        with self._lock:
            return listings.topics_by_cluster(self._state, cluster)

    def system_topics(self) -> TopicList:
        """Cluster and group names (their auto-created topics), with the address of the
        lowest-named group's lowest id (D8's deterministic representative). O(C + B)."""
        with self._lock:
            return listings.system_topics(self._state)

    def unit_topics(self) -> tuple[str, ...]:
        """Topics whose representative row (lowest broker name) has the unit flag. O(r log r)."""
        with self._lock:
            return tuple(sorted(self._book.unit))

    def has_unit_sub_topics(self) -> tuple[str, ...]:
        """Topics whose representative row has the unit-sub flag. O(r log r)."""
        with self._lock:
            return tuple(sorted(self._book.unit_sub))

    def has_unit_sub_non_unit_topics(self) -> tuple[str, ...]:
        """Topics whose representative row has unit-sub but not unit. O(r log r)."""
        with self._lock:
            return tuple(sorted(self._book.unit_sub_non_unit))

    def broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup:
        """The group's members (an empty group when unknown, D11). O(I)."""
        with self._lock:
            group = self._state.groups.get(broker_name)
            addrs = dict(sorted(group.addrs.items())) if group is not None else {}
        return BrokerMemberGroup(cluster=cluster, broker_name=broker_name, broker_addrs=addrs)

    def live_brokers(self) -> Mapping[BrokerAddr, BrokerLiveInfo]:
        """Every live entry as immutable values, keyed by `BrokerAddr`. O(L)."""
        with self._lock:
            return listings.live_brokers(self._state)

    def check_invariants(self) -> None:
        """Recompute every index and cached route from the base tables; raise
        `InvariantViolation` listing every difference. O(everything); for tests."""
        with self._lock:
            find_problems(self._state, self._book.unit_sets,
                          support_acting_master=self._config.support_acting_master)

    # ================================================================== internals

    def _commit(self, now: int, operation: str, *,
                registered: tuple[BrokerRegistered, ...] = (),
                removed: tuple[BrokerRemoved, ...] = (),
                notices: Sequence[MinBrokerIdChanged] = ()) -> RouteChange | None:
        """Rebuild the routes of touched topics; return the event for the listener."""
        st = self._state
        changed = self._book.commit(st) if st.touched or st.vanished else []
        if self._listener is None or not (changed or registered or removed or notices):
            return None
        return RouteChange(at_ms=now, operation=operation, changed_topics=frozenset(changed),
                           registered=registered, removed=removed, notifications=tuple(notices))

    def _emit(self, event: RouteChange) -> None:
        listener = self._listener
        if listener is not None:
            listener(event)
