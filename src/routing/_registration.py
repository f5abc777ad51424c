"""The parts of a registration (Java ``registerBroker``, §2.1) that are pure functions of
the tables: the rejections decided before anything changes (D3), the unchanged-table fast
path, the topic write (step 10), and who learns that a group's smallest id changed (§2.13).
The manager sequences them under its lock."""

from __future__ import annotations

from ._messages import MinBrokerIdChanged, Registration
from ._state import Group, Live, State
from ._values import Perm, queue_row

__all__ = ["NO_WRITE", "min_id_notice", "rejection", "unchanged_table", "write_topics"]

#: Permission bits without the write bit.
NO_WRITE = ~Perm.WRITE & 0xF


def rejection(state: State, reg: Registration) -> str | None:
    """Why ``reg`` is refused, or None (D3: a refusal changes nothing, not even liveness).

    Refused: a broker id held by another address whose live entry has a higher
    ``state_version`` (a stale master epoch), and a single-topic registration from an id the
    group does not know (an incremental registration cannot be the first). O(1).
    Step 5 (same address, other id) never removes the incumbent of the id itself, so it can
    be read before anything is applied.
    """
    group = state.groups.get(reg.broker_name)
    incumbent_addr = group.addrs.get(reg.broker_id) if group is not None else None
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


def unchanged_table(old_live: Live | None, reg: Registration, group: Group, *,
                    register_first: bool, version_changed: bool) -> bool:
    """True when re-applying ``reg.topics`` would change nothing: same version, same table
    as this live entry last applied, no row of the group changed since, and not a full
    registration after a partial one (which deleted nothing by omission). O(1) for the same
    table object, else one C-level dict comparison; False when the last applied table is no
    longer alive (the caller then checks row by row, as Java does)."""
    if register_first or version_changed or old_live is None:
        return False
    if old_live.applied_partial and not reg.partial:
        return False
    ref = old_live.applied_table
    applied = ref() if ref is not None else None
    return (applied is not None and old_live.applied_epoch == group.rows_epoch
            and (applied is reg.topics or applied == reg.topics))


def write_topics(state: State, reg: Registration, group: Group, *, rewrite_all: bool,
                 wipe_write: bool, delete_by_omission: bool) -> None:
    """Java §2.1 step 10: delete by omission, upsert changed or missing rows (all of them
    when ``rewrite_all``), and static-topic mappings. O(T_payload + T_b)."""
    name = group.broker_name
    if delete_by_omission and not reg.partial and not reg.topic_queue_mappings:
        for topic in [t for t in state.topics_of_group.get(name, ()) if t not in reg.topics]:
            state.drop_row(topic, name)
    table = state.topics
    for topic, config in reg.topics.items():
        entry = table.get(topic)
        if rewrite_all or entry is None or name not in entry.rows:
            perm = config.perm
            if wipe_write and perm & Perm.WRITE:
                # Java clears the bit on the caller's TopicConfig; we never mutate inputs.
                perm = Perm(perm & NO_WRITE)
            state.put_row(topic, queue_row(config, name, perm))
    if rewrite_all:
        for topic, info in reg.topic_queue_mappings.items():
            state.put_mapping(topic, info)


def min_id_notice(group: Group, *, offline: str | None, ha: str | None) -> MinBrokerIdChanged:
    """Java §2.13: who learns that the group's smallest broker id changed. O(I log I)."""
    smallest = min(group.addrs)
    if offline is not None or len(group.addrs) == 1:
        recipients = [group.addrs[i] for i in sorted(group.addrs)]
    else:
        recipients = [group.addrs[i] for i in sorted(group.addrs) if i != smallest]
    return MinBrokerIdChanged(
        cluster=group.cluster, broker_name=group.broker_name, min_broker_id=smallest,
        min_broker_addr=group.addrs[smallest], offline_broker_addr=offline,
        ha_broker_addr=ha, recipients=tuple(recipients))
