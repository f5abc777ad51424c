"""Hypothesis strategies for `routing` values, fleets and operation sequences.

Requires the hypothesis package (``pip install 'rocketmq-routing[testing]'``). Every function is
keyword-only and takes *strategies* for the parts it builds, so you can narrow any part::

    >>> from hypothesis import strategies as st
    >>> from routing.testing import strategies as rst
    >>> configs = rst.topic_configs(queue_nums=st.just(4))
    >>> rst.topic_configs(queue_nums=4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    routing.InvalidType: queue_nums must be a hypothesis strategy, got 4 (use st.just(4) ...)

Names are valid per spec D7; the ``invalid_*`` strategies generate the values D7 rejects.
`fleets` generates coherent clusters (unique broker names, one cluster per group, one group
per address), and the ``*_ops`` strategies generate operations on a given `Fleet`, invalid
ones included (unknown brokers, stale generations, single-topic first registrations,
register_topic for unknown groups, stale state versions).

Registered with hypothesis's entry point, so ``st.from_type(QueueData)``,
``st.from_type(Registration)``, ``st.from_type(Fleet)`` and friends work.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ._strategies_ops import (
    add_write_perm_ops,
    advance_ops,
    broker_groups,
    channels_of,
    close_channel_ops,
    delete_topic_ops,
    fleets,
    heartbeat_ops,
    operation_sequences,
    operations,
    query_data_version_ops,
    register_op_types,
    register_ops,
    register_topic_ops,
    registrations,
    scan_ops,
    unregister_ops,
    unregister_requests,
    wipe_write_perm_ops,
)
from ._strategies_values import (
    addresses,
    broker_addrs,
    broker_datas,
    broker_live_infos,
    broker_names,
    cluster_names,
    data_versions,
    invalid_addresses,
    invalid_names,
    invalid_topic_names,
    names,
    perms,
    queue_datas,
    register_value_types,
    routing_configs,
    topic_configs,
    topic_names,
    topic_route_datas,
    topic_sys_flags,
    topic_tables,
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


# --------------------------------------------------------------------------- from_type


def _hypothesis_setup_hook() -> None:
    """Register routing's types with ``st.register_type_strategy``. Kept for hosts that
    call it; the ``hypothesis`` entry point goes through `routing.testing._hypothesis_hook`."""
    register_value_types(st.register_type_strategy)
    register_op_types(st.register_type_strategy)


# Importing this module registers the types: it is what the entry point does, and it also
# covers a program that imports routing.testing.strategies before hypothesis (hypothesis then
# runs its entry points while this module is still half-imported; see _hypothesis_hook).
_hypothesis_setup_hook()
