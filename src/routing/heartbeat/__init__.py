"""The broker's side of registration and heartbeats, sans-I/O (spec §4, Java study §3).

One `BrokerHeartbeat` per broker identity. It never sends anything itself: every call returns
the *actions* now due (`SendRegistration`, `SendVersionQuery`, `SendHeartbeat`,
`SendUnregister`, `SendTopicRegistration`, `SendMemberGroupQuery`, `CheckNameServer`, and the
events `UpdateMasterAddress` and `MinBrokerChanged`) and the host performs them, then feeds the
outcome back (`on_register_reply`, `on_version_reply`, `on_topic_reply`, `on_member_group`,
`on_connect_result`, `on_error_response`, `on_failure`, `on_timeout`, and the pushed
`on_min_broker_id_changed`).
Time comes from the injected `Clock` or from an explicit ``now_ms`` argument; the host asks
`next_deadline_ms` when to call `poll` again. No threads, timers or sleeps.

What it reproduces (Java ``BrokerController`` and ``BrokerOuterAPI``, 5.x):

- ``start``: an immediate forced registration (unless the broker starts isolated), then the
  periodic full registration first 10 000 ms after start, every
  ``max(10_000, min(register_period_ms, 60_000))`` ms, skipped while isolated or before
  ``disappear_time_after_start_ms`` has passed;
- ``registerBrokerAll``: the permission rewrite, split registration (every chunk carries the
  same `DataVersion`; chunks are sent one after the other, each waiting for its replies), and,
  when ``force_register`` is False, a first round of QUERY_DATA_VERSION whose answers decide
  (`need_register`) whether to register;
- ``handleRegisterBrokerResult``: the first successful reply of each send wins and gives the
  master and HA addresses; nothing is merged;
- a registration round waits at most ``register_timeout_ms``; replies after that are ignored
  (Java's caller stopped waiting), and rounds never overlap (``registerBrokerAll`` is
  ``synchronized``): a run that falls due during a round starts when the round ends;
- topic changes sent at once (``registerIncrementBrokerData``, or ``registerSingleTopicAll``
  with ``enable_single_topic_register``), and the reply's order-topic KV table
  (``updateOrderTopicConfig``);
- the available name servers (registrations and heartbeats go only to those);
- the lightweight heartbeat and ``syncBrokerMemberGroup`` in acting-master mode, and the
  unregister from every name server on shutdown (``unregisterBrokerAll``).

>>> from routing import ManualClock, RegisterResult
>>> clock = ManualClock(start_ms=0)
>>> hb = BrokerHeartbeat(BrokerConfig(
...     cluster="c", broker_name="b", broker_id=0, broker_addr="10.0.0.1:10911",
...     name_servers=("ns1:9876",)), clock=clock)
>>> [type(a).__name__ for a in hb.start()]
['SendRegistration']
>>> hb.next_deadline_ms()
10000
"""

from __future__ import annotations

from ._broker import BrokerHeartbeat
from ._member_group import member_group_from_route
from ._rules import (
    FIRST_REGISTER_DELAY_MS,
    HEARTBEAT_INITIAL_DELAY_MS,
    MAX_REGISTER_PERIOD_MS,
    MEMBER_GROUP_TIMEOUT_MS,
    MIN_REGISTER_PERIOD_MS,
    SINGLE_TOPIC_TIMEOUT_MS,
    SYNC_MEMBER_GROUP_INITIAL_DELAY_MS,
    UNREGISTER_TIMEOUT_MS,
    Action,
    BrokerConfig,
    CheckNameServer,
    MinBrokerChanged,
    QueryOutcome,
    SendHeartbeat,
    SendMemberGroupQuery,
    SendRegistration,
    SendTopicRegistration,
    SendUnregister,
    SendVersionQuery,
    UpdateMasterAddress,
    need_register,
    next_tick_ms,
    register_period_ms,
    rewrite_permissions,
    split_topics,
)

__all__ = [
    "FIRST_REGISTER_DELAY_MS",
    "HEARTBEAT_INITIAL_DELAY_MS",
    "MAX_REGISTER_PERIOD_MS",
    "MEMBER_GROUP_TIMEOUT_MS",
    "MIN_REGISTER_PERIOD_MS",
    "SINGLE_TOPIC_TIMEOUT_MS",
    "SYNC_MEMBER_GROUP_INITIAL_DELAY_MS",
    "UNREGISTER_TIMEOUT_MS",
    "Action",
    "BrokerConfig",
    "BrokerHeartbeat",
    "CheckNameServer",
    "MinBrokerChanged",
    "QueryOutcome",
    "SendHeartbeat",
    "SendMemberGroupQuery",
    "SendRegistration",
    "SendTopicRegistration",
    "SendUnregister",
    "SendVersionQuery",
    "UpdateMasterAddress",
    "member_group_from_route",
    "need_register",
    "next_tick_ms",
    "register_period_ms",
    "rewrite_permissions",
    "split_topics",
]
