"""A broker registration (Java ``registerBroker``, §2.1), read top to bottom in Java's order.

`decide_registration` runs first and changes nothing: the refusals of steps 6 and 7 (D3).
`apply_registration` then applies steps 1–12 to the tables in order: cluster and group
(1–4), the slave→master address switch (5), the member (5), the topic rows written by the
master or a prime slave when the version changed, the group is new, or rows are missing
(9–10, with the unchanged-table fast path), the live entry (8; written after the rows so
the fast path can compare with the previous entry), the filter servers (11) and the reply's
master address (12), plus who learns that the group's smallest id changed (§2.13). The
manager holds the lock, numbers the generation and commits the routes."""

from __future__ import annotations

import sys
import weakref

import attrs

from ._messages import MinBrokerIdChanged, Registration, RoutingConfig
from ._state import Group, Live, LiveKey, State
from ._values import MASTER_ID, Perm, QueueData, queue_row

__all__ = ["NO_WRITE", "Applied", "Decision", "apply_registration", "decide_registration",
           "min_id_notice", "rejection", "renew_registration", "unchanged_table",
           "write_topics"]

#: Permission bits without the write bit.
NO_WRITE = ~Perm.WRITE & 0xF


@attrs.frozen(kw_only=True)
class Decision:
    """What `decide_registration` read before anything changed."""

    #: §2.13: the new id is below every id the group had (only when notifications are on).
    min_changed: bool


@attrs.frozen(kw_only=True)
class Applied:
    """What an applied registration tells the manager for its result and event."""

    first: bool
    master_addr: str | None
    ha_server_addr: str | None
    notices: tuple[MinBrokerIdChanged, ...]


def decide_registration(state: State, reg: Registration,
                        config: RoutingConfig) -> Decision | str:
    """Steps 6–7 before any write: the refusal (a reason) or what the apply needs. O(1)
    (O(I) for the smallest id when notifications are on)."""
    refused = rejection(state, reg)
    if refused is not None:
        return refused
    group = state.groups.get(reg.broker_name)
    return Decision(min_changed=config.notify_min_broker_id_changed and group is not None
                    and not group.is_empty() and reg.broker_id < group.min_id())


def apply_registration(state: State, reg: Registration, now: int, decision: Decision,
                       config: RoutingConfig, *, generation: int) -> Applied:
    """Apply an accepted registration to the tables, Java's steps in order (see the module
    docstring). O(I) plus O(T_payload) when the topic rows are written."""
    name, bid = reg.broker_name, reg.broker_id
    # The tables keep one copy of each name: the cluster name is interned (clusters are
    # few, brokers many, and every decoded request brings its own copy of the name), and a
    # re-registration's key and address only look up what the tables already hold.
    cluster, addr = reg.cluster, reg.broker_addr
    if type(cluster) is str:
        cluster = sys.intern(cluster)
    key: LiveKey = (cluster, addr)
    old_live = state.live.get(key)

    # steps 1-4: cluster and group (the acting-master flag and zone follow the newest)
    group = state.groups.get(name)
    new_group = group is None
    if group is None:
        group = state.groups[name] = Group(cluster, name)
    else:
        name = group.broker_name
    if name not in state.clusters.get(cluster, ()):
        state.add_to_cluster(cluster, group)
    is_old = reg.enable_acting_master is None
    acting = (not is_old) and bool(reg.enable_acting_master)
    group_dirty = new_group
    if group.enable_acting_master != acting or group.zone_name != reg.zone_name:
        group.enable_acting_master, group.zone_name = acting, reg.zone_name
        group_dirty = True

    # step 5: the same address under another id leaves (slave -> master switch); the id
    # takes this address
    if group.member(bid) != addr and state.remove_addr(group, addr, except_id=bid):
        group_dirty = True
    held = group.member(bid)
    register_first = new_group or held is None
    if held != addr:
        if held is not None:
            state.remove_addr(group, held)
        state.add_member(group, bid, addr, key)
        group_dirty = True

    # steps 9-10: topic rows, by the master or a prime slave only
    is_master = bid == MASTER_ID
    is_prime_slave = not is_old and not is_master and bid == group.min_id()
    stored = None if old_live is None else old_live.data_version
    version_changed = stored is None or not (stored is reg.data_version
                                             or stored == reg.data_version)
    writes = is_master or is_prime_slave
    deletes = (writes and config.delete_topic_with_broker_registration and not reg.partial
               and not reg.topic_queue_mappings)
    if writes and (register_first or version_changed
                   or not unchanged_table(state, old_live, reg, group, deletes=deletes)):
        write_topics(state, reg, group, rewrite_all=register_first or version_changed,
                     wipe_write=is_prime_slave and acting, delete_by_omission=deletes)

    # step 8: the live entry (a new generation; remembers the table it applied)
    live = Live(broker_name=name, broker_id=bid, last_update=now,
                timeout=reg.heartbeat_timeout_ms or config.default_heartbeat_timeout_ms,
                data_version=reg.data_version, channel=reg.channel,
                ha_server_addr=reg.ha_server_addr, generation=generation)
    if writes:
        live.applied_names, live.applied_epoch = reg.topics.names_key(), group.rows_epoch
        live.applied_deleted = deletes
    state.put_live(key, live)

    # step 11: filter servers
    if reg.filter_servers is not None:
        state.set_filter_servers(key, reg.filter_servers)
    if group_dirty:
        state.group_changed(group)

    # step 12: a slave learns its master's address and HA address
    master_addr = ha_addr = None
    if bid != MASTER_ID:
        candidate = group.member(MASTER_ID)
        master_live = state.live.get((reg.cluster, candidate)) if candidate else None
        if master_live is not None:
            master_addr, ha_addr = candidate, master_live.ha_server_addr

    # §2.13: the group's smallest id changed
    notices = (min_id_notice(group, offline=None, ha=reg.ha_server_addr),) \
        if decision.min_changed else ()
    return Applied(first=old_live is None, master_addr=master_addr, ha_server_addr=ha_addr,
                   notices=notices)


def renew_registration(state: State, reg: Registration, now: int, config: RoutingConfig, *,
                       generation: int) -> bool:
    """The steady re-registration in place: when applying ``reg`` would change nothing but
    the live entry's ``last_update`` and ``generation`` (no refusal, no table, member, row,
    flag, channel, timeout or filter-server change), make exactly those two changes (and
    refresh the deadline index) and return True; otherwise change nothing and return False
    (the caller then runs `decide_registration` and `apply_registration`). O(I) for the
    prime-slave test, O(1) otherwise when ``reg.topics`` is the table last applied; about
    half of that when ``reg`` is the very object this entry last renewed with and its
    group is unchanged since (``Live.steady``: the journal replay's common case).

    Exact: every condition below is one `apply_registration` tests, read off its steps —
    the group and cluster exist with ``reg``'s flags (1–4), the id already holds this
    address (5, and no D3 refusal), the topic rows need no write (9–10), the live entry
    would be rebuilt with the same fields (8), the filter servers are unchanged (11). A
    differential test compares it with the full path on random states.
    Java: ``registerBroker`` with an unchanged data version, minus its map rewrites."""
    key: LiveKey = (reg.cluster, reg.broker_addr)
    live = state.live.get(key)
    if live is None:
        return False
    group = state.groups.get(reg.broker_name)
    steady = live.steady
    if (steady is not None and steady[0]() is reg and group is not None
            and group.held_snapshots is steady[1] and group.rows_epoch == steady[2]):
        # The same object renewed this same entry last time, and the group is the same
        # object with the same members, flags (its BrokerData snapshot) and rows (its
        # epoch); its cluster listings only grow while it exists: every check below would
        # pass again, and step 8 would write what the entry holds.
        live.generation = generation
        live.last_update = now  # (the deadline index reads it when the filed one is due)
        return True
    bid = reg.broker_id
    if (group is None or group.member(bid) != reg.broker_addr
            or live.broker_name != reg.broker_name or live.broker_id != bid
            or live.channel != reg.channel
            or live.timeout != (reg.heartbeat_timeout_ms or config.default_heartbeat_timeout_ms)
            or reg.broker_name not in state.clusters.get(reg.cluster, ())):
        return False
    is_old = reg.enable_acting_master is None
    acting = (not is_old) and bool(reg.enable_acting_master)
    if group.enable_acting_master != acting or group.zone_name != reg.zone_name:
        return False
    if reg.filter_servers is not None and state.filter_servers.get(key, ()) != reg.filter_servers:
        return False
    stored = live.data_version
    if not (stored is reg.data_version or stored == reg.data_version):
        return False
    writes = bid == MASTER_ID or (not is_old and bid == group.min_id())
    deletes = (writes and config.delete_topic_with_broker_registration and not reg.partial
               and not reg.topic_queue_mappings)
    if writes and not unchanged_table(state, live, reg, group, deletes=deletes):
        return False
    # step 8 as apply_registration writes it, on the same object (its other fields are equal)
    if stored is not reg.data_version:
        live.data_version, live.unchanged_answer = reg.data_version, None
    live.ha_server_addr = reg.ha_server_addr
    live.generation = generation
    if writes:
        live.applied_names = reg.topics.names_key()  # cached on the table once made
        live.applied_epoch, live.applied_deleted = group.rows_epoch, deletes
    else:
        live.applied_names, live.applied_epoch, live.applied_deleted = None, -1, False
    live.last_update = now  # put_live's refresh: the timeout is unchanged
    live.steady = (weakref.ref(reg), group.snapshots(), group.rows_epoch)
    return True


def rejection(state: State, reg: Registration) -> str | None:
    """Why ``reg`` is refused, or None (D3: a refusal changes nothing, not even liveness).

    Refused: a broker id held by another address whose live entry has a higher
    ``state_version`` (a stale master epoch), and a single-topic registration from an id the
    group does not know (an incremental registration cannot be the first). O(1).
    Step 5 (same address, other id) never removes the incumbent of the id itself, so it can
    be read before anything is applied.
    """
    group = state.groups.get(reg.broker_name)
    incumbent_addr = group.member(reg.broker_id) if group is not None else None
    if incumbent_addr is not None and incumbent_addr != reg.broker_addr:
        incumbent = state.live.get((reg.cluster, incumbent_addr))
        if (incumbent is not None
                and incumbent.data_version.state_version > reg.data_version.state_version):
            return (f"stale state_version {reg.data_version.state_version}: broker id "
                    f"{reg.broker_id} of {reg.broker_name!r} is held by {incumbent_addr} with "
                    f"state_version {incumbent.data_version.state_version}")
    if incumbent_addr is None and len(reg.topics) == 1:
        return (f"single-topic registration from broker id {reg.broker_id} unknown to group "
                f"{reg.broker_name!r}: an incremental registration cannot be the first")
    return None


def unchanged_table(state: State, old_live: Live | None, reg: Registration, group: Group, *,
                    deletes: bool) -> bool:
    """True when `write_topics` with an unchanged version would change nothing: no topic of
    ``reg`` lacks its row of ``group`` and, when ``deletes`` (delete by omission applies),
    the group has no row outside ``reg.topics``. The caller has checked that the version
    is unchanged and that this is not the id's first registration (Java re-adds missing
    rows and leaves existing ones alone, §2.2).

    Exact, no fingerprint. When no row of the group changed since this live entry last
    applied (or checked) a table (the group's epoch stamp is the one recorded then, and
    stamps are unique across groups), ``reg.topics`` needs nothing if it names the same
    topics in the same order: one comparison of `TopicTable.names_key` strings, O(1) for
    the very table applied last (its key is cached and the strings are one object) and a
    ``memcmp`` of the names for an equal copy decoded from the wire (plus making the
    copy's key once, about 7 ns per topic). Otherwise one C-level comparison of the
    table's names with the group's row index (``dict.keys() <=``, about 20 ns per topic:
    no Python code runs per topic). Java: one HashMap lookup per topic
    (``isTopicConfigChanged``)."""
    if old_live is not None:
        applied = old_live.applied_names
        if (applied is not None and old_live.applied_epoch == group.rows_epoch
                and (old_live.applied_deleted or not deletes)
                and applied == reg.topics.names_key()):
            return True
    names = reg.topics.keys()
    rows = state.topics_of_group.get(group.broker_name)
    if rows is None:
        return not names
    if deletes:
        return len(rows) == len(names) and names <= rows.keys()
    return names <= rows.keys()


def write_topics(state: State, reg: Registration, group: Group, *, rewrite_all: bool,
                 wipe_write: bool, delete_by_omission: bool) -> None:
    """Java §2.1 step 10: delete by omission, upsert changed or missing rows (all of them
    when ``rewrite_all``), and static-topic mappings. Equal rows written together are one
    `QueueData` object (values are immutable; a broker's topics mostly share one queue
    configuration), which the route snapshots then share too. O(T_payload + T_b)."""
    name = group.broker_name
    if delete_by_omission and not reg.partial and not reg.topic_queue_mappings:
        for topic in [t for t in state.topics_of_group.get(name, ()) if t not in reg.topics]:
            state.drop_row(topic, name)
    table = state.topics
    shared: dict[tuple[int, int, int, int], QueueData] = {}  # equal rows: one object
    for topic, config in reg.topics.items():
        entry = table.get(topic)
        if rewrite_all or entry is None or name not in entry:
            perm = config.perm
            if wipe_write and perm & Perm.WRITE:
                # Java clears the bit on the caller's TopicConfig; we never mutate inputs.
                perm = Perm(perm & NO_WRITE)
            key = (config.read_queue_nums, config.write_queue_nums, perm, config.topic_sys_flag)
            row = shared.get(key)
            if row is None:
                row = shared[key] = queue_row(config, name, perm)
            state.put_row(topic, row)
    if rewrite_all:
        for topic, info in reg.topic_queue_mappings.items():
            state.put_mapping(topic, info)


def min_id_notice(group: Group, *, offline: str | None, ha: str | None) -> MinBrokerIdChanged:
    """Java §2.13: who learns that the group's smallest broker id changed. O(I log I)."""
    addrs = group.addrs
    smallest = min(addrs)
    if offline is not None or len(addrs) == 1:
        recipients = [addrs[i] for i in sorted(addrs)]
    else:
        recipients = [addrs[i] for i in sorted(addrs) if i != smallest]
    return MinBrokerIdChanged(
        cluster=group.cluster, broker_name=group.broker_name, min_broker_id=smallest,
        min_broker_addr=addrs[smallest], offline_broker_addr=offline,
        ha_broker_addr=ha, recipients=tuple(recipients))
