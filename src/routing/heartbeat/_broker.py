"""`BrokerHeartbeat`: one broker's registration and heartbeat state machine (see the
package docstring of `routing.heartbeat`)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping

from .._clock import Clock, SystemClock
from .._errors import InvalidRequest, RoutingError
from .._frozen import FrozenMap
from .._messages import RegisterResult, Registration, VersionAnswer
from .._validate import check_int, fail
from .._values import DataVersion, Perm, TopicConfig, TopicQueueMappingInfo
from ._available import Availability, AvailabilityView
from ._member_group import MemberGroupSync, MemberGroupView
from ._round import Round, RoundSpec, Step, TopicSend, check_topic_config
from ._rules import (
    FIRST_REGISTER_DELAY_MS,
    HEARTBEAT_INITIAL_DELAY_MS,
    SINGLE_TOPIC_TIMEOUT_MS,
    UNREGISTER_TIMEOUT_MS,
    Action,
    BrokerConfig,
    QueryOutcome,
    SendHeartbeat,
    SendRegistration,
    SendTopicRegistration,
    SendUnregister,
    SendVersionQuery,
    UpdateMasterAddress,
    need_register,
    next_tick_ms,
    rewrite_permissions,
    split_topics,
)
from ._topics_sync import TopicTable, check_kv_table

__all__ = ["BrokerHeartbeat"]


class BrokerHeartbeat(TopicTable, MemberGroupView, AvailabilityView):
    """The registration and heartbeat schedule of one broker, driven by the clock.

    Every method that takes ``now_ms`` reads the injected clock when it is None; a given
    ``now_ms`` must not be earlier than any instant seen before (`InvalidRequest`), and a clock
    reading behind an explicit ``now_ms`` seen before counts as that instant. Every method that
    returns actions first does what `poll` would do at that instant, so the host simply
    performs whatever comes back. Thread-safe (one lock); each call costs O(name servers)
    plus O(topics) when it starts a registration round.

    The topic table and its changes come from `TopicTable` (``_topics_sync.py``), the
    member-group view from `MemberGroupView` (``_member_group.py``) and the available
    name servers from `AvailabilityView` (``_available.py``).
    """

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock | None = None,
        topics: Iterable[TopicConfig] = (),
        data_version: DataVersion | None = None,
    ) -> None:
        if not isinstance(config, BrokerConfig):
            raise InvalidRequest(f"config must be a BrokerConfig, got {config!r:.80}",
                                 field="config", value=config)
        if data_version is not None and not isinstance(data_version, DataVersion):
            fail("data_version", data_version, "a DataVersion or None")
        self._config = config
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lock = threading.RLock()
        self._last_now = self._clock.now_ms()
        self._topics: dict[str, TopicConfig] = {}
        for t in topics:
            self._topics[check_topic_config(t).topic_name] = t
        # Java's DataVersion constructor reads the wall clock: timestamp = now, counter 0.
        self._version = data_version if data_version is not None else DataVersion(
            timestamp=self._last_now)
        self._state_version = self._version.state_version
        self._mappings: FrozenMap[str, TopicQueueMappingInfo] = FrozenMap()
        self._permission = config.broker_permission
        self._isolated = config.starts_isolated
        self._started_at: int | None = None
        self._should_start_at = 0
        self._shut_down = False
        self._next_id = 0
        self._next_register_at = 0
        self._next_heartbeat_at: int | None = None
        self._round: Round | None = None
        self._queued: deque[RoundSpec] = deque()
        self._master_addr: str | None = None
        self._master_ha_server_addr: str | None = None
        self._order_kv: FrozenMap[str, str] | None = None
        self._ns = Availability(config)
        self._group = MemberGroupSync(config)

    def __repr__(self) -> str:
        cfg = self._config
        state = ("shut down" if self._shut_down else "not started" if self._started_at is None
                 else "isolated" if self._isolated else "running")
        return (f"<BrokerHeartbeat {cfg.cluster}/{cfg.broker_name}/{cfg.broker_id} {state} "
                f"topics={len(self._topics)} version={self._version.counter} "
                f"registering={self._round is not None}>")

    # ------------------------------------------------------------------ state

    @property
    def config(self) -> BrokerConfig:
        return self._config

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def data_version(self) -> DataVersion:
        """The broker's current topic-table version (``TopicConfigManager.getDataVersion``)."""
        return self._version

    @property
    def topics(self) -> FrozenMap[str, TopicConfig]:
        """A copy of the local topic table (before any permission rewrite). O(topics)."""
        with self._lock:
            return FrozenMap(self._topics)

    @property
    def broker_permission(self) -> Perm:
        return self._permission

    @property
    def isolated(self) -> bool:
        return self._isolated

    @property
    def started(self) -> bool:
        return self._started_at is not None

    @property
    def shut_down(self) -> bool:
        return self._shut_down

    @property
    def registering(self) -> bool:
        """True while a registration round waits for replies."""
        return self._round is not None

    @property
    def master_addr(self) -> str | None:
        """``masterAddr`` of the last winning registration reply (None until one)."""
        return self._master_addr

    @property
    def master_ha_server_addr(self) -> str | None:
        """``haServerAddr`` of the last winning reply that carried one (Java keeps the old
        HA address when the winner's is null)."""
        return self._master_ha_server_addr

    def next_deadline_ms(self) -> int | None:
        """When `poll` next has something to do (ms); None before start and after shutdown.

        The minimum of the next periodic registration, the next heartbeat, the next member-group
        sync or name-server scan, and the end of the current round's (or sync query's) wait.
        O(1).
        """
        with self._lock:
            if self._started_at is None or self._shut_down:
                return None
            due = self._next_register_at
            for other in (self._next_heartbeat_at, self._ns.next_deadline_ms,
                          self._group.next_deadline_ms):
                if other is not None:
                    due = min(due, other)
            if self._round is not None:
                due = min(due, self._round.deadline_ms)
            return due

    # ------------------------------------------------------------------ lifecycle

    def start(self, now_ms: int | None = None) -> tuple[Action, ...]:
        """Java ``BrokerController.start``: schedule everything, register at once.

        Unless the broker starts isolated, returns a forced registration round
        (``registerBrokerAll(true, false, true)``, whatever ``force_register`` says). The
        periodic registration falls due at ``now + 10 000``, the acting-master heartbeat and
        member-group sync at ``now + 1 000``. With ``scan_available_name_servers`` the first
        `CheckNameServer` actions come first (Java's scan runs at once, in parallel with the
        registration). Calling it twice raises `RoutingError`.
        """
        with self._lock:
            if self._started_at is not None:
                raise RoutingError("BrokerHeartbeat.start called twice")
            if self._shut_down:
                raise RoutingError("BrokerHeartbeat.start called after shutdown")
            now = self._now(now_ms)
            cfg = self._config
            self._started_at = now
            self._should_start_at = now + cfg.disappear_time_after_start_ms
            self._next_register_at = now + FIRST_REGISTER_DELAY_MS
            if cfg.enable_slave_acting_master:
                self._next_heartbeat_at = now + HEARTBEAT_INITIAL_DELAY_MS
            self._ns.start(now)
            self._group.start(now, self._isolated)
            out: list[Action] = list(self._ns.poll(now))
            if not self._isolated:
                out += self._request(RoundSpec(force=True, oneway=False, periodic=False), now)
            return tuple(out)

    def poll(self, now_ms: int | None = None) -> tuple[Action, ...]:
        """Everything due at ``now``: the end of a round's wait, the periodic registration,
        the heartbeat. Late polls run each schedule once, not once per missed period."""
        with self._lock:
            return tuple(self._advance(self._now(now_ms)))

    def shutdown(self, now_ms: int | None = None) -> tuple[SendUnregister, ...]:
        """Java ``shutdownBasicService`` → ``unregisterBrokerAll``: stop, and unregister from
        every name server (the full list, in order, 3 000 ms each).

        Any round in flight is abandoned (``doRegisterBrokerAll`` skips once shut down) and
        later replies are ignored. A second call returns nothing.
        """
        with self._lock:
            self._now(now_ms)
            if self._shut_down:
                return ()
            self._shut_down = True
            self._round = None
            self._queued.clear()
            self._ns.stop()
            self._group.stop()
            cfg = self._config
            return tuple(
                SendUnregister(name_server=ns, cluster=cfg.cluster, broker_addr=cfg.broker_addr,
                               broker_name=cfg.broker_name, broker_id=cfg.broker_id,
                               timeout_ms=UNREGISTER_TIMEOUT_MS)
                for ns in cfg.name_servers
            )

    def register_now(
        self, now_ms: int | None = None, *, force: bool | None = None, oneway: bool = False
    ) -> tuple[Action, ...]:
        """Run ``registerBrokerAll(.., oneway, force)`` now, or when the current round ends.

        ``force=None`` uses ``config.force_register``. Like Java's direct callers (role change,
        admin update) this ignores isolation. ``oneway`` sends expect no reply, so every chunk
        goes out at once.
        """
        with self._lock:
            self._require_started("register_now")
            now = self._now(now_ms)
            out = self._advance(now)
            if force is None:
                force = self._config.force_register
            out += self._request(RoundSpec(force=force, oneway=oneway, periodic=False), now)
            return tuple(out)

    def end_isolation(self, now_ms: int | None = None) -> tuple[Action, ...]:
        """Java ``startService`` (``BrokerPreOnlineService``): register, then stop being
        isolated. The registration uses ``config.force_register``."""
        with self._lock:
            self._require_started("end_isolation")
            now = self._now(now_ms)
            out = self._advance(now)
            spec = RoundSpec(force=self._config.force_register, oneway=False, periodic=False)
            out += self._request(spec, now)
            self._isolated = False
            group = self._group
            group.acting_as_master = self._config.broker_id == group.min_broker_id
            return tuple(out)

    def isolate(self, now_ms: int | None = None) -> None:
        """Java ``stopService``: no periodic registration and no heartbeat until
        `end_isolation`, and the master-only services stop (`acting_as_master` is False).
        A round already in flight completes."""
        with self._lock:
            self._now(now_ms)
            self._isolated = True
            self._group.acting_as_master = False

    # ------------------------------------------------------------------ replies

    def on_register_reply(
        self, name_server: str, request_id: int, result: RegisterResult,
        *, kv_table: Mapping[str, str] | None = None, now_ms: int | None = None,
    ) -> tuple[Action, ...]:
        """A REGISTER_BROKER answered SUCCESS. The first accepted one of the send wins and yields
        `UpdateMasterAddress`; later ones change nothing. ``accepted=False`` (D3: Java answers
        SYSTEM_ERROR, or an empty success for a stale epoch) never wins. Replies after the wait
        (``register_timeout_ms``) or with an unknown id are ignored.

        ``kv_table`` is the reply's body, the name server's ``ORDER_TOPIC_CONFIG`` namespace
        (None when the reply had no body). The winner's is applied as
        ``updateOrderTopicConfig`` when the round checks order config (every round but
        `set_broker_permission`'s): see `order_topic_config`."""
        kv_table = check_kv_table(kv_table)
        with self._lock:
            now = self._now(now_ms)
            out = self._advance(now)
            r = self._round
            if (r is None or r.querying or r.topic_step
                    or r.pending.get(request_id) != name_server):
                return tuple(out)
            del r.pending[request_id]
            if result.accepted and not r.won:
                r.won = True
                self._master_addr = result.master_addr
                if result.ha_server_addr is not None:
                    self._master_ha_server_addr = result.ha_server_addr
                out.append(UpdateMasterAddress(master_addr=result.master_addr,
                                               ha_server_addr=result.ha_server_addr,
                                               name_server=name_server))
                if r.spec.check_order:
                    self._apply_order_config(kv_table, now)
            if not r.pending:
                out += self._close_wait(now)
            return tuple(out)

    def on_topic_reply(
        self, name_server: str, request_id: int, *, now_ms: int | None = None
    ) -> tuple[Action, ...]:
        """A REGISTER_TOPIC_IN_NAMESRV answered (Java logs the code and moves on: any answer
        counts the same)."""
        with self._lock:  # reentrant: _outcome takes it again
            r = self._round
            if r is not None and not r.topic_step:
                return tuple(self._advance(self._now(now_ms)))
            return self._outcome(name_server, request_id, QueryOutcome.ERROR_RESPONSE, now_ms)

    def on_version_reply(
        self, name_server: str, request_id: int, answer: VersionAnswer,
        *, now_ms: int | None = None,
    ) -> tuple[Action, ...]:
        """A QUERY_DATA_VERSION answered SUCCESS with ``changed`` and the stored version."""
        if not isinstance(answer, VersionAnswer):
            fail("answer", answer, "a VersionAnswer")
        return self._outcome(name_server, request_id, answer, now_ms)

    def on_error_response(
        self, name_server: str, request_id: int, *, now_ms: int | None = None
    ) -> tuple[Action, ...]:
        """The name server answered with a non-SUCCESS code. A version query counts as
        unchanged; a registration gives no result (Java's ``MQBrokerException``, logged)."""
        return self._outcome(name_server, request_id, QueryOutcome.ERROR_RESPONSE, now_ms)

    def on_failure(
        self, name_server: str, request_id: int, *, now_ms: int | None = None
    ) -> tuple[Action, ...]:
        """The request failed on the broker's side (connect or send error). A version query
        counts as changed (Java appends TRUE on any exception); a registration gives no result."""
        return self._outcome(name_server, request_id, QueryOutcome.FAILED, now_ms)

    def on_timeout(
        self, name_server: str, request_id: int, *, now_ms: int | None = None
    ) -> tuple[Action, ...]:
        """The host's RPC timed out. Java's ``RemotingTimeoutException`` is an exception like any
        other, so this is `on_failure`. (A query still unanswered when the round's own wait ends
        counts as unchanged instead: that case needs no call, `poll` handles it.)"""
        return self._outcome(name_server, request_id, QueryOutcome.FAILED, now_ms)

    # ------------------------------------------------------------------ internals

    def _now(self, now_ms: int | None) -> int:
        if now_ms is None:
            # A clock reading behind a time given explicitly before counts as that time.
            self._last_now = max(self._last_now, self._clock.now_ms())
            return self._last_now
        now = check_int("now_ms", now_ms)
        if now < self._last_now:
            raise InvalidRequest(
                f"now_ms must not go backwards: got {now}, already saw {self._last_now}",
                field="now_ms", value=now)
        self._last_now = now
        return now

    def _require_started(self, what: str) -> None:
        if self._started_at is None:
            raise RoutingError(f"BrokerHeartbeat.{what} called before start")

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _advance(self, now: int) -> list[Action]:
        out: list[Action] = []
        if self._started_at is None or self._shut_down:
            return out
        cfg = self._config
        if self._round is not None and now >= self._round.deadline_ms:
            out += self._close_wait(now)
        if now >= self._next_register_at:
            self._next_register_at = next_tick_ms(
                self._started_at + FIRST_REGISTER_DELAY_MS, cfg.effective_register_period_ms, now)
            spec = RoundSpec(force=cfg.force_register, oneway=False, periodic=True)
            out += self._request(spec, now)
        if self._next_heartbeat_at is not None and now >= self._next_heartbeat_at:
            self._next_heartbeat_at = next_tick_ms(
                self._started_at + HEARTBEAT_INITIAL_DELAY_MS, cfg.broker_heartbeat_interval_ms,
                now)
            if not self._isolated:
                out += self._heartbeats()
        out += self._ns.poll(now)
        out += self._group.poll(now, self._new_id)
        return out

    def _heartbeats(self) -> list[Action]:
        cfg = self._config
        out: list[Action] = []
        for ns in self._ns.available():
            if cfg.compatible_with_old_namesrv:
                out.append(SendVersionQuery(
                    name_server=ns, request_id=self._new_id(), cluster=cfg.cluster,
                    broker_addr=cfg.broker_addr, broker_name=cfg.broker_name,
                    broker_id=cfg.broker_id, data_version=self._version, oneway=True,
                    timeout_ms=cfg.send_heartbeat_timeout_ms))
            else:
                out.append(SendHeartbeat(
                    name_server=ns, cluster=cfg.cluster, broker_addr=cfg.broker_addr,
                    broker_name=cfg.broker_name, broker_id=cfg.broker_id,
                    timeout_ms=cfg.send_heartbeat_timeout_ms))
        return out

    def _request(self, spec: RoundSpec, now: int) -> list[Action]:
        """Start a round, or queue it behind the one in flight (Java: ``synchronized``).
        Periodic runs queued during one round collapse into one. Nothing before start or
        after shutdown."""
        if self._started_at is None or self._shut_down:
            return []
        if self._round is None:
            return self._begin(spec, now)
        if not (spec.periodic and any(q.periodic for q in self._queued)):
            self._queued.append(spec)
        return []

    def _chunks(self, spec: RoundSpec) -> deque[Step]:
        if spec.steps is not None:
            return deque(spec.steps)
        return deque(self._build())

    def _build(self) -> deque[Registration]:
        cfg = self._config
        ordered = [self._topics[name] for name in sorted(self._topics)]
        chunks = split_topics(rewrite_permissions(ordered, self._permission),
                              cfg.split_registration_size if cfg.enable_split_registration
                              else None)
        last = len(chunks) - 1
        return deque(
            Registration(
                cluster=cfg.cluster, broker_name=cfg.broker_name, broker_id=cfg.broker_id,
                broker_addr=cfg.broker_addr, ha_server_addr=cfg.ha_server_addr,
                zone_name=cfg.zone_name, heartbeat_timeout_ms=cfg.heartbeat_timeout_ms,
                enable_acting_master=cfg.enable_slave_acting_master,
                data_version=self._version,
                topics={t.topic_name: t for t in chunk},
                topic_queue_mappings=self._mappings if i == last else None,
                filter_servers=(),
                partial=cfg.enable_split_registration,
            )
            for i, chunk in enumerate(chunks)
        )

    def _begin(self, spec: RoundSpec, now: int) -> list[Action]:
        cfg = self._config
        if self._shut_down:
            return []
        if spec.periodic and (now < self._should_start_at or self._isolated):
            return []
        r = Round(spec=spec, version=self._version, chunks=self._chunks(spec))
        self._round = r
        if cfg.enable_split_registration or spec.force:
            return self._send_next(now)
        r.querying = True
        out: list[Action] = []
        for ns in cfg.name_servers:
            rid = self._new_id()
            r.pending[rid] = ns
            out.append(SendVersionQuery(
                name_server=ns, request_id=rid, cluster=cfg.cluster,
                broker_addr=cfg.broker_addr, broker_name=cfg.broker_name,
                broker_id=cfg.broker_id, data_version=r.version, oneway=False,
                timeout_ms=cfg.register_timeout_ms))
        if not r.pending:
            return self._close_wait(now)
        r.deadline_ms = now + cfg.register_timeout_ms
        return out

    def _send_next(self, now: int) -> list[Action]:
        """Send chunks until one must be waited for; end the round when none is left."""
        cfg = self._config
        r = self._round
        assert r is not None
        out: list[Action] = []
        while r.chunks:
            step = r.chunks.popleft()
            r.won = False
            r.topic_step = isinstance(step, TopicSend)
            if isinstance(step, TopicSend):  # registerSingleTopicAll: the full list
                for ns in cfg.name_servers:
                    rid = self._new_id()
                    out.append(SendTopicRegistration(
                        name_server=ns, request_id=rid, topic=step.topic,
                        queue_data=step.queue_data, timeout_ms=SINGLE_TOPIC_TIMEOUT_MS))
                    r.pending[rid] = ns
                wait = SINGLE_TOPIC_TIMEOUT_MS
            else:
                for ns in self._ns.available():
                    rid = self._new_id()
                    out.append(SendRegistration(name_server=ns, request_id=rid,
                                                registration=step, oneway=r.spec.oneway,
                                                timeout_ms=cfg.register_timeout_ms))
                    if not r.spec.oneway:
                        r.pending[rid] = ns
                wait = cfg.register_timeout_ms
            if r.pending:
                r.deadline_ms = now + wait
                return out
        return out + self._end(now)

    def _close_wait(self, now: int) -> list[Action]:
        """Every outcome is in, or the wait ended: decide the query, or send the next chunk."""
        r = self._round
        assert r is not None
        unanswered = len(r.pending)
        r.pending.clear()
        if r.querying:
            r.querying = False
            answers = [*r.answers, *[QueryOutcome.NO_ANSWER] * unanswered]
            if not need_register(r.version, answers):
                return self._end(now)
        return self._send_next(now)

    def _end(self, now: int) -> list[Action]:
        self._round = None
        out: list[Action] = []
        while self._queued and self._round is None:
            out += self._begin(self._queued.popleft(), now)
        return out

    def _outcome(
        self, name_server: str, request_id: int, outcome: VersionAnswer | QueryOutcome,
        now_ms: int | None,
    ) -> tuple[Action, ...]:
        with self._lock:
            now = self._now(now_ms)
            out = self._advance(now)
            r = self._round
            if self._group.owns(name_server, request_id):
                if outcome is QueryOutcome.FAILED:
                    self._group.failed()
                else:
                    self._group.answered(None, self._isolated)
                return tuple(out)
            if r is None or r.pending.get(request_id) != name_server:
                return tuple(out)
            if isinstance(outcome, VersionAnswer) and not r.querying:
                return tuple(out)  # a version answer to a registration id: not ours
            del r.pending[request_id]
            if r.querying:
                r.answers.append(outcome)
            if not r.pending:
                out += self._close_wait(now)
            return tuple(out)

