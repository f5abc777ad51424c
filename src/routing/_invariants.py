"""`RouteInfoManager.check_invariants`: recompute every index and route from the base
tables and report every difference. O(everything); meant for tests and debugging."""

from __future__ import annotations

from collections.abc import Hashable

from ._errors import InvariantViolation
from ._routes import build_route, representative_flag
from ._state import LiveKey, State, TopicEntry
from ._state import members as names_of
from ._values import TopicSysFlag

__all__ = ["find_problems"]


def find_problems(state: State, unit_sets: tuple[set[str], set[str], set[str]], *,
                  support_acting_master: bool) -> None:
    """Raise `InvariantViolation` listing every broken rule, or return None."""
    problems: list[str] = []
    add = problems.append

    # --- topic rows and the group -> topics index
    topics_of_group: dict[str, dict[str, TopicEntry]] = {}
    for topic, entry in state.topics.items():
        rows = entry
        if not rows:
            add(f"topic {topic!r} has an empty row map")
        for name, row in rows.items():
            if row.broker_name != name:
                add(f"topic {topic!r}: row filed under {name!r} names {row.broker_name!r}")
            if name not in state.groups:
                add(f"topic {topic!r} has a row of missing group {name!r}")
            topics_of_group.setdefault(name, {})[topic] = entry
    def ids(index: dict[str, dict[str, TopicEntry]]) -> dict[str, dict[str, int]]:
        return {name: {t: id(e) for t, e in es.items()} for name, es in index.items()}

    if ids(topics_of_group) != ids(state.topics_of_group):  # the very entries, by identity
        add(f"group->topics index differs: index {_diff(state.topics_of_group, topics_of_group)}")

    # --- groups, clusters, and the address index
    groups_of_addr: dict[LiveKey, set[str]] = {}
    clusters_of_group: dict[str, set[str]] = {}
    for cluster, names in state.clusters.items():
        if not names:
            add(f"cluster {cluster!r} is kept with no group")
        for name in names:
            clusters_of_group.setdefault(name, set()).add(cluster)
            if name not in state.groups:
                add(f"cluster {cluster!r} lists missing group {name!r}")
    held_clusters = {n: set(names_of(g.clusters)) for n, g in state.groups.items()
                     if g.clusters is not None}
    if clusters_of_group != held_clusters:
        add(f"group->clusters index differs: {_diff(held_clusters, clusters_of_group)}")
    for name, group in state.groups.items():
        if group.broker_name != name:
            add(f"group filed under {name!r} is named {group.broker_name!r}")
        if not group.addrs:
            add(f"group {name!r} has no member")
        if group._many is not None and len(group._many) < 2:
            add(f"group {name!r} holds fewer than two members in a dict (one is inline)")
        if len(set(group.addrs.values())) != len(group.addrs):
            add(f"group {name!r} maps one address to several ids: {group.addrs}")
        if name not in state.clusters.get(group.cluster, ()):
            add(f"group {name!r} missing from its cluster {group.cluster!r}")
        if group.snapshot().broker_addrs != dict(group.addrs):
            add(f"group {name!r} cached BrokerData is stale")
        for addr in group.addrs.values():
            groups_of_addr.setdefault((group.cluster, addr), set()).add(name)
    held_groups = {k: set(names_of(v)) for k, v in state.groups_of_addr.items()}
    if groups_of_addr != held_groups:
        add(f"address->groups index differs: {_diff(held_groups, groups_of_addr)}")
    held_sets = [*state.groups_of_addr.values(), *(g.clusters for g in state.groups.values())]
    if any(v is not None and type(v) is not str and len(v) < 2 for v in held_sets):
        add("an index holds a set of fewer than two names (one is kept as the string)")

    # --- live entries, channels, deadlines, filter servers
    keys_of_channel: dict[Hashable, set[LiveKey]] = {}
    for key, live in state.live.items():
        if live.channel is not None:
            keys_of_channel.setdefault(live.channel, set()).add(key)
        if live.entry is None:
            add(f"live entry {key} has no place in the deadline index")
    if keys_of_channel != state.keys_of_channel:
        add("channel->brokers index differs from the live table")
    indexed = dict(state.deadlines.items())
    expected = {k: v.last_update + v.timeout for k, v in state.live.items()}
    if indexed != expected:
        add(f"deadline index differs: {_diff(indexed, expected)}")
    problems.extend(state.deadlines.problems())
    for key in state.filter_servers:
        if key not in state.live:
            add(f"filter servers kept for {key} with no live entry")

    # --- route snapshots, versions, unit listings
    versions: dict[int, str] = {}
    for topic, entry in state.topics.items():
        route = build_route(state, topic, support_acting_master=support_acting_master)
        if route != entry.route:
            add(f"cached route of {topic!r} is stale: cached {entry.route!r:.200}, "
                f"rebuilt {route!r:.200}")
        if route is not None and entry.version <= 0:
            add(f"route of {topic!r} has no version")
        if entry.version and versions.setdefault(entry.version, topic) != topic:
            add(f"topics {versions[entry.version]!r} and {topic!r} share route version "
                f"{entry.version}")
    expected_units: tuple[set[str], set[str], set[str]] = (set(), set(), set())
    for topic in state.topics:
        flag = representative_flag(state, topic)
        if flag is None:
            continue
        unit, sub = bool(flag & TopicSysFlag.UNIT), bool(flag & TopicSysFlag.UNIT_SUB)
        for members, member in zip(expected_units, (unit, sub, sub and not unit), strict=True):
            if member:
                members.add(topic)
    for label, have, want in zip(("unit", "unit-sub", "unit-sub-non-unit"), unit_sets,
                                 expected_units, strict=True):
        if set(have) != want:
            add(f"{label} topic set differs: have {sorted(have)}, want {sorted(want)}")

    if problems:
        raise InvariantViolation(problems)


def _diff(have: dict, want: dict) -> str:  # type: ignore[type-arg]
    extra = {k: have[k] for k in have if k not in want or have[k] != want[k]}
    missing = {k: want[k] for k in want if k not in have or have[k] != want[k]}
    return f"has {extra!r:.200} but should have {missing!r:.200}"
