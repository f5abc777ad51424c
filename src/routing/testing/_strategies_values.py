"""Hypothesis strategies for names and single values; `routing.testing.strategies` is the public
face (see its docstring)."""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .._errors import InvalidType
from .._messages import RoutingConfig
from .._validate import MAX_NAME_LENGTH, MAX_TOPIC_LENGTH, fail
from .._values import (
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

__all__ = [
    "NAME_ALPHABET",
    "UNKNOWN_GROUP",
    "UNKNOWN_TOPIC",
    "addresses",
    "any_versions",
    "broker_addrs",
    "broker_datas",
    "broker_live_infos",
    "broker_names",
    "cluster_names",
    "data_versions",
    "default_addresses",
    "default_names",
    "invalid_addresses",
    "invalid_names",
    "invalid_topic_names",
    "names",
    "need_strategy",
    "perms",
    "queue_datas",
    "register_value_types",
    "routing_configs",
    "topic_configs",
    "topic_names",
    "topic_route_datas",
    "topic_sys_flags",
    "topic_tables",
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


def need_strategy(name: str, value: object) -> None:
    """Raise `InvalidType` (a ``TypeError``) unless ``value`` is a hypothesis strategy
    (every argument of these functions is one, so any part can be narrowed)."""
    if not isinstance(value, SearchStrategy):
        raise InvalidType(f"{name} must be a hypothesis strategy, got {value!r} "
                          f"(use st.just({value!r}) for a fixed value)", field=name, value=value)



def _sizes(min_size: int, max_size: int, most: int) -> None:
    """Raise `InvalidRequest` naming the size that breaks ``1 <= min <= max <= most``."""
    if not 1 <= min_size <= most:
        fail("min_size", min_size, f"in [1, {most}] (need 1 <= min_size <= max_size <= {most})")
    if not min_size <= max_size <= most:
        fail("max_size", max_size, f"in [min_size={min_size}, {most}] "
                                   f"(need 1 <= min_size <= max_size <= {most})")


# --------------------------------------------------------------------------- names


def names(*, alphabet: str = NAME_ALPHABET, min_size: int = 1,
          max_size: int = 12) -> SearchStrategy[str]:
    """Cluster, broker or zone names valid per D7 (non-empty, no whitespace, at most 255
    characters). Requires the hypothesis package."""
    _sizes(min_size, max_size, MAX_NAME_LENGTH)
    if any(c.isspace() for c in alphabet):
        fail("alphabet", alphabet, "without whitespace (D7)")
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size)


def cluster_names(*, names: SearchStrategy[str] | None = None) -> SearchStrategy[str]:
    """Cluster names (``names()`` unless given). Requires the hypothesis package."""
    chosen = default_names() if names is None else names
    need_strategy("names", chosen)
    return chosen


def broker_names(*, names: SearchStrategy[str] | None = None) -> SearchStrategy[str]:
    """Broker (group) names (``names()`` unless given). Requires the hypothesis package."""
    chosen = default_names() if names is None else names
    need_strategy("names", chosen)
    return chosen


def default_names() -> SearchStrategy[str]:
    """`names` with its defaults (deferred defaults for other strategies' arguments)."""
    return names()


def topic_names(*, min_size: int = 1, max_size: int = 24,
                alphabet: str = NAME_ALPHABET + "%|") -> SearchStrategy[str]:
    """Topic names valid per D7 (``^[%|a-zA-Z0-9_-]+$``, 1–127 chars). Requires the
    hypothesis package."""
    _sizes(min_size, max_size, MAX_TOPIC_LENGTH)
    if set(alphabet) - set(NAME_ALPHABET + "%|"):
        fail("alphabet", alphabet, "a subset of [%|a-zA-Z0-9_-]")
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
    need_strategy("hosts", hosts)
    need_strategy("ports", ports)
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
        need_strategy(name, value)
    return st.builds(DataVersion, state_version=state_versions, timestamp=timestamps,
                     counter=counters)


def any_versions() -> SearchStrategy[DataVersion]:
    """`data_versions` with its defaults."""
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
        need_strategy(name, value)
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
    need_strategy("configs", configs)
    return st.lists(configs, min_size=min_size, max_size=max_size,
                    unique_by=lambda c: c.topic_name).map(
        lambda cs: {c.topic_name: c for c in cs})


def queue_datas(*, broker_names: SearchStrategy[str] | None = None,
                queue_nums: SearchStrategy[int] | None = None,
                perms: SearchStrategy[int] | None = None,
                sys_flags: SearchStrategy[int] | None = None) -> SearchStrategy[QueueData]:
    """`QueueData` rows. Requires the hypothesis package."""
    broker_names_ = default_names() if broker_names is None else broker_names
    queue_nums = st.integers(0, 64) if queue_nums is None else queue_nums
    perms_ = _perms_default() if perms is None else perms
    sys_flags = topic_sys_flags() if sys_flags is None else sys_flags
    for name, value in (("broker_names", broker_names_), ("queue_nums", queue_nums),
                        ("perms", perms_), ("sys_flags", sys_flags)):
        need_strategy(name, value)
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
    broker_names_ = default_names() if broker_names is None else broker_names
    addrs = default_addresses() if addresses is None else addresses
    broker_ids = st.integers(0, 16) if broker_ids is None else broker_ids
    zone_names = st.none() | names() if zone_names is None else zone_names
    acting = st.booleans() if acting is None else acting
    for name, value in (("clusters", clusters), ("broker_names", broker_names_),
                        ("addresses", addrs), ("broker_ids", broker_ids),
                        ("zone_names", zone_names), ("acting", acting)):
        need_strategy(name, value)
    members = st.dictionaries(broker_ids, addrs, max_size=max_members).filter(
        lambda m: len(set(m.values())) == len(m))
    return st.builds(BrokerData, cluster=clusters, broker_name=broker_names_,
                     broker_addrs=members, zone_name=zone_names, enable_acting_master=acting)


def default_addresses() -> SearchStrategy[str]:
    """`addresses` with its defaults."""
    return addresses()


def broker_addrs(*, clusters: SearchStrategy[str] | None = None,
                 addresses: SearchStrategy[str] | None = None) -> SearchStrategy[BrokerAddr]:
    """`BrokerAddr` live-table keys. Requires the hypothesis package."""
    clusters = cluster_names() if clusters is None else clusters
    addrs = default_addresses() if addresses is None else addresses
    need_strategy("clusters", clusters)
    need_strategy("addresses", addrs)
    return st.builds(BrokerAddr, cluster=clusters, addr=addrs)


def broker_live_infos(*, timestamps: SearchStrategy[int] | None = None,
                      timeouts: SearchStrategy[int] | None = None
                      ) -> SearchStrategy[BrokerLiveInfo]:
    """`BrokerLiveInfo` values (ms). Requires the hypothesis package."""
    timestamps = st.integers(0, 2**42) if timestamps is None else timestamps
    timeouts = st.integers(1, 300_000) if timeouts is None else timeouts
    need_strategy("timestamps", timestamps)
    need_strategy("timeouts", timeouts)
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
    need_strategy("groups", groups)
    need_strategy("rows", rows)
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
        need_strategy(name, value)
    return st.builds(RoutingConfig, default_heartbeat_timeout_ms=heartbeat_timeouts,
                     support_acting_master=support_acting_master,
                     delete_topic_with_broker_registration=delete_topic_with_broker_registration,
                     scan_interval_ms=scan_intervals)


def register_value_types(register: Callable[[type, SearchStrategy[Any]], None]) -> None:
    """Register a strategy for each value type with ``register``
    (``st.register_type_strategy``): ``st.from_type(QueueData)`` and friends."""
    pairs: tuple[tuple[type, SearchStrategy[Any]], ...] = (
        (DataVersion, data_versions()),
        (TopicConfig, topic_configs()),
        (QueueData, queue_datas()),
        (BrokerData, broker_datas()),
        (BrokerAddr, broker_addrs()),
        (BrokerLiveInfo, broker_live_infos()),
        (TopicRouteData, topic_route_datas()),
        (RoutingConfig, routing_configs()),
        (Perm, perms()),
        (TopicSysFlag, topic_sys_flags()),
    )
    for cls, strategy in pairs:
        register(cls, strategy)
