"""Building immutable route snapshots from the tables (Java ``pickupTopicRouteData``).

A route is rebuilt only when a write touched its topic; `RouteInfoManager.pickup_route`
then serves the stored snapshot in O(1).
"""

from __future__ import annotations

from collections.abc import Mapping

from ._frozen import EMPTY, FrozenMap
from ._state import State
from ._values import (
    MASTER_ID,
    BrokerData,
    Perm,
    QueueData,
    TopicRouteData,
    TopicSysFlag,
    unchecked,
)

__all__ = ["SYNC_BROKER_MEMBER_GROUP_PREFIX", "RouteBook", "build_route", "representative_flag"]

#: Topics a broker polls for its own group's members; exempt from the acting-master rewrite.
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


def build_route(state: State, topic: str, *, support_acting_master: bool) -> TopicRouteData | None:
    """The route of ``topic``, or None. O(B_t · I), B_t = groups hosting the topic.

    Rows whose group is missing or has no address are left out (D4), and a topic left with
    none has no route. Rows and groups are sorted by broker name (spec principle 5).
    Filter servers are included only where an address has some (Java 4.x; 5.x may put
    ``null`` values).
    """
    rows = state.rows_of(topic)
    if not rows:
        return None
    queue_datas = []
    broker_datas: list[BrokerData] = []
    used = None  # the last group with a row in the route
    for name in sorted(rows):
        group = state.groups.get(name)
        if group is None or group.is_empty():
            continue
        queue_datas.append(rows[name])
        broker_datas.append(group.snapshot())
        used = group
    if used is None:
        return None
    filters: dict[str, tuple[str, ...]] = {}
    if state.filter_servers:
        for data in broker_datas:
            for addr in data.broker_addrs.values():
                servers = state.filter_servers.get((data.cluster, addr))
                if servers:
                    filters[addr] = servers
    infos = state.mappings.get(topic)
    if support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
        broker_datas = _acting_master_rewrite(broker_datas, rows)
    shared = used.snapshots()  # one group alone: the group's own tuple
    return unchecked(
        TopicRouteData, queue_datas=tuple(queue_datas),
        broker_datas=shared if broker_datas == [shared[0]] else tuple(broker_datas),
        filter_server_table=FrozenMap(filters) if filters else EMPTY,
        order_topic_conf=None,
        topic_queue_mapping_by_broker=None if infos is None else FrozenMap(dict(sorted(
            infos.items()))),
    )


def _acting_master_rewrite(broker_datas: list[BrokerData], rows: Mapping[str, QueueData]
                           ) -> list[BrokerData]:
    """Present the smallest-id slave as id 0 where the master is gone and the group's row
    lost its write bit (Java §2.8 step 4). Only the returned copy changes."""
    out = []
    for data in broker_datas:
        addrs = data.broker_addrs
        row = rows.get(data.broker_name)
        if (data.enable_acting_master and addrs and MASTER_ID not in addrs
                and row is not None and not (row.perm & Perm.WRITE)):
            smallest = min(addrs)
            rewritten = {k: v for k, v in addrs.items() if k != smallest}
            rewritten[MASTER_ID] = addrs[smallest]
            data = BrokerData(cluster=data.cluster, broker_name=data.broker_name,
                              broker_addrs=dict(sorted(rewritten.items())),
                              zone_name=data.zone_name, enable_acting_master=True)
        out.append(data)
    return out


def representative_flag(state: State, topic: str) -> TopicSysFlag | None:
    """The sys flag of the topic's row with the lowest broker name (D8; Java takes the
    first in hash order), or None for a topic with no rows. O(B_t)."""
    rows = state.rows_of(topic)
    if not rows:
        return None
    return rows[min(rows)].topic_sys_flag


class RouteBook:
    """What the manager derives from the tables after each write: every topic entry's route
    snapshot and version, and the three unit-flag topic sets (D8).

    `commit` rebuilds exactly the topics the write touched; topics the write dropped took
    their route and version with their entry (`State.vanished`), so they only leave the
    unit sets. O(touched · B_t · I + vanished).
    """

    __slots__ = ("support_acting_master", "unit", "unit_sub", "unit_sub_non_unit", "version_seq")

    def __init__(self, *, support_acting_master: bool) -> None:
        self.support_acting_master = support_acting_master
        self.version_seq = 0  # the last route version handed out
        # topics by representative sys flag; plain sets, sorted when listed
        self.unit: set[str] = set()
        self.unit_sub: set[str] = set()
        self.unit_sub_non_unit: set[str] = set()

    @property
    def unit_sets(self) -> tuple[set[str], set[str], set[str]]:
        return self.unit, self.unit_sub, self.unit_sub_non_unit

    def commit(self, state: State) -> list[str]:
        """Bring routes, versions and unit sets up to date with ``state``; the topics whose
        route changed (appeared, changed or went)."""
        touched, vanished = state.take_touched()
        changed = list(vanished)
        if vanished:
            for members in (self.unit, self.unit_sub, self.unit_sub_non_unit):
                if members:
                    members.difference_update(vanished)
            if not touched:  # a removal: nothing to rebuild
                return changed
        table = state.topics
        seq = self.version_seq
        acting = self.support_acting_master
        # Topics whose rows are the same objects (see `write_topics`) and that carry no
        # static mapping have equal routes: within one commit they share one snapshot.
        shared: dict[tuple[object, ...], TopicRouteData | None] = {}
        # In name order, so that versions are a function of the calls alone (a set's
        # order depends on hashing and history): a replay, or a manager restored from a
        # snapshot, hands out the same versions as the live run. O(k log k), k touched.
        for topic in sorted(touched):
            entry = table.get(topic)
            if entry is None:  # dropped after it was touched (reported above if it had a route)
                continue
            if topic in state.mappings:
                route = build_route(state, topic, support_acting_master=acting)
            else:
                key = (acting and topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX),
                       *[(name, id(row)) for name, row in entry.items()])
                if key in shared:
                    route = shared[key]
                else:
                    route = shared[key] = build_route(state, topic, support_acting_master=acting)
            if route != entry.route:
                seq += 1
                entry.route, entry.version = route, seq
                changed.append(topic)
            self._refresh_unit_sets(state, topic)
        self.version_seq = seq
        return changed

    def _refresh_unit_sets(self, state: State, topic: str) -> None:
        flag = representative_flag(state, topic)
        if not flag:  # no rows, or flag 0: in none of the three sets. O(1)
            for members in self.unit_sets:
                members.discard(topic)
            return
        unit = bool(flag & TopicSysFlag.UNIT)
        sub = bool(flag & TopicSysFlag.UNIT_SUB)
        for members, member in zip(self.unit_sets, (unit, sub, sub and not unit), strict=True):
            if member:
                members.add(topic)
            else:
                members.discard(topic)
