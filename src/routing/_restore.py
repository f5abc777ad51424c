"""Taking a `ManagerSnapshot` of a `RouteInfoManager`, and building a manager from one.

`snapshot_manager` reads the manager's tables under its lock; `restore_manager` fills a
fresh manager's tables, rebuilds what is derived from them (indexes, deadlines, routes,
unit-flag sets) and checks the result with the manager's own invariants. A restored
manager answers every later call exactly as the snapshotted one would have: the same
results, the same `RouteChange` events, the same routes and route versions (the property
test ``tests/test_snapshot.py`` runs random operation sequences both ways).
"""

from __future__ import annotations

from ._clock import Clock
from ._errors import InvalidRequest, InvariantViolation
from ._frozen import FrozenMap
from ._manager import RouteInfoManager, RouteListener
from ._routes import build_route
from ._snapshot import LiveSnapshot, ManagerSnapshot, TopicSnapshot, live_snapshot
from ._state import Group, Live, TopicEntry, add_one, with_one
from ._validate import fail
from ._values import unchecked

__all__ = ["restore_manager", "snapshot_manager"]


def snapshot_manager(manager: RouteInfoManager) -> ManagerSnapshot:
    """Everything ``manager`` holds that decides its later answers, as an immutable value
    (see `ManagerSnapshot`). Channels are kept as the handles themselves; give
    `ManagerSnapshot.to_json` a codec to write them. Holds the manager's lock throughout:
    O(state) = O(T·B_t + G·I + L) with T topics of B_t rows, G groups of I members and
    L live entries (about 1 µs per row or entry). Java: none."""
    if not isinstance(manager, RouteInfoManager):
        fail("manager", manager, "a RouteInfoManager")
    with manager._lock:
        st = manager._state
        live = []
        for key in sorted(st.live):
            entry = st.live[key]
            live.append(live_snapshot(
                key[0], key[1], broker_name=entry.broker_name, broker_id=entry.broker_id,
                last_update_ms=entry.last_update, timeout_ms=entry.timeout,
                data_version=entry.data_version, channel=entry.channel,
                ha_server_addr=entry.ha_server_addr, generation=entry.generation,
                filter_servers=st.filter_servers.get(key, ())))
        topics = []
        for topic in sorted(st.topics):
            entry_rows = st.topics[topic]
            topics.append(unchecked(
                TopicSnapshot, topic=topic, version=entry_rows.version,
                rows=tuple(entry_rows[name] for name in sorted(entry_rows))))
        return unchecked(
            ManagerSnapshot, config=manager._config, started_ms=manager._started_ms,
            last_ms=manager._last_now, generation=manager._generation,
            route_version=manager._book.version_seq,
            clusters=_frozen_clusters(st.clusters),
            groups=tuple(st.groups[name].snapshot() for name in sorted(st.groups)),
            live=tuple(live), topics=tuple(topics),
            mappings=tuple(info for topic in sorted(st.mappings)
                           for _, info in sorted(st.mappings[topic].items())))


def _frozen_clusters(clusters: dict[str, dict[str, None]]) -> FrozenMap[str, tuple[str, ...]]:
    return FrozenMap({c: tuple(sorted(clusters[c])) for c in sorted(clusters)})


def restore_manager(snapshot: ManagerSnapshot, *, clock: Clock,
                    listener: RouteListener | None = None,
                    check: bool = True) -> RouteInfoManager:
    """A new `RouteInfoManager` in exactly the state of ``snapshot``, reading ``clock``
    (a reading before ``snapshot.last_ms`` is clamped to it, as the snapshotted manager
    would have) and telling ``listener`` of later changes.

    Raises `InvalidRequest` when the snapshot's tables disagree with each other (a row
    or cluster listing of a missing group, a group missing from its own cluster, a live
    entry or route version handed out after the snapshot's counters, a broken
    invariant); with ``check=False`` only the first kinds are checked, not the
    recomputation of every route and index. Cost: O(state), routes rebuilt once each
    (O(T·B_t·I)); the check doubles it. Java: none."""
    if not isinstance(snapshot, ManagerSnapshot):
        fail("snapshot", snapshot, "a ManagerSnapshot")
    _check_references(snapshot)
    manager = RouteInfoManager(clock=clock, config=snapshot.config, listener=listener)
    config = snapshot.config
    manager._started_ms = snapshot.started_ms
    manager._last_now = snapshot.last_ms
    manager._ready_at_ms = snapshot.started_ms + (config.wait_for_service_ms or 0)
    manager._ready = (config.wait_for_service_ms is None
                      or manager._ready_at_ms <= manager._last_now)
    manager._generation = snapshot.generation
    manager._book.version_seq = snapshot.route_version
    st = manager._state
    for data in snapshot.groups:
        group = st.groups[data.broker_name] = Group(data.cluster, data.broker_name)
        group.zone_name, group.enable_acting_master = data.zone_name, data.enable_acting_master
        for broker_id, addr in data.broker_addrs.items():
            group.set_member(broker_id, addr)
            add_one(st.groups_of_addr, (data.cluster, addr), data.broker_name)
    for cluster, names in snapshot.clusters.items():
        st.clusters[cluster] = dict.fromkeys(names)
        for name in names:
            listed = st.groups[name]
            listed.clusters = with_one(listed.clusters, cluster)
    for topic in snapshot.topics:
        entry = st.topics[topic.topic] = TopicEntry()
        entry.version = topic.version
        for row in topic.rows:
            entry[row.broker_name] = row
            st.topics_of_group.setdefault(row.broker_name, {})[topic.topic] = entry
    for name in st.topics_of_group:  # a stamp of its own (the unchanged-table fast path)
        st.groups[name].rows_epoch = st.next_epoch()
    for item in snapshot.live:
        key = (item.cluster, item.broker_addr)
        st.put_live(key, Live(broker_name=item.broker_name, broker_id=item.broker_id,
                              last_update=item.last_update_ms, timeout=item.timeout_ms,
                              data_version=item.data_version, channel=item.channel,
                              ha_server_addr=item.ha_server_addr,
                              generation=item.generation))
        if item.filter_servers:
            st.filter_servers[key] = item.filter_servers
    for info in snapshot.mappings:
        st.mappings.setdefault(info.topic, {})[info.bname] = info
    acting = config.support_acting_master
    book = manager._book
    for name, entry in st.topics.items():
        entry.route = build_route(st, name, support_acting_master=acting)
        book._refresh_unit_sets(st, name)
    st.touched, st.vanished = set(), []
    if check:
        try:
            manager.check_invariants()
        except InvariantViolation as exc:
            raise InvalidRequest(f"snapshot: inconsistent tables: {'; '.join(exc.problems)}",
                                 field="snapshot") from None
    return manager


def _check_references(snapshot: ManagerSnapshot) -> None:
    """What the build relies on: every name a table refers to exists, and no counter is
    behind what was handed out. O(state)."""
    groups = {g.broker_name: g for g in snapshot.groups}
    for group in snapshot.groups:
        if not group.broker_addrs:
            fail(f"snapshot.groups[{group.broker_name!r}].broker_addrs", {}, "a member")
        if group.broker_name not in snapshot.clusters.get(group.cluster, ()):
            fail(f"snapshot.clusters[{group.cluster!r}]",
                 snapshot.clusters.get(group.cluster), f"a list naming {group.broker_name!r}, "
                 "a group of that cluster")
    for cluster, names in snapshot.clusters.items():
        for name in names:
            if name not in groups:
                fail(f"snapshot.clusters[{cluster!r}]", name, "the name of a listed group")
    for topic in snapshot.topics:
        for row in topic.rows:
            if row.broker_name not in groups:
                fail(f"snapshot.topics[{topic.topic!r}].rows", row.broker_name,
                     "the name of a listed group")
        if topic.version > snapshot.route_version:
            fail(f"snapshot.topics[{topic.topic!r}].version", topic.version,
                 f"at most route_version={snapshot.route_version}")
    for item in snapshot.live:
        _check_live(item, snapshot.generation)
    if snapshot.last_ms < snapshot.started_ms:
        fail("snapshot.last_ms", snapshot.last_ms,
             f"at least started_ms={snapshot.started_ms}")


def _check_live(item: LiveSnapshot, generation: int) -> None:
    if item.generation > generation:
        fail(f"snapshot.live[{item.cluster!r}, {item.broker_addr!r}].generation",
             item.generation, f"at most generation={generation}")
