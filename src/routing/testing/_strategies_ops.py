"""Hypothesis strategies for fleets, registrations and operations on a fleet;
`routing.testing.strategies` is the public face (see its docstring)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .._messages import Registration, UnregisterRequest
from .._validate import check_int
from .._values import (
    DataVersion,
    TopicConfig,
)
from . import _ops as ops
from ._ops import BrokerSpec, Fleet, GroupSpec, Operation
from ._strategies_values import (
    UNKNOWN_GROUP,
    UNKNOWN_TOPIC,
    addresses,
    any_versions,
    broker_names,
    cluster_names,
    data_versions,
    default_addresses,
    default_names,
    need_strategy,
    queue_datas,
    topic_configs,
    topic_tables,
)

__all__ = [
    "add_write_perm_ops",
    "advance_ops",
    "broker_groups",
    "channels_of",
    "close_channel_ops",
    "delete_topic_ops",
    "fleets",
    "heartbeat_ops",
    "operation_sequences",
    "operations",
    "query_data_version_ops",
    "register_op_types",
    "register_ops",
    "register_topic_ops",
    "registrations",
    "scan_ops",
    "unregister_ops",
    "unregister_requests",
    "wipe_write_perm_ops",
]

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
    addrs = default_addresses() if addresses is None else addresses
    acting = st.sampled_from([None, False, True]) if acting is None else acting
    zones = st.none() if zones is None else zones
    for name, value in (("cluster", cluster), ("broker_name", broker_name),
                        ("addresses", addrs), ("acting", acting), ("zones", zones)):
        need_strategy(name, value)
    check_int("min_members", min_members, low=1, high=max_members)
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
        need_strategy(name, value)
    check_int("min_groups", min_groups, low=1, high=max_groups)
    check_int("max_members", max_members, low=1)
    check_int("max_clusters", max_clusters, low=1)
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
        data_versions = any_versions() if data_versions is None else data_versions
    timeouts = st.none() | st.sampled_from([1_000, 3_000, 10_000]) if timeouts is None \
        else timeouts
    partial = st.booleans() if partial is None else partial
    for name, value in (("brokers", brokers), ("topics", topics),
                        ("data_versions", data_versions), ("timeouts", timeouts),
                        ("partial", partial)):
        need_strategy(name, value)
    for name, opt in (("channels", channels), ("broker_ids", broker_ids), ("acting", acting)):
        if opt is not None:
            need_strategy(name, opt)
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
    addrs = default_addresses() if addresses is None else addresses
    broker_names_ = default_names() if broker_names is None else broker_names
    broker_ids = st.integers(0, 16) if broker_ids is None else broker_ids
    generations = st.none() | st.integers(0, 2**31) if generations is None else generations
    for name, value in (("clusters", clusters), ("addresses", addrs),
                        ("broker_names", broker_names_), ("broker_ids", broker_ids),
                        ("generations", generations)):
        need_strategy(name, value)
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
                 partial: SearchStrategy[bool] | None = None) -> SearchStrategy[ops.RegisterOp]:
    """Registrations by ``fleet``'s brokers: usually under their home id, sometimes under
    another (a promotion, or a stale state version), with 0–4 topics (one topic from a
    newcomer is rejected, D3). Requires the hypothesis package."""
    ids = (st.sampled_from([0, 1, 2]) if broker_ids is None else broker_ids)
    need_strategy("broker_ids", ids)

    @st.composite
    def build(draw: st.DrawFn) -> ops.RegisterOp:
        spec = draw(st.sampled_from(fleet.brokers))
        bid = draw(st.just(spec.home_id) | ids) if broker_ids is None else draw(ids)
        reg = draw(registrations(fleet=fleet, brokers=st.just(spec), topics=topics,
                                 data_versions=data_versions, timeouts=timeouts,
                                 broker_ids=st.just(bid),
                                 partial=st.just(False) | st.just(True)
                                 if partial is None else partial))
        return ops.RegisterOp(registration=reg)

    return build()


def heartbeat_ops(*, fleet: Fleet) -> SearchStrategy[ops.HeartbeatOp]:
    """Heartbeats from ``fleet``'s brokers and from strangers (ignored). Requires the
    hypothesis package."""
    return _addr_targets(fleet).map(lambda t: ops.HeartbeatOp(cluster=t[0], broker_addr=t[1]))


def query_data_version_ops(*, fleet: Fleet,
                           data_versions: SearchStrategy[DataVersion] | None = None
                           ) -> SearchStrategy[ops.QueryDataVersionOp]:
    """QUERY_DATA_VERSION requests (they also refresh liveness). Requires the hypothesis
    package."""
    versions = _small_versions() if data_versions is None else data_versions
    need_strategy("data_versions", versions)
    return st.builds(lambda t, v: ops.QueryDataVersionOp(cluster=t[0], broker_addr=t[1],
                                                     data_version=v),
                     _addr_targets(fleet), versions)


def advance_ops(*, ms: SearchStrategy[int] | None = None) -> SearchStrategy[ops.AdvanceOp]:
    """Time steps, in ms; by default small steps and steps around common timeouts.
    Requires the hypothesis package."""
    ms = st.sampled_from([0, 1, 999, 1_000, 1_001, 3_000, 5_000, 10_000, 120_001]) | \
        st.integers(0, 15_000) if ms is None else ms
    need_strategy("ms", ms)
    return ms.map(lambda n: ops.AdvanceOp(ms=n))


def scan_ops() -> SearchStrategy[ops.ScanOp]:
    """The expiry scan. Requires the hypothesis package."""
    return st.just(ops.ScanOp())


def unregister_ops(*, fleet: Fleet, generations: SearchStrategy[int | None] | None = None
                   ) -> SearchStrategy[ops.UnregisterOp]:
    """Unregisters of ``fleet``'s brokers (sometimes naming the wrong group, or a
    stranger) with ``generations`` (default: None or a small, likely stale number).
    Requires the hypothesis package."""
    gens = st.none() | st.integers(1, 40) if generations is None else generations
    need_strategy("generations", gens)

    @st.composite
    def build(draw: st.DrawFn) -> ops.UnregisterOp:
        cluster, addr = draw(_addr_targets(fleet))
        spec = next((b for b in fleet.brokers if b.broker_addr == addr), None)
        name = spec.broker_name if spec is not None else UNKNOWN_GROUP
        name = draw(st.just(name) | st.sampled_from(fleet.broker_names))
        bid = spec.home_id if spec is not None else 0
        return ops.UnregisterOp(request=UnregisterRequest(
            cluster=cluster, broker_addr=addr, broker_name=name, broker_id=bid,
            generation=draw(gens)))

    return build()


def close_channel_ops(*, fleet: Fleet, channels: SearchStrategy[Hashable] | None = None
                      ) -> SearchStrategy[ops.CloseChannelOp]:
    """Channel closes (``None`` and unknown channels do nothing). Requires the
    hypothesis package."""
    pool = st.sampled_from([*channels_of(fleet), None, "ch:unknown"]) if channels is None \
        else channels
    need_strategy("channels", pool)
    return pool.map(lambda c: ops.CloseChannelOp(channel=c))


def delete_topic_ops(*, fleet: Fleet) -> SearchStrategy[ops.DeleteTopicOp]:
    """Topic deletions, whole or per cluster (unknown topics and clusters included).
    Requires the hypothesis package."""
    topics = st.sampled_from([*fleet.topics, UNKNOWN_TOPIC])
    clusters = st.none() | st.sampled_from([*fleet.clusters, "no-such-cluster"])
    return st.builds(lambda t, c: ops.DeleteTopicOp(topic=t, cluster=c), topics, clusters)


def wipe_write_perm_ops(*, fleet: Fleet) -> SearchStrategy[ops.WipeWritePermOp]:
    """WIPE_WRITE_PERM_OF_BROKER for a group of ``fleet`` (or an unknown one). Requires
    the hypothesis package."""
    return st.sampled_from([*fleet.broker_names, UNKNOWN_GROUP]).map(
        lambda n: ops.WipeWritePermOp(broker_name=n))


def add_write_perm_ops(*, fleet: Fleet) -> SearchStrategy[ops.AddWritePermOp]:
    """ADD_WRITE_PERM_OF_BROKER for a group of ``fleet`` (or an unknown one). Requires
    the hypothesis package."""
    return st.sampled_from([*fleet.broker_names, UNKNOWN_GROUP]).map(
        lambda n: ops.AddWritePermOp(broker_name=n))


def register_topic_ops(*, fleet: Fleet) -> SearchStrategy[ops.RegisterTopicOp]:
    """REGISTER_TOPIC_IN_NAMESRV with 0–3 rows; a row for an unknown group makes the
    whole request invalid (D11). Requires the hypothesis package."""
    rows = queue_datas(broker_names=st.sampled_from([*fleet.broker_names, UNKNOWN_GROUP]),
                       queue_nums=st.sampled_from([0, 2, 8]),
                       perms=st.sampled_from([6, 4, 2]), sys_flags=st.sampled_from([0, 1]))
    return st.builds(lambda t, qs: ops.RegisterTopicOp(topic=t, queue_datas=tuple(qs)),
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
    need_strategy("fleets", chosen)
    return _sequences(chosen, min_size, max_size)


def _fleet_ops(make: Callable[..., SearchStrategy[Any]]) -> SearchStrategy[Any]:
    return fleets().flatmap(lambda f: make(fleet=f))


def register_op_types(register: Callable[[type, SearchStrategy[Any]], None]) -> None:
    """Register a strategy for each fleet, request and operation type with ``register``
    (``st.register_type_strategy``): ``st.from_type(Fleet)``, ``st.from_type(RegisterOp)``
    and friends (operations on a fleet drawn first)."""
    pairs: tuple[tuple[type, SearchStrategy[Any]], ...] = (
        (Registration, registrations()),
        (UnregisterRequest, unregister_requests()),
        (Fleet, fleets()),
        (GroupSpec, broker_groups()),
        (BrokerSpec, fleets().flatmap(lambda f: st.sampled_from(f.brokers))),
        (ops.RegisterOp, _fleet_ops(register_ops)),
        (ops.HeartbeatOp, _fleet_ops(heartbeat_ops)),
        (ops.QueryDataVersionOp, _fleet_ops(query_data_version_ops)),
        (ops.AdvanceOp, advance_ops()),
        (ops.ScanOp, scan_ops()),
        (ops.UnregisterOp, _fleet_ops(unregister_ops)),
        (ops.CloseChannelOp, _fleet_ops(close_channel_ops)),
        (ops.DeleteTopicOp, _fleet_ops(delete_topic_ops)),
        (ops.WipeWritePermOp, _fleet_ops(wipe_write_perm_ops)),
        (ops.AddWritePermOp, _fleet_ops(add_write_perm_ops)),
        (ops.RegisterTopicOp, _fleet_ops(register_topic_ops)),
    )
    for cls, strategy in pairs:
        register(cls, strategy)
