"""Hypothesis strategies for `routing` values, fleets and operation sequences.

Requires the hypothesis package (``pip install 'routing[testing]'``). Every function is
keyword-only and takes *strategies* for the parts it builds, so you can narrow any part::

    >>> from hypothesis import strategies as st
    >>> from routing import strategies as rst
    >>> configs = rst.topic_configs(queue_nums=st.just(4))
    >>> rst.topic_configs(queue_nums=4)
    Traceback (most recent call last):
    ...
    TypeError: queue_nums must be a hypothesis strategy, got 4 (use st.just(4) for a fixed value)

Names are valid per spec D7; the ``invalid_*`` strategies generate the values D7 rejects.
`fleets` generates coherent clusters (unique broker names, one cluster per group, one group
per address), and the ``*_ops`` strategies generate operations on a given `Fleet`, invalid
ones included (unknown brokers, stale generations, single-topic first registrations,
register_topic for unknown groups, stale state versions).

Registered with hypothesis's entry point, so ``st.from_type(QueueData)``,
``st.from_type(Registration)``, ``st.from_type(Fleet)`` and friends work.
"""

from __future__ import annotations

import string
from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ._messages import Registration, RoutingConfig, UnregisterRequest
from ._validate import MAX_NAME_LENGTH, MAX_TOPIC_LENGTH
from ._values import (
    BrokerAddr,
    BrokerData,
    BrokerLiveInfo,
    DataVersion,
    Perm,
    QueueData,
    TopicConfig,
    TopicRouteData,
    TopicSysFlag,
)
from .testing._ops import (
    AddWritePermOp,
    AdvanceOp,
    BrokerSpec,
    CloseChannelOp,
    DeleteTopicOp,
    Fleet,
    GroupSpec,
    HeartbeatOp,
    Operation,
    QueryDataVersionOp,
    RegisterOp,
    RegisterTopicOp,
    ScanOp,
    UnregisterOp,
    WipeWritePermOp,
)

__all__ = [
    "add_write_perm_ops",
    "addresses",
    "advance_ops",
    "broker_addrs",
    "broker_datas",
    "broker_groups",
    "broker_live_infos",
    "broker_names",
    "channels_of",
    "close_channel_ops",
    "cluster_names",
    "data_versions",
    "delete_topic_ops",
    "fleets",
    "heartbeat_ops",
    "invalid_addresses",
    "invalid_names",
    "invalid_topic_names",
    "names",
    "operation_sequences",
    "operations",
    "perms",
    "query_data_version_ops",
    "queue_datas",
    "register_ops",
    "register_topic_ops",
    "registrations",
    "routing_configs",
    "scan_ops",
    "topic_configs",
    "topic_names",
    "topic_route_datas",
    "topic_sys_flags",
    "topic_tables",
    "unregister_ops",
    "unregister_requests",
    "wipe_write_perm_ops",
]

T = TypeVar("T")

#: Characters valid in topic names (``^[%|a-zA-Z0-9_-]+$``) minus ``%`` and ``|``, which
#: RocketMQ uses for namespaces and retry topics; names drawn from it are valid both as
#: cluster/broker names and as topic names (brokers host topics named after themselves).
NAME_ALPHABET = string.ascii_letters + string.digits + "_-"
#: The unknown group name the operation strategies use for invalid requests.
UNKNOWN_GROUP = "no-such-group"
#: The unknown topic name the operation strategies use.
UNKNOWN_TOPIC = "NoSuchTopic"


def _need(name: str, value: object) -> None:
    if not isinstance(value, SearchStrategy):
        raise TypeError(f"{name} must be a hypothesis strategy, got {value!r} "
                        f"(use st.just({value!r}) for a fixed value)")


# --------------------------------------------------------------------------- names


def names(*, alphabet: str = NAME_ALPHABET, min_size: int = 1,
          max_size: int = 12) -> SearchStrategy[str]:
    """Cluster, broker or zone names valid per D7 (non-empty, no whitespace, at most 255
    characters). Requires the hypothesis package."""
    if not 1 <= min_size <= max_size <= MAX_NAME_LENGTH:
        raise ValueError(f"need 1 <= min_size <= max_size <= {MAX_NAME_LENGTH}")
    if any(c.isspace() for c in alphabet):
        raise ValueError("alphabet must not contain whitespace (D7)")
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size)


def cluster_names(*, names: SearchStrategy[str] | None = None) -> SearchStrategy[str]:
    """Cluster names (``names()`` unless given). Requires the hypothesis package."""
    chosen = _default_names() if names is None else names
    _need("names", chosen)
    return chosen


def broker_names(*, names: SearchStrategy[str] | None = None) -> SearchStrategy[str]:
    """Broker (group) names (``names()`` unless given). Requires the hypothesis package."""
    chosen = _default_names() if names is None else names
    _need("names", chosen)
    return chosen


def _default_names() -> SearchStrategy[str]:
    return names()


def topic_names(*, min_size: int = 1, max_size: int = 24,
                alphabet: str = NAME_ALPHABET + "%|") -> SearchStrategy[str]:
    """Topic names valid per D7 (``^[%|a-zA-Z0-9_-]+$``, 1–127 chars). Requires the
    hypothesis package."""
    if not 1 <= min_size <= max_size <= MAX_TOPIC_LENGTH:
        raise ValueError(f"need 1 <= min_size <= max_size <= {MAX_TOPIC_LENGTH}")
    if set(alphabet) - set(NAME_ALPHABET + "%|"):
        raise ValueError("alphabet must be a subset of [%|a-zA-Z0-9_-]")
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size)


def invalid_names() -> SearchStrategy[Any]:
    """Values D7 rejects as cluster/broker names: empty, with whitespace, longer than 255
    characters, or not a string. Requires the hypothesis package."""
    return st.one_of(
        st.just(""),
        st.tuples(names(max_size=5), st.sampled_from(" \t\n\r\x0b\x0c\u00a0\u2003"),
                  names(max_size=5)).map("".join),
        st.integers(MAX_NAME_LENGTH + 1, MAX_NAME_LENGTH + 20).map(lambda n: "b" * n),
        st.none(), st.integers(), st.binary(min_size=1, max_size=5),
    )


def invalid_topic_names() -> SearchStrategy[Any]:
    """Values D7 rejects as topic names: empty, a character outside ``[%|a-zA-Z0-9_-]``,
    longer than 127 characters, or not a string. Requires the hypothesis package."""
    bad_char = st.characters(exclude_characters=NAME_ALPHABET + "%|")
    return st.one_of(
        st.just(""),
        st.tuples(topic_names(max_size=5), bad_char, topic_names(max_size=5)).map("".join),
        st.integers(MAX_TOPIC_LENGTH + 1, MAX_TOPIC_LENGTH + 20).map(lambda n: "T" * n),
        st.none(), st.integers(),
    )


def addresses(*, hosts: SearchStrategy[str] | None = None,
              ports: SearchStrategy[int] | None = None) -> SearchStrategy[str]:
    """``host:port`` addresses, port 1–65535; hosts default to IPv4 literals. Requires the
    hypothesis package."""
    hosts = st.ip_addresses(v=4).map(str) if hosts is None else hosts
    ports = st.integers(1, 65_535) if ports is None else ports
    _need("hosts", hosts)
    _need("ports", ports)
    return st.builds(lambda h, p: f"{h}:{p}", hosts, ports)


def invalid_addresses() -> SearchStrategy[Any]:
    """Values D7 rejects as addresses: no port, port 0 or above 65535, no host,
    whitespace, or not a string. Requires the hypothesis package."""
    return st.one_of(
        st.sampled_from(["", "10.0.0.1", "10.0.0.1:", ":10911", "10.0.0.1:0",
                         "10.0.0.1:65536", "10.0.0.1:port", "10.0.0.1 :10911",
                         "10.0.0.1:-1"]),
        st.integers(65_536, 10**6).map(lambda p: f"10.0.0.1:{p}"),
        st.none(), st.integers(),
    )


# --------------------------------------------------------------------------- values


def data_versions(*, state_versions: SearchStrategy[int] | None = None,
                  timestamps: SearchStrategy[int] | None = None,
                  counters: SearchStrategy[int] | None = None) -> SearchStrategy[DataVersion]:
    """`DataVersion` values; ``timestamps`` are wall-clock ms. Requires the hypothesis
    package."""
    state_versions = st.integers(0, 2**31 - 1) if state_versions is None else state_versions
    timestamps = st.integers(0, 2**42) if timestamps is None else timestamps
    counters = st.integers(0, 2**31 - 1) if counters is None else counters
    for name, value in (("state_versions", state_versions), ("timestamps", timestamps),
                        ("counters", counters)):
        _need(name, value)
    return st.builds(DataVersion, state_version=state_versions, timestamp=timestamps,
                     counter=counters)


def _any_versions() -> SearchStrategy[DataVersion]:
    return data_versions()


def perms() -> SearchStrategy[Perm]:
    """Any permission 0–15 as `Perm`. Requires the hypothesis package."""
    return st.integers(0, 15).map(Perm)


def topic_sys_flags() -> SearchStrategy[TopicSysFlag]:
    """Any topic system flag 0–3. Requires the hypothesis package."""
    return st.integers(0, 3).map(TopicSysFlag)


def topic_configs(*, topic_names: SearchStrategy[str] | None = None,
                  queue_nums: SearchStrategy[int] | None = None,
                  perms: SearchStrategy[int] | None = None,
                  sys_flags: SearchStrategy[int] | None = None,
                  orders: SearchStrategy[bool] | None = None) -> SearchStrategy[TopicConfig]:
    """`TopicConfig` values (queue counts 0–64 unless given). Requires the hypothesis
    package."""
    names_ = _topic_names_default() if topic_names is None else topic_names
    queue_nums = st.integers(0, 64) if queue_nums is None else queue_nums
    perms_ = _perms_default() if perms is None else perms
    sys_flags = topic_sys_flags() if sys_flags is None else sys_flags
    orders = st.booleans() if orders is None else orders
    for name, value in (("topic_names", names_), ("queue_nums", queue_nums),
                        ("perms", perms_), ("sys_flags", sys_flags), ("orders", orders)):
        _need(name, value)
    return st.builds(TopicConfig, topic_name=names_, read_queue_nums=queue_nums,
                     write_queue_nums=queue_nums, perm=perms_, topic_sys_flag=sys_flags,
                     order=orders,
                     topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]))


def _topic_names_default() -> SearchStrategy[str]:
    return topic_names()


def _perms_default() -> SearchStrategy[Perm]:
    return perms()


def topic_tables(*, configs: SearchStrategy[TopicConfig] | None = None, min_size: int = 0,
                 max_size: int = 8) -> SearchStrategy[dict[str, TopicConfig]]:
    """Topic tables ``{name: TopicConfig}`` as a broker registers them (keys are the
    configs' names). Requires the hypothesis package."""
    configs = topic_configs() if configs is None else configs
    _need("configs", configs)
    return st.lists(configs, min_size=min_size, max_size=max_size,
                    unique_by=lambda c: c.topic_name).map(
        lambda cs: {c.topic_name: c for c in cs})


def queue_datas(*, broker_names: SearchStrategy[str] | None = None,
                queue_nums: SearchStrategy[int] | None = None,
                perms: SearchStrategy[int] | None = None,
                sys_flags: SearchStrategy[int] | None = None) -> SearchStrategy[QueueData]:
    """`QueueData` rows. Requires the hypothesis package."""
    broker_names_ = _default_names() if broker_names is None else broker_names
    queue_nums = st.integers(0, 64) if queue_nums is None else queue_nums
    perms_ = _perms_default() if perms is None else perms
    sys_flags = topic_sys_flags() if sys_flags is None else sys_flags
    for name, value in (("broker_names", broker_names_), ("queue_nums", queue_nums),
                        ("perms", perms_), ("sys_flags", sys_flags)):
        _need(name, value)
    return st.builds(QueueData, broker_name=broker_names_, read_queue_nums=queue_nums,
                     write_queue_nums=queue_nums, perm=perms_, topic_sys_flag=sys_flags)


def broker_datas(*, clusters: SearchStrategy[str] | None = None,
                 broker_names: SearchStrategy[str] | None = None,
                 addresses: SearchStrategy[str] | None = None,
                 broker_ids: SearchStrategy[int] | None = None, max_members: int = 3,
                 zone_names: SearchStrategy[str | None] | None = None,
                 acting: SearchStrategy[bool] | None = None) -> SearchStrategy[BrokerData]:
    """`BrokerData` groups with 0–``max_members`` members at distinct addresses.
    Requires the hypothesis package."""
    clusters = cluster_names() if clusters is None else clusters
    broker_names_ = _default_names() if broker_names is None else broker_names
    addrs = _addresses_default() if addresses is None else addresses
    broker_ids = st.integers(0, 16) if broker_ids is None else broker_ids
    zone_names = st.none() | names() if zone_names is None else zone_names
    acting = st.booleans() if acting is None else acting
    for name, value in (("clusters", clusters), ("broker_names", broker_names_),
                        ("addresses", addrs), ("broker_ids", broker_ids),
                        ("zone_names", zone_names), ("acting", acting)):
        _need(name, value)
    members = st.dictionaries(broker_ids, addrs, max_size=max_members).filter(
        lambda m: len(set(m.values())) == len(m))
    return st.builds(BrokerData, cluster=clusters, broker_name=broker_names_,
                     broker_addrs=members, zone_name=zone_names, enable_acting_master=acting)


def _addresses_default() -> SearchStrategy[str]:
    return addresses()


def broker_addrs(*, clusters: SearchStrategy[str] | None = None,
                 addresses: SearchStrategy[str] | None = None) -> SearchStrategy[BrokerAddr]:
    """`BrokerAddr` live-table keys. Requires the hypothesis package."""
    clusters = cluster_names() if clusters is None else clusters
    addrs = _addresses_default() if addresses is None else addresses
    _need("clusters", clusters)
    _need("addresses", addrs)
    return st.builds(BrokerAddr, cluster=clusters, addr=addrs)


def broker_live_infos(*, timestamps: SearchStrategy[int] | None = None,
                      timeouts: SearchStrategy[int] | None = None
                      ) -> SearchStrategy[BrokerLiveInfo]:
    """`BrokerLiveInfo` values (ms). Requires the hypothesis package."""
    timestamps = st.integers(0, 2**42) if timestamps is None else timestamps
    timeouts = st.integers(1, 300_000) if timeouts is None else timeouts
    _need("timestamps", timestamps)
    _need("timeouts", timeouts)
    return st.builds(BrokerLiveInfo, last_update_timestamp=timestamps,
                     heartbeat_timeout_ms=timeouts, data_version=data_versions(),
                     ha_server_addr=st.none() | addresses(), generation=st.integers(0, 2**31))


@st.composite
def _route_datas(draw: st.DrawFn, groups: SearchStrategy[BrokerData],
                 rows: SearchStrategy[QueueData], max_groups: int) -> TopicRouteData:
    datas = draw(st.lists(groups.filter(lambda g: bool(g.broker_addrs)), max_size=max_groups,
                          unique_by=lambda g: g.broker_name))
    datas.sort(key=lambda g: g.broker_name)
    queue = []
    for g in datas:
        q = draw(rows)
        queue.append(QueueData(broker_name=g.broker_name, read_queue_nums=q.read_queue_nums,
                               write_queue_nums=q.write_queue_nums, perm=q.perm,
                               topic_sys_flag=q.topic_sys_flag))
    return TopicRouteData(queue_datas=queue, broker_datas=datas)


def topic_route_datas(*, groups: SearchStrategy[BrokerData] | None = None,
                      rows: SearchStrategy[QueueData] | None = None,
                      max_groups: int = 4) -> SearchStrategy[TopicRouteData]:
    """Coherent routes as `RouteInfoManager.pickup_route` returns them: one row per group,
    every group with an address, both lists sorted by broker name. Requires the
    hypothesis package."""
    groups = broker_datas(max_members=3) if groups is None else groups
    rows = queue_datas() if rows is None else rows
    _need("groups", groups)
    _need("rows", rows)
    return _route_datas(groups, rows, max_groups)


def routing_configs(*, heartbeat_timeouts: SearchStrategy[int] | None = None,
                    support_acting_master: SearchStrategy[bool] | None = None,
                    delete_topic_with_broker_registration: SearchStrategy[bool] | None = None,
                    scan_intervals: SearchStrategy[int] | None = None
                    ) -> SearchStrategy[RoutingConfig]:
    """`RoutingConfig` values over the settings `RouteModel` models (others default).
    Requires the hypothesis package."""
    heartbeat_timeouts = (st.sampled_from([3_000, 10_000, 120_000])
                          if heartbeat_timeouts is None else heartbeat_timeouts)
    support_acting_master = (st.booleans() if support_acting_master is None
                             else support_acting_master)
    delete_topic_with_broker_registration = (
        st.booleans() if delete_topic_with_broker_registration is None
        else delete_topic_with_broker_registration)
    scan_intervals = st.sampled_from([1_000, 5_000]) if scan_intervals is None \
        else scan_intervals
    for name, value in (("heartbeat_timeouts", heartbeat_timeouts),
                        ("support_acting_master", support_acting_master),
                        ("delete_topic_with_broker_registration",
                         delete_topic_with_broker_registration),
                        ("scan_intervals", scan_intervals)):
        _need(name, value)
    return st.builds(RoutingConfig, default_heartbeat_timeout_ms=heartbeat_timeouts,
                     support_acting_master=support_acting_master,
                     delete_topic_with_broker_registration=delete_topic_with_broker_registration,
                     scan_interval_ms=scan_intervals)


# --------------------------------------------------------------------------- fleets


@st.composite
def _groups(draw: st.DrawFn, cluster: SearchStrategy[str], broker_name: SearchStrategy[str],
            addresses: SearchStrategy[str], min_members: int, max_members: int,
            acting: SearchStrategy[bool | None], zones: SearchStrategy[str | None],
            with_ha: bool) -> GroupSpec:
    c, n = draw(cluster), draw(broker_name)
    ids = sorted(draw(st.lists(st.integers(0, max_members), min_size=min_members,
                               max_size=max_members, unique=True)))
    addrs = draw(st.lists(addresses, min_size=len(ids), max_size=len(ids), unique=True))
    members = tuple(
        BrokerSpec(cluster=c, broker_name=n, broker_addr=a, home_id=i,
                   ha_server_addr=_ha_of(a) if with_ha else None)
        for i, a in zip(ids, addrs, strict=True))
    return GroupSpec(cluster=c, broker_name=n, members=members,
                     enable_acting_master=draw(acting), zone_name=draw(zones))


def _ha_of(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) % 65_535 + 1}"


def broker_groups(*, cluster: SearchStrategy[str] | None = None,
                  broker_name: SearchStrategy[str] | None = None,
                  addresses: SearchStrategy[str] | None = None, min_members: int = 1,
                  max_members: int = 3, acting: SearchStrategy[bool | None] | None = None,
                  zones: SearchStrategy[str | None] | None = None) -> SearchStrategy[GroupSpec]:
    """One broker group as its members see it: distinct ids (0 is the master; a group
    may lack one) at distinct addresses. ``acting`` draws ``enable_acting_master``
    (``None``: pre-5.0 brokers). Requires the hypothesis package."""
    cluster = cluster_names() if cluster is None else cluster
    broker_name = broker_names() if broker_name is None else broker_name
    addrs = _addresses_default() if addresses is None else addresses
    acting = st.sampled_from([None, False, True]) if acting is None else acting
    zones = st.none() if zones is None else zones
    for name, value in (("cluster", cluster), ("broker_name", broker_name),
                        ("addresses", addrs), ("acting", acting), ("zones", zones)):
        _need(name, value)
    if not 1 <= min_members <= max_members:
        raise ValueError("need 1 <= min_members <= max_members")
    return _groups(cluster, broker_name, addrs, min_members, max_members, acting, zones, True)


@st.composite
def _fleets(draw: st.DrawFn, clusters: SearchStrategy[str], broker_names: SearchStrategy[str],
            topics: SearchStrategy[str], min_groups: int, max_groups: int, max_members: int,
            max_clusters: int, max_topics: int, acting: SearchStrategy[bool | None],
            zones: SearchStrategy[str | None]) -> Fleet:
    cluster_pool = draw(st.lists(clusters, min_size=1, max_size=max_clusters, unique=True))
    group_names = draw(st.lists(broker_names, min_size=min_groups, max_size=max_groups,
                                unique=True))
    groups = []
    host = 0
    for name in group_names:
        if draw(st.integers(0, 3)):  # usually a master and 0..max_members-1 slaves
            ids = [0, *range(1, draw(st.integers(1, max_members)))]
        else:  # sometimes a group whose brokers have ids without a master
            count = draw(st.integers(1, max_members))
            ids = sorted(draw(st.lists(st.integers(0, max_members), min_size=count,
                                       max_size=count, unique=True)))
        cluster = draw(st.sampled_from(cluster_pool))
        members = []
        for i in ids:
            addr = f"10.0.{host // 250}.{host % 250 + 1}:10911"
            host += 1
            members.append(BrokerSpec(cluster=cluster, broker_name=name, broker_addr=addr,
                                      home_id=i, ha_server_addr=_ha_of(addr)))
        groups.append(GroupSpec(cluster=cluster, broker_name=name, members=tuple(members),
                                enable_acting_master=draw(acting), zone_name=draw(zones)))
    pool = draw(st.lists(topics, min_size=min(2, max_topics), max_size=max_topics,
                         unique=True))
    return Fleet(groups=tuple(groups), topics=tuple(pool))


def fleets(*, clusters: SearchStrategy[str] | None = None,
           broker_names: SearchStrategy[str] | None = None,
           topics: SearchStrategy[str] | None = None, min_groups: int = 1,
           max_groups: int = 3, max_members: int = 3, max_clusters: int = 2,
           max_topics: int = 4, acting: SearchStrategy[bool | None] | None = None,
           zones: SearchStrategy[str | None] | None = None) -> SearchStrategy[Fleet]:
    """Coherent fleets: unique broker names, each group in one cluster, each address
    (``10.0.x.y:10911``, HA on port 10912) in one group, plus a pool of topic names.

    Defaults are small and readable (clusters ``c1``…, groups ``broker-a``…, topics
    ``T0``…) so that failing traces are short. Requires the hypothesis package.
    """
    clusters = st.sampled_from(["c1", "c2", "c3"]) if clusters is None else clusters
    broker_names = (st.sampled_from(["broker-a", "broker-b", "broker-c", "broker-d"])
                    if broker_names is None else broker_names)
    topics = st.sampled_from(["T0", "T1", "T2", "T3", "T4"]) if topics is None else topics
    acting = st.sampled_from([None, False, True]) if acting is None else acting
    zones = st.none() | st.just("zone-1") if zones is None else zones
    for name, value in (("clusters", clusters), ("broker_names", broker_names),
                        ("topics", topics), ("acting", acting), ("zones", zones)):
        _need(name, value)
    if not 1 <= min_groups <= max_groups or max_members < 1 or max_clusters < 1:
        raise ValueError("need 1 <= min_groups <= max_groups, max_members >= 1, "
                         "max_clusters >= 1")
    return _fleets(clusters, broker_names, topics, min_groups, max_groups, max_members,
                   max_clusters, max_topics, acting, zones)


def _any_fleets() -> SearchStrategy[Fleet]:
    return fleets()


# --------------------------------------------------------------------------- registrations


def channels_of(fleet: Fleet) -> tuple[str, ...]:
    """The channel handles the operation strategies use for ``fleet``: two per broker
    (a connection and a reconnection), as strings ``"ch:<addr>#<n>"``."""
    return tuple(f"ch:{b.broker_addr}#{n}" for b in fleet.brokers for n in (1, 2))


def _small_versions() -> SearchStrategy[DataVersion]:
    return data_versions(state_versions=st.integers(0, 1), timestamps=st.just(0),
                         counters=st.integers(0, 3))


def _small_configs(fleet: Fleet) -> SearchStrategy[TopicConfig]:
    return topic_configs(topic_names=st.sampled_from(fleet.topics),
                         queue_nums=st.sampled_from([0, 1, 4, 8]),
                         perms=st.sampled_from([6, 7, 4, 2, 0, 14]),
                         sys_flags=st.sampled_from([0, 0, 1, 2, 3]), orders=st.just(False))


@st.composite
def _registrations(draw: st.DrawFn, brokers: SearchStrategy[BrokerSpec],
                   topics: SearchStrategy[dict[str, TopicConfig]],
                   versions: SearchStrategy[DataVersion],
                   timeouts: SearchStrategy[int | None],
                   channels: SearchStrategy[Hashable | None] | None,
                   broker_ids: SearchStrategy[int] | None,
                   acting: SearchStrategy[bool | None] | None,
                   partial: SearchStrategy[bool], fleet: Fleet | None) -> Registration:
    spec = draw(brokers)
    if channels is None:
        channels = st.sampled_from([None, f"ch:{spec.broker_addr}#1",
                                    f"ch:{spec.broker_addr}#2"])
    group = fleet.group(spec.broker_name) if fleet is not None else None
    if acting is None:
        acting_value = group.enable_acting_master if group is not None else None
    else:
        acting_value = draw(acting)
    return Registration(
        cluster=spec.cluster, broker_name=spec.broker_name,
        broker_id=spec.home_id if broker_ids is None else draw(broker_ids),
        broker_addr=spec.broker_addr, ha_server_addr=spec.ha_server_addr,
        zone_name=group.zone_name if group is not None else None,
        heartbeat_timeout_ms=draw(timeouts), enable_acting_master=acting_value,
        data_version=draw(versions), topics=draw(topics), channel=draw(channels),
        partial=draw(partial))


def registrations(*, fleet: Fleet | None = None,
                  brokers: SearchStrategy[BrokerSpec] | None = None,
                  topics: SearchStrategy[dict[str, TopicConfig]] | None = None,
                  data_versions: SearchStrategy[DataVersion] | None = None,
                  timeouts: SearchStrategy[int | None] | None = None,
                  channels: SearchStrategy[Hashable | None] | None = None,
                  broker_ids: SearchStrategy[int] | None = None,
                  acting: SearchStrategy[bool | None] | None = None,
                  partial: SearchStrategy[bool] | None = None) -> SearchStrategy[Registration]:
    """`Registration` requests. With ``fleet``, from one of its brokers (its home id unless
    ``broker_ids`` is given, its group's acting-master and zone settings, topics from the
    fleet's pool, versions from a small pool so that "unchanged version" happens);
    without, from arbitrary brokers. Requires the hypothesis package."""
    if fleet is not None:
        brokers = st.sampled_from(fleet.brokers) if brokers is None else brokers
        topics = topic_tables(configs=_small_configs(fleet), max_size=4) \
            if topics is None else topics
        data_versions = _small_versions() if data_versions is None else data_versions
    else:
        brokers = st.builds(BrokerSpec, cluster=cluster_names(), broker_name=broker_names(),
                            broker_addr=addresses(), home_id=st.integers(0, 8),
                            ha_server_addr=st.none() | addresses()) \
            if brokers is None else brokers
        topics = topic_tables() if topics is None else topics
        data_versions = _any_versions() if data_versions is None else data_versions
    timeouts = st.none() | st.sampled_from([1_000, 3_000, 10_000]) if timeouts is None \
        else timeouts
    partial = st.booleans() if partial is None else partial
    for name, value in (("brokers", brokers), ("topics", topics),
                        ("data_versions", data_versions), ("timeouts", timeouts),
                        ("partial", partial)):
        _need(name, value)
    for name, opt in (("channels", channels), ("broker_ids", broker_ids), ("acting", acting)):
        if opt is not None:
            _need(name, opt)
    return _registrations(brokers, topics, data_versions, timeouts, channels, broker_ids,
                          acting, partial, fleet)


def unregister_requests(*, clusters: SearchStrategy[str] | None = None,
                        addresses: SearchStrategy[str] | None = None,
                        broker_names: SearchStrategy[str] | None = None,
                        broker_ids: SearchStrategy[int] | None = None,
                        generations: SearchStrategy[int | None] | None = None
                        ) -> SearchStrategy[UnregisterRequest]:
    """`UnregisterRequest` values. Requires the hypothesis package."""
    clusters = cluster_names() if clusters is None else clusters
    addrs = _addresses_default() if addresses is None else addresses
    broker_names_ = _default_names() if broker_names is None else broker_names
    broker_ids = st.integers(0, 16) if broker_ids is None else broker_ids
    generations = st.none() | st.integers(0, 2**31) if generations is None else generations
    for name, value in (("clusters", clusters), ("addresses", addrs),
                        ("broker_names", broker_names_), ("broker_ids", broker_ids),
                        ("generations", generations)):
        _need(name, value)
    return st.builds(UnregisterRequest, cluster=clusters, broker_addr=addrs,
                     broker_name=broker_names_, broker_id=broker_ids, generation=generations)


# --------------------------------------------------------------------------- operations


def _addr_targets(fleet: Fleet) -> SearchStrategy[tuple[str, str]]:
    known = st.sampled_from([(b.cluster, b.broker_addr) for b in fleet.brokers])
    strangers = st.sampled_from([(fleet.clusters[0], a) for a in fleet.strangers])
    return st.one_of(known, known, known, strangers)


def register_ops(*, fleet: Fleet, data_versions: SearchStrategy[DataVersion] | None = None,
                 topics: SearchStrategy[dict[str, TopicConfig]] | None = None,
                 timeouts: SearchStrategy[int | None] | None = None,
                 broker_ids: SearchStrategy[int] | None = None,
                 partial: SearchStrategy[bool] | None = None) -> SearchStrategy[RegisterOp]:
    """Registrations by ``fleet``'s brokers: usually under their home id, sometimes under
    another (a promotion, or a stale state version), with 0–4 topics (one topic from a
    newcomer is rejected, D3). Requires the hypothesis package."""
    ids = (st.sampled_from([0, 1, 2]) if broker_ids is None else broker_ids)
    _need("broker_ids", ids)

    @st.composite
    def build(draw: st.DrawFn) -> RegisterOp:
        spec = draw(st.sampled_from(fleet.brokers))
        bid = draw(st.just(spec.home_id) | ids) if broker_ids is None else draw(ids)
        reg = draw(registrations(fleet=fleet, brokers=st.just(spec), topics=topics,
                                 data_versions=data_versions, timeouts=timeouts,
                                 broker_ids=st.just(bid),
                                 partial=st.just(False) | st.just(True)
                                 if partial is None else partial))
        return RegisterOp(registration=reg)

    return build()


def heartbeat_ops(*, fleet: Fleet) -> SearchStrategy[HeartbeatOp]:
    """Heartbeats from ``fleet``'s brokers and from strangers (ignored). Requires the
    hypothesis package."""
    return _addr_targets(fleet).map(lambda t: HeartbeatOp(cluster=t[0], broker_addr=t[1]))


def query_data_version_ops(*, fleet: Fleet,
                           data_versions: SearchStrategy[DataVersion] | None = None
                           ) -> SearchStrategy[QueryDataVersionOp]:
    """QUERY_DATA_VERSION requests (they also refresh liveness). Requires the hypothesis
    package."""
    versions = _small_versions() if data_versions is None else data_versions
    _need("data_versions", versions)
    return st.builds(lambda t, v: QueryDataVersionOp(cluster=t[0], broker_addr=t[1],
                                                     data_version=v),
                     _addr_targets(fleet), versions)


def advance_ops(*, ms: SearchStrategy[int] | None = None) -> SearchStrategy[AdvanceOp]:
    """Time steps, in ms; by default small steps and steps around common timeouts.
    Requires the hypothesis package."""
    ms = st.sampled_from([0, 1, 999, 1_000, 1_001, 3_000, 5_000, 10_000, 120_001]) | \
        st.integers(0, 15_000) if ms is None else ms
    _need("ms", ms)
    return ms.map(lambda n: AdvanceOp(ms=n))


def scan_ops() -> SearchStrategy[ScanOp]:
    """The expiry scan. Requires the hypothesis package."""
    return st.just(ScanOp())


def unregister_ops(*, fleet: Fleet, generations: SearchStrategy[int | None] | None = None
                   ) -> SearchStrategy[UnregisterOp]:
    """Unregisters of ``fleet``'s brokers (sometimes naming the wrong group, or a
    stranger) with ``generations`` (default: None or a small, likely stale number).
    Requires the hypothesis package."""
    gens = st.none() | st.integers(1, 40) if generations is None else generations
    _need("generations", gens)

    @st.composite
    def build(draw: st.DrawFn) -> UnregisterOp:
        cluster, addr = draw(_addr_targets(fleet))
        spec = next((b for b in fleet.brokers if b.broker_addr == addr), None)
        name = spec.broker_name if spec is not None else UNKNOWN_GROUP
        name = draw(st.just(name) | st.sampled_from(fleet.broker_names))
        bid = spec.home_id if spec is not None else 0
        return UnregisterOp(request=UnregisterRequest(
            cluster=cluster, broker_addr=addr, broker_name=name, broker_id=bid,
            generation=draw(gens)))

    return build()


def close_channel_ops(*, fleet: Fleet, channels: SearchStrategy[Hashable] | None = None
                      ) -> SearchStrategy[CloseChannelOp]:
    """Channel closes (``None`` and unknown channels do nothing). Requires the
    hypothesis package."""
    pool = st.sampled_from([*channels_of(fleet), None, "ch:unknown"]) if channels is None \
        else channels
    _need("channels", pool)
    return pool.map(lambda c: CloseChannelOp(channel=c))


def delete_topic_ops(*, fleet: Fleet) -> SearchStrategy[DeleteTopicOp]:
    """Topic deletions, whole or per cluster (unknown topics and clusters included).
    Requires the hypothesis package."""
    topics = st.sampled_from([*fleet.topics, UNKNOWN_TOPIC])
    clusters = st.none() | st.sampled_from([*fleet.clusters, "no-such-cluster"])
    return st.builds(lambda t, c: DeleteTopicOp(topic=t, cluster=c), topics, clusters)


def wipe_write_perm_ops(*, fleet: Fleet) -> SearchStrategy[WipeWritePermOp]:
    """WIPE_WRITE_PERM_OF_BROKER for a group of ``fleet`` (or an unknown one). Requires
    the hypothesis package."""
    return st.sampled_from([*fleet.broker_names, UNKNOWN_GROUP]).map(
        lambda n: WipeWritePermOp(broker_name=n))


def add_write_perm_ops(*, fleet: Fleet) -> SearchStrategy[AddWritePermOp]:
    """ADD_WRITE_PERM_OF_BROKER for a group of ``fleet`` (or an unknown one). Requires
    the hypothesis package."""
    return st.sampled_from([*fleet.broker_names, UNKNOWN_GROUP]).map(
        lambda n: AddWritePermOp(broker_name=n))


def register_topic_ops(*, fleet: Fleet) -> SearchStrategy[RegisterTopicOp]:
    """REGISTER_TOPIC_IN_NAMESRV with 0–3 rows; a row for an unknown group makes the
    whole request invalid (D11). Requires the hypothesis package."""
    rows = queue_datas(broker_names=st.sampled_from([*fleet.broker_names, UNKNOWN_GROUP]),
                       queue_nums=st.sampled_from([0, 2, 8]),
                       perms=st.sampled_from([6, 4, 2]), sys_flags=st.sampled_from([0, 1]))
    return st.builds(lambda t, qs: RegisterTopicOp(topic=t, queue_datas=tuple(qs)),
                     st.sampled_from(fleet.topics), st.lists(rows, max_size=3))


def operations(*, fleet: Fleet, generations: SearchStrategy[int | None] | None = None,
               advance: SearchStrategy[int] | None = None) -> SearchStrategy[Operation]:
    """Any one operation on ``fleet``, registrations weighted up so that state builds.
    Requires the hypothesis package."""
    return st.one_of(
        register_ops(fleet=fleet), register_ops(fleet=fleet), register_ops(fleet=fleet),
        heartbeat_ops(fleet=fleet), query_data_version_ops(fleet=fleet),
        advance_ops(ms=advance), advance_ops(ms=advance), scan_ops(),
        unregister_ops(fleet=fleet, generations=generations),
        close_channel_ops(fleet=fleet), delete_topic_ops(fleet=fleet),
        wipe_write_perm_ops(fleet=fleet), add_write_perm_ops(fleet=fleet),
        register_topic_ops(fleet=fleet),
    )


@st.composite
def _sequences(draw: st.DrawFn, fleets_: SearchStrategy[Fleet], min_size: int,
               max_size: int) -> list[Operation]:
    fleet = draw(fleets_)
    return draw(st.lists(operations(fleet=fleet), min_size=min_size, max_size=max_size))


def operation_sequences(*, fleets: SearchStrategy[Fleet] | None = None, min_size: int = 0,
                        max_size: int = 30) -> SearchStrategy[list[Operation]]:
    """Whole operation sequences on one drawn fleet, valid and invalid operations mixed;
    replay them with `routing.testing.run_operations`. Requires the hypothesis package."""
    chosen = _any_fleets() if fleets is None else fleets
    _need("fleets", chosen)
    return _sequences(chosen, min_size, max_size)


# --------------------------------------------------------------------------- from_type


def _fleet_ops(make: Any) -> SearchStrategy[Any]:
    return fleets().flatmap(lambda f: make(fleet=f))


def _register_types(register: Any) -> None:
    pairs: Sequence[tuple[type, SearchStrategy[Any]]] = (
        (DataVersion, data_versions()),
        (TopicConfig, topic_configs()),
        (QueueData, queue_datas()),
        (BrokerData, broker_datas()),
        (BrokerAddr, broker_addrs()),
        (BrokerLiveInfo, broker_live_infos()),
        (TopicRouteData, topic_route_datas()),
        (Registration, registrations()),
        (UnregisterRequest, unregister_requests()),
        (RoutingConfig, routing_configs()),
        (Perm, perms()),
        (TopicSysFlag, topic_sys_flags()),
        (Fleet, fleets()),
        (GroupSpec, broker_groups()),
        (BrokerSpec, fleets().flatmap(lambda f: st.sampled_from(f.brokers))),
        (RegisterOp, _fleet_ops(register_ops)),
        (HeartbeatOp, _fleet_ops(heartbeat_ops)),
        (QueryDataVersionOp, _fleet_ops(query_data_version_ops)),
        (AdvanceOp, advance_ops()),
        (ScanOp, scan_ops()),
        (UnregisterOp, _fleet_ops(unregister_ops)),
        (CloseChannelOp, _fleet_ops(close_channel_ops)),
        (DeleteTopicOp, _fleet_ops(delete_topic_ops)),
        (WipeWritePermOp, _fleet_ops(wipe_write_perm_ops)),
        (AddWritePermOp, _fleet_ops(add_write_perm_ops)),
        (RegisterTopicOp, _fleet_ops(register_topic_ops)),
    )
    for cls, strategy in pairs:
        register(cls, strategy)


def _hypothesis_setup_hook() -> None:
    """Register routing's types with ``st.register_type_strategy`` (hypothesis calls this
    through the ``hypothesis`` entry point when it is imported)."""
    _register_types(st.register_type_strategy)
