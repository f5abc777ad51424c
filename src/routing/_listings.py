"""Read-only listings of the tables (Java ``RouteInfoManager``'s getters), as immutable
values. Pure functions of `State`; the manager calls them under its lock."""

from __future__ import annotations

from collections.abc import Mapping

from ._frozen import FrozenMap
from ._messages import ClusterInfo, TopicList
from ._state import Live, State
from ._values import BrokerAddr, BrokerLiveInfo

__all__ = ["cluster_info", "live_brokers", "live_info", "system_topics", "topics_by_cluster"]


def cluster_info(state: State) -> ClusterInfo:
    """Groups and clusters (Java ``getAllClusterInfo`` hands out its live maps). O(B·I)."""
    return ClusterInfo(
        broker_addr_table={n: state.groups[n].snapshot() for n in sorted(state.groups)},
        cluster_addr_table={c: frozenset(v) for c, v in sorted(state.clusters.items())})


def topics_by_cluster(state: State, cluster: str) -> tuple[str, ...]:
    """Topics with a row of any group of ``cluster``, sorted (Java: O(B_c · T)). O(Σ T_b log)
    over the cluster's groups."""
    found: set[str] = set()
    for name in state.clusters.get(cluster, ()):
        found.update(state.topics_of_group.get(name, ()))
    return tuple(sorted(found))


def system_topics(state: State) -> TopicList:
    """Cluster and group names, with the address of the lowest-named group's lowest id
    (D8's deterministic representative). O(C + B)."""
    names = set(state.clusters)
    for members in state.clusters.values():
        names.update(members)
    addr = None
    for name in sorted(state.groups):
        group = state.groups[name]
        if not group.is_empty():
            addr = group.member(group.min_id())
            break
    return TopicList(topics=tuple(sorted(names)), broker_addr=addr)


def live_info(live: Live) -> BrokerLiveInfo:
    """A live entry as an immutable `BrokerLiveInfo`. O(1)."""
    return BrokerLiveInfo(
        last_update_timestamp=live.last_update, heartbeat_timeout_ms=live.timeout,
        data_version=live.data_version, channel=live.channel,
        ha_server_addr=live.ha_server_addr, generation=live.generation)


def live_brokers(state: State) -> Mapping[BrokerAddr, BrokerLiveInfo]:
    """Every live entry, keyed by `BrokerAddr`, in key order. O(L log L)."""
    return FrozenMap({BrokerAddr(cluster=k[0], addr=k[1]): live_info(v)
                      for k, v in sorted(state.live.items())})
