"""The stateless parts of the broker side (Java study §3): rules, configuration, actions.

No state, no clock, no I/O. `routing.heartbeat.BrokerHeartbeat` is built from these, and
everything here is public through `routing.heartbeat`, so a host or a test can check one rule
on its own. Every time is an integer count of milliseconds.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

import attrs

from .._messages import BrokerIdentity, Registration, VersionAnswer
from .._validate import (
    check_addr,
    check_int,
    fail,
    positive,
    valid_bool,
    valid_int,
)
from .._values import DataVersion, Perm, QueueData, TopicConfig

__all__ = [
    "FIRST_REGISTER_DELAY_MS",
    "HEARTBEAT_INITIAL_DELAY_MS",
    "MAX_REGISTER_PERIOD_MS",
    "MIN_REGISTER_PERIOD_MS",
    "MEMBER_GROUP_TIMEOUT_MS",
    "SINGLE_TOPIC_TIMEOUT_MS",
    "SYNC_MEMBER_GROUP_INITIAL_DELAY_MS",
    "UNREGISTER_TIMEOUT_MS",
    "Action",
    "BrokerConfig",
    "CheckNameServer",
    "MinBrokerChanged",
    "QueryOutcome",
    "SendHeartbeat",
    "SendMemberGroupQuery",
    "SendRegistration",
    "SendTopicRegistration",
    "SendUnregister",
    "SendVersionQuery",
    "UpdateMasterAddress",
    "need_register",
    "next_tick_ms",
    "register_period_ms",
    "rewrite_permissions",
    "split_topics",
]

#: Initial delay of the periodic full registration (``BrokerController.start``: ``1000 * 10``).
FIRST_REGISTER_DELAY_MS = 10_000
#: Lower clamp of ``registerNameServerPeriod``.
MIN_REGISTER_PERIOD_MS = 10_000
#: Upper clamp of ``registerNameServerPeriod``.
MAX_REGISTER_PERIOD_MS = 60_000
#: Initial delay of the lightweight heartbeat (``BrokerController.scheduleSendHeartbeat``).
HEARTBEAT_INITIAL_DELAY_MS = 1_000
#: Timeout of each UNREGISTER_BROKER at shutdown (``BrokerOuterAPI.unregisterBroker``: 3000).
UNREGISTER_TIMEOUT_MS = 3_000
#: How long ``registerSingleTopicAll`` waits for its replies (``BrokerController``: 3000).
SINGLE_TOPIC_TIMEOUT_MS = 3_000
#: Timeout of the member-group query (``BrokerOuterAPI.getBrokerMemberGroup``: 3000).
MEMBER_GROUP_TIMEOUT_MS = 3_000
#: Initial delay of ``syncBrokerMemberGroup`` (``BrokerController.start``: 1000).
SYNC_MEMBER_GROUP_INITIAL_DELAY_MS = 1_000


def register_period_ms(configured: int) -> int:
    """The period of the full registration: ``max(10_000, min(configured, 60_000))`` ms.

    Java: the ``scheduleAtFixedRate`` period in ``BrokerController.start``, from
    ``registerNameServerPeriod`` (default 30 000). Cost: O(1).

    >>> [register_period_ms(p) for p in (5_000, 10_000, 30_000, 60_000, 90_000)]
    [10000, 10000, 30000, 60000, 60000]
    """
    check_int("register_period_ms", configured)
    return max(MIN_REGISTER_PERIOD_MS, min(configured, MAX_REGISTER_PERIOD_MS))


def next_tick_ms(first_ms: int, period_ms: int, now_ms: int) -> int:
    """The first instant of the fixed-rate grid ``first_ms + k * period_ms`` (k ≥ 0) after now.

    Returns ``first_ms`` while ``now_ms < first_ms``. A host that polls late gets one run,
    not a burst: the missed grid points are skipped (``ScheduledThreadPoolExecutor`` would run
    them back to back). Cost: O(1).

    >>> next_tick_ms(10_000, 30_000, 9_999), next_tick_ms(10_000, 30_000, 10_000)
    (10000, 40000)
    >>> next_tick_ms(10_000, 30_000, 75_000)
    100000
    """
    if period_ms <= 0:
        fail("period_ms", period_ms, "> 0")
    if now_ms < first_ms:
        return first_ms
    return first_ms + ((now_ms - first_ms) // period_ms + 1) * period_ms


class QueryOutcome(enum.Enum):
    """How a QUERY_DATA_VERSION ended when it produced no `VersionAnswer`.

    ``FAILED`` is an exception on the broker (connect or send error, RPC timeout) and counts as
    "changed"; ``ERROR_RESPONSE`` is a non-SUCCESS response code and ``NO_ANSWER`` a query
    still running when the broker stopped waiting: both count as unchanged
    (``BrokerOuterAPI.needRegister``).
    """

    FAILED = "failed"
    ERROR_RESPONSE = "error_response"
    NO_ANSWER = "no_answer"


def need_register(
    local_version: DataVersion, answers: Iterable[VersionAnswer | QueryOutcome]
) -> bool:
    """Java ``BrokerOuterAPI.needRegister`` + ``BrokerController.needRegister``: the OR over
    name servers.

    One entry per name server. A `VersionAnswer` (a SUCCESS response) votes "register" when
    ``changed`` is true or when it returns a stored version different from ``local_version``
    (a host that reads a null ``changed`` header passes ``changed=True``, as Java counts null as
    true). `QueryOutcome.FAILED` votes "register"; ``ERROR_RESPONSE`` and ``NO_ANSWER`` vote
    nothing. No answers at all (no name server) means False. Cost: O(len(answers)).

    >>> v = DataVersion(timestamp=1, counter=1)
    >>> need_register(v, [VersionAnswer(changed=False, stored=v)])
    False
    >>> need_register(v, [VersionAnswer(changed=False, stored=v), QueryOutcome.FAILED])
    True
    >>> need_register(v, [QueryOutcome.ERROR_RESPONSE, QueryOutcome.NO_ANSWER])
    False
    """
    for answer in answers:
        if isinstance(answer, VersionAnswer):
            if answer.changed or (answer.stored is not None and answer.stored != local_version):
                return True
        elif answer is QueryOutcome.FAILED:
            return True
    return False


def rewrite_permissions(
    topics: Iterable[TopicConfig], broker_permission: int
) -> tuple[TopicConfig, ...]:
    """The permission rewrite of ``BrokerController.registerBrokerAll`` (5.x).

    When ``broker_permission`` lacks READ or WRITE, each topic becomes
    ``TopicConfig(name, read_queue_nums, write_queue_nums, perm & broker_permission)``: like
    Java's four-argument constructor this drops ``topic_sys_flag``, ``order``, ``attributes``
    and the filter type (4.x used ``perm = broker_permission``). Otherwise the topics are
    returned as they are. Order is kept. Cost: O(topics).

    >>> t = TopicConfig(topic_name="T", perm=Perm.READ | Perm.WRITE | Perm.INHERIT, order=True)
    >>> [(c.perm, c.order) for c in rewrite_permissions([t], Perm.READ)]
    [(<Perm.READ: 4>, False)]
    >>> rewrite_permissions([t], Perm.READ | Perm.WRITE)[0] is t
    True
    """
    check_int("broker_permission", broker_permission, low=0, high=15)
    items = tuple(topics)
    if broker_permission & Perm.READ and broker_permission & Perm.WRITE:
        return items
    return tuple(
        TopicConfig(
            topic_name=t.topic_name,
            read_queue_nums=t.read_queue_nums,
            write_queue_nums=t.write_queue_nums,
            perm=int(t.perm) & broker_permission,
        )
        for t in items
    )


def split_topics(
    topics: Sequence[TopicConfig], size: int | None
) -> tuple[tuple[TopicConfig, ...], ...]:
    """Cut a topic table into the registrations ``registerBrokerAll`` sends.

    ``size=None`` (split registration off) gives one chunk with every topic. Otherwise every
    ``size`` topics make a chunk, and the remainder makes a final chunk that is always present,
    even when empty (Java sends the final wrapper whenever ``enableSplitRegistration`` is on):
    ``len(result) == len(topics) // size + 1``. Cost: O(topics).

    >>> names = [TopicConfig(topic_name=f"T{i}") for i in range(5)]
    >>> [len(c) for c in split_topics(names, 2)], [len(c) for c in split_topics(names[:4], 2)]
    ([2, 2, 1], [2, 2, 0])
    >>> [len(c) for c in split_topics(names, None)]
    [5]
    """
    items = tuple(topics)
    if size is None:
        return (items,)
    check_int("split_registration_size", size, low=1)
    full = len(items) // size * size
    chunks = [items[i : i + size] for i in range(0, full, size)]
    chunks.append(items[full:])
    return tuple(chunks)


# --------------------------------------------------------------------------- configuration




def _to_name_servers(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        fail("BrokerConfig.name_servers", value, "a sequence of 'host:port' addresses")
    return tuple(value)


def _to_perm(value: Any) -> Perm:
    return Perm(check_int("BrokerConfig.broker_permission", value, low=0, high=15))


@attrs.frozen(kw_only=True)
class BrokerConfig(BrokerIdentity):
    """The broker settings that drive registration (Java ``BrokerConfig``, §3.1 defaults).

    Identity: ``cluster``, ``broker_name``, ``broker_id``, ``broker_addr``
    (``brokerIP1:listenPort``), ``ha_server_addr`` (``brokerIP2:haListenPort``), ``zone_name``.
    ``name_servers`` is the name-server address list. Registrations and heartbeats go to the
    *available* ones (Java 5.x ``getAvailableNameSrvList``: every one until the host reports a
    failed connection, see `BrokerHeartbeat.on_connect_result`); ``needRegister`` queries,
    single-topic registrations and unregisters go to all of them. With
    ``scan_available_name_servers`` (Java's client scans by default; here the host opts in)
    the broker asks the host to check every name server at start and every
    ``connect_timeout_ms`` (`CheckNameServer`). ``enable_single_topic_register`` sends topic
    changes as REGISTER_TOPIC_IN_NAMESRV instead of incremental registrations;
    ``sync_broker_member_group_period_ms`` is the period of ``syncBrokerMemberGroup`` in
    acting-master mode. All durations are ms. ``total_replicas`` is the
    MessageStoreConfig setting: with more than one replica and ``enable_slave_acting_master`` the
    broker starts isolated. ``disappear_time_after_start_ms`` (Java default -1, no delay) holds
    the periodic registration back after start. Every field is validated; a bad one raises
    `InvalidRequest` naming ``BrokerConfig.<field>``.
    """

    name_servers: tuple[str, ...] = attrs.field(default=(), converter=_to_name_servers)
    register_period_ms: int = attrs.field(default=30_000, validator=positive)
    force_register: bool = attrs.field(default=True, validator=valid_bool)
    register_timeout_ms: int = attrs.field(default=24_000, validator=positive)
    broker_permission: Perm = attrs.field(default=Perm.READ | Perm.WRITE, converter=_to_perm)
    enable_slave_acting_master: bool = attrs.field(default=False, validator=valid_bool)
    broker_heartbeat_interval_ms: int = attrs.field(default=1_000, validator=positive)
    broker_not_active_timeout_ms: int = attrs.field(default=10_000, validator=positive)
    send_heartbeat_timeout_ms: int = attrs.field(default=1_000, validator=positive)
    compatible_with_old_namesrv: bool = attrs.field(default=True, validator=valid_bool)
    enable_split_registration: bool = attrs.field(default=False, validator=valid_bool)
    split_registration_size: int = attrs.field(default=800, validator=positive)
    total_replicas: int = attrs.field(default=1, validator=positive)
    disappear_time_after_start_ms: int = attrs.field(
        default=-1, validator=valid_int)
    enable_single_topic_register: bool = attrs.field(default=False, validator=valid_bool)
    sync_broker_member_group_period_ms: int = attrs.field(default=1_000, validator=positive)
    connect_timeout_ms: int = attrs.field(default=3_000, validator=positive)
    scan_available_name_servers: bool = attrs.field(default=False, validator=valid_bool)

    @name_servers.validator
    def _check_name_servers(self, attribute: Any, value: tuple[str, ...]) -> None:
        for i, addr in enumerate(value):
            check_addr(f"BrokerConfig.name_servers[{i}]", addr)
        if len(set(value)) != len(value):
            fail("BrokerConfig.name_servers", value, "a list without duplicates")

    @property
    def effective_register_period_ms(self) -> int:
        """`register_period_ms` clamped to [10 000, 60 000] ms, as the schedule uses it."""
        return register_period_ms(self.register_period_ms)

    @property
    def heartbeat_timeout_ms(self) -> int | None:
        """Sent in each registration: ``broker_not_active_timeout_ms`` in acting-master mode,
        else None (the name server's default, 120 000 ms)."""
        return self.broker_not_active_timeout_ms if self.enable_slave_acting_master else None

    @property
    def starts_isolated(self) -> bool:
        """Java ``start``: ``totalReplicas > 1 && enableSlaveActingMaster``."""
        return self.total_replicas > 1 and self.enable_slave_acting_master


# --------------------------------------------------------------------------- actions


@attrs.frozen(kw_only=True)
class SendRegistration:
    """Send REGISTER_BROKER to ``name_server`` (``BrokerOuterAPI.registerBroker``).

    Unless ``oneway``, report the outcome with ``request_id`` to `BrokerHeartbeat` within
    ``timeout_ms``. The host sends ``registration.filter_servers`` (empty, as 5.x does) and the
    zone as the ``__ZONE_NAME`` ext field.
    """

    name_server: str
    request_id: int
    registration: Registration
    oneway: bool
    timeout_ms: int


@attrs.frozen(kw_only=True)
class SendVersionQuery:
    """Send QUERY_DATA_VERSION with ``data_version`` as the body.

    ``oneway=False``: the ``need_register`` check; report the answer with ``request_id``.
    ``oneway=True``: the acting-master heartbeat (``sendHeartbeatViaDataVersion``); no reply
    is expected and any reply is ignored.
    """

    name_server: str
    request_id: int
    cluster: str
    broker_addr: str
    broker_name: str
    broker_id: int
    data_version: DataVersion
    oneway: bool
    timeout_ms: int


@attrs.frozen(kw_only=True)
class _BrokerNotice:
    """A request that names the broker to ``name_server`` and expects no reply: its
    header is the broker's identity, sent within ``timeout_ms``."""

    name_server: str
    cluster: str
    broker_addr: str
    broker_name: str
    broker_id: int
    timeout_ms: int


@attrs.frozen(kw_only=True)
class SendHeartbeat(_BrokerNotice):
    """Send BROKER_HEARTBEAT oneway (``BrokerOuterAPI.sendHeartbeat``); no reply expected."""


@attrs.frozen(kw_only=True)
class SendUnregister(_BrokerNotice):
    """Send UNREGISTER_BROKER (``BrokerOuterAPI.unregisterBroker``, 3 000 ms each).

    Java sends them one after the other and ignores failures; no reply is needed here.
    """


@attrs.frozen(kw_only=True)
class UpdateMasterAddress:
    """The first successful registration reply of a send (``handleRegisterBrokerResult``).

    The host sets the slave-synchronize master address to ``master_addr`` (even when None) and,
    if it updates HA addresses periodically and ``ha_server_addr`` is not None, the store's HA
    master and master addresses. ``name_server`` is who answered first.
    """

    master_addr: str | None
    ha_server_addr: str | None
    name_server: str


@attrs.frozen(kw_only=True)
class SendTopicRegistration:
    """Send REGISTER_TOPIC_IN_NAMESRV for ``topic`` with one `QueueData` as the body (a
    ``TopicRouteData`` holding only ``queue_datas``), ``BrokerOuterAPI.registerSingleTopicAll``.

    Report the outcome with ``request_id`` (`BrokerHeartbeat.on_topic_reply` for SUCCESS):
    the broker waits at most ``timeout_ms`` for all of them before its next send.
    """

    name_server: str
    request_id: int
    topic: str
    queue_data: QueueData
    timeout_ms: int


@attrs.frozen(kw_only=True)
class SendMemberGroupQuery:
    """``syncBrokerMemberGroup``: ask ``name_server`` who is in this broker's group.

    ``via_route=False``: GET_BROKER_MEMBER_GROUP (cluster, broker name). ``via_route=True``
    (``compatible_with_old_namesrv``): GET_ROUTEINFO_BY_TOPIC for ``route_topic``; the host
    turns the route into a group with `member_group_from_route`. Report the group with
    `BrokerHeartbeat.on_member_group` (``None`` for a non-SUCCESS answer).
    """

    name_server: str
    request_id: int
    cluster: str
    broker_name: str
    via_route: bool
    timeout_ms: int

    @property
    def route_topic(self) -> str:
        """``rmq_sys_SYNC_BROKER_MEMBER_<broker name>``."""
        return f"rmq_sys_SYNC_BROKER_MEMBER_{self.broker_name}"


@attrs.frozen(kw_only=True)
class CheckNameServer:
    """Java's ``scanAvailableNameSrv`` for one server: connect to ``name_server`` unless a
    connection is open (waiting at most ``timeout_ms``), then report the result with
    `BrokerHeartbeat.on_connect_result`."""

    name_server: str
    timeout_ms: int


@attrs.frozen(kw_only=True)
class MinBrokerChanged:
    """An event, nothing to send: the smallest live id of the group changed (``onMinBrokerChange``).

    ``acting_as_master`` says whether this broker now runs the master-only services
    (``changeSpecialServiceStatus(brokerId == minBrokerId)``). ``master_offline`` is True when
    ``offline_broker_addr`` was this slave's master address: the host stops syncing from it
    (``onMasterOffline``). ``ha_broker_addr`` comes from a NOTIFY_MIN_BROKER_ID_CHANGE push.
    """

    min_broker_id: int
    min_broker_addr: str | None
    offline_broker_addr: str | None
    ha_broker_addr: str | None
    acting_as_master: bool
    master_offline: bool


Action: TypeAlias = (
    SendRegistration | SendVersionQuery | SendHeartbeat | SendUnregister | UpdateMasterAddress
    | SendTopicRegistration | SendMemberGroupQuery | CheckNameServer | MinBrokerChanged
)
