"""What removing a broker address does to its group (Java ``unRegisterBroker(Set)``, §2.4).

One removal batch (an unregister call, `unregister_many`, one scan, one channel close)
removes each address from its groups with `remove_member`, which marks the groups whose
smallest id went; after the whole batch `batch_notices` turns the marks into one
NOTIFY_MIN_BROKER_ID_CHANGE per group that still exists, built from the group as it stands
then (Java queues them in ``needNotifyBrokerMap`` and notifies after the loop).
"""

from __future__ import annotations

from ._messages import MinBrokerIdChanged, RoutingConfig
from ._registration import NO_WRITE, min_id_notice
from ._state import Group, State, no_master
from ._values import Perm, QueueData, unchecked

__all__ = ["batch_notices", "remove_member", "set_write_bit"]


def remove_member(state: State, config: RoutingConfig, group: Group, addr: str,
                  broker_id: int, pending: dict[str, str]) -> bool:
    """Java §2.4 steps 2–5 for one group: remove by address, drop an emptied group with
    its rows (O(T_b)), or clear the write bit of a master-less acting-master group.

    A removal of the group's smallest id marks it in ``pending`` (broker name → offline
    address; the last one of the batch wins, as in Java). True if the address was a member.
    """
    min_changed = (group.enable_acting_master and config.notify_min_broker_id_changed
                   and not group.is_empty() and broker_id == group.min_id())
    if group.member(broker_id) == addr:
        state.remove_member(group, broker_id, addr)
    elif not state.remove_addr(group, addr):  # Java removes by address, whatever the id
        return False
    if group.is_empty():
        state.drop_group(group)
        return True
    state.group_changed(group)
    if group.enable_acting_master and no_master(group):
        set_write_bit(state, group.broker_name, False)
    if min_changed:
        pending[group.broker_name] = addr
    return True


def batch_notices(state: State, pending: dict[str, str]) -> list[MinBrokerIdChanged]:
    """One notice per marked group that still exists after the batch (and is in
    acting-master mode): lowest id and remaining members as they stand now, the last
    offline min-id address. O(marked groups · I)."""
    groups = state.groups
    return [min_id_notice(group, offline=offline, ha=None)
            for name, offline in pending.items()
            if (group := groups.get(name)) is not None and not group.is_empty()
            and group.enable_acting_master]


def set_write_bit(state: State, broker_name: str, writable: bool) -> int:
    """Set or clear the write bit on every row of the group, keeping the other bits; the
    number of its topics (Java counts rows, changed or not). O(T_b)."""
    topics = state.topics_of_group.get(broker_name, {})
    for topic, entry in list(topics.items()):
        row = entry[broker_name]
        perm = (row.perm | Perm.WRITE) if writable else (row.perm & NO_WRITE)
        if perm != row.perm:
            state.put_row(topic, unchecked(
                QueueData, broker_name=row.broker_name, read_queue_nums=row.read_queue_nums,
                write_queue_nums=row.write_queue_nums, perm=Perm(perm),
                topic_sys_flag=row.topic_sys_flag))
    return len(topics)
