"""The broker's topic table and how its changes reach the name servers (Java study §3.8).

Java's ``TopicConfigManager`` bumps the data version on every change; a created or updated
topic is then sent at once (``registerBrokerData`` / ``AdminBrokerProcessor``):

- with ``enableSingleTopicRegister``, ``registerSingleTopicAll`` sends REGISTER_TOPIC_IN_NAMESRV
  with one ``QueueData`` (perm ANDed with the broker's when it lacks read or write) to the
  **full** name-server list, topic after topic, each waiting at most 3 000 ms;
- otherwise ``registerIncrementBrokerData`` runs ``doRegisterBrokerAll`` with a wrapper
  holding only the changed topics (copies; the perm-adjusted copy keeps the system flag),
  the already bumped version and their static-topic mappings, to the **available** list.

Both share ``registerBrokerAll``'s monitor: here they are rounds queued behind the one in
flight. A deleted topic is sent nowhere (``deleteTopicConfig`` only bumps the version): the
admin tool deletes it in the name servers itself, and the next full registration carries the
smaller table. `BrokerHeartbeat` inherits these methods.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

import attrs

from .._frozen import FrozenMap
from .._messages import Registration
from .._validate import check_int, check_topic, fail
from .._values import DataVersion, Perm, TopicConfig, TopicQueueMappingInfo, queue_row
from ._round import RoundSpec, TopicSend, check_topic_config
from ._rules import Action, BrokerConfig

__all__ = ["TopicTable", "check_kv_table", "increment_topics", "lacks_read_or_write"]


def lacks_read_or_write(broker_permission: int) -> bool:
    return not (broker_permission & Perm.READ and broker_permission & Perm.WRITE)


def increment_topics(topics: Iterable[TopicConfig], broker_permission: int
                     ) -> dict[str, TopicConfig]:
    """The table of an incremental registration (``registerIncrementBrokerData``): each topic
    as it is, or, when the broker lacks read or write, a copy with ``perm & broker_permission``
    that keeps the system flag (but, like Java's five-argument constructor, not ``order`` or
    the attributes). O(topics).

    >>> t = TopicConfig(topic_name="T", topic_sys_flag=1, order=True)
    >>> c = increment_topics([t], Perm.READ)["T"]
    >>> (int(c.perm), int(c.topic_sys_flag), c.order)
    (4, 1, False)
    """
    if not lacks_read_or_write(broker_permission):
        return {t.topic_name: t for t in topics}
    return {t.topic_name: TopicConfig(
        topic_name=t.topic_name, read_queue_nums=t.read_queue_nums,
        write_queue_nums=t.write_queue_nums, perm=int(t.perm) & broker_permission,
        topic_sys_flag=t.topic_sys_flag) for t in topics}


def check_kv_table(table: object) -> dict[str, str] | None:
    """A registration reply's KV table: None or a mapping of strings to strings."""
    if table is None:
        return None
    if not isinstance(table, Mapping):
        fail("kv_table", table, "a mapping of str to str, or None")
    for key, value in table.items():
        if not isinstance(key, str) or not isinstance(value, str):
            fail(f"kv_table[{key!r}]", value, "a str key with a str value")
    return dict(table)


class TopicTable:
    """The topic-table half of `BrokerHeartbeat` (see the module docstring)."""

    _config: BrokerConfig
    _lock: threading.RLock
    _topics: dict[str, TopicConfig]
    _version: DataVersion
    _state_version: int
    _mappings: FrozenMap[str, TopicQueueMappingInfo]
    _permission: Perm
    _started_at: int | None
    _shut_down: bool
    _order_kv: FrozenMap[str, str] | None

    def _now(self, now_ms: int | None) -> int:
        raise NotImplementedError  # pragma: no cover - BrokerHeartbeat's

    def _advance(self, now: int) -> list[Action]:
        raise NotImplementedError  # pragma: no cover - BrokerHeartbeat's

    def _request(self, spec: RoundSpec, now: int) -> list[Action]:
        raise NotImplementedError  # pragma: no cover - BrokerHeartbeat's

    # ------------------------------------------------------------------ changes

    def update_topics(
        self, topics: Iterable[TopicConfig], now_ms: int | None = None
    ) -> tuple[Action, ...]:
        """Create or update topics and send the change as Java does (module docstring).

        Topics equal to the ones held are left out (Java's idempotent ``updateAndCreateTopic``);
        if none is left, nothing is bumped or sent. Otherwise the version is bumped once
        (``nextVersion(stateMachineVersion)``) and the returned actions hold, after whatever
        was due, either the first REGISTER_TOPIC_IN_NAMESRV sends (``enable_single_topic_register``,
        full list) or an incremental registration (available list), unless a round is in
        flight: then it starts when that round ends. Before `start` and after shutdown the
        table changes and nothing is sent. O(topics given).
        """
        with self._lock:
            now = self._now(now_ms)
            new = [check_topic_config(t) for t in topics]
            changed = {t.topic_name: t for t in new if self._topics.get(t.topic_name) != t}
            out = self._advance(now)
            if not changed:
                return tuple(out)
            self._topics.update(changed)
            self._bump(now)
            out += self._request(self._change_spec(list(changed.values())), now)
            return tuple(out)

    def delete_topics(self, names: Iterable[str], now_ms: int | None = None
                      ) -> tuple[Action, ...]:
        """Remove topics (``deleteTopicConfig``); bump the version if any was present.

        Java sends nothing for a deletion, so neither does this: the result is only what was
        due anyway. The name servers learn it from the admin's DELETE_TOPIC_IN_NAMESRV, or, with
        ``delete_topic_with_broker_registration``, from the next full registration
        (`register_now` sends one at once).
        """
        with self._lock:
            now = self._now(now_ms)
            if isinstance(names, str):
                fail("names", names, "an iterable of topic names, not a str")
            checked = [check_topic("names[]", n) for n in list(names)]
            removed = [self._topics.pop(n, None) for n in checked]
            if any(r is not None for r in removed):
                self._bump(now)
            return tuple(self._advance(now))

    def set_topics(self, topics: Iterable[TopicConfig], now_ms: int | None = None) -> DataVersion:
        """Replace the whole table and bump the version; send nothing (a slave's
        ``SlaveSynchronize`` copy of its master's table). O(topics)."""
        with self._lock:
            now = self._now(now_ms)
            table = {check_topic_config(t).topic_name: t for t in topics}
            self._topics = table
            return self._bump(now)

    def bump_data_version(
        self, now_ms: int | None = None, *, state_version: int | None = None
    ) -> DataVersion:
        """``DataVersion.nextVersion(stateVersion)``. A given ``state_version`` (the master
        epoch in controller mode, ``ReplicasManager.changeToMaster``) is kept for later bumps."""
        with self._lock:
            now = self._now(now_ms)
            if state_version is not None:
                self._state_version = check_int("state_version", state_version)
            return self._bump(now)

    def set_queue_mappings(self, mappings: Mapping[str, TopicQueueMappingInfo]) -> None:
        """The static-topic mappings attached to the last chunk of each registration (and, for
        the topics concerned, to incremental registrations)."""
        table = FrozenMap(mappings)
        for key, info in table.items():
            if not isinstance(info, TopicQueueMappingInfo):
                fail(f"mappings[{key!r}]", info, "a TopicQueueMappingInfo")
        with self._lock:
            self._mappings = table

    def set_broker_permission(self, perm: int, now_ms: int | None = None) -> tuple[Action, ...]:
        """Admin ``updateBrokerConfig(brokerPermission)``: bump the version and run a forced
        round (``registerBrokerAll(false, false, true)``)."""
        with self._lock:
            now = self._now(now_ms)
            self._permission = Perm(check_int("broker_permission", perm, low=0, high=15))
            self._bump(now)
            out = self._advance(now)
            out += self._request(RoundSpec(force=True, oneway=False, periodic=False,
                                           check_order=False), now)
            return tuple(out)

    @property
    def order_topic_config(self) -> FrozenMap[str, str] | None:
        """The order-topic KV table (``ORDER_TOPIC_CONFIG``) of the last winning registration
        reply that carried one, as applied by ``updateOrderTopicConfig``; None until then."""
        return self._order_kv

    # ------------------------------------------------------------------ internals

    def _bump(self, now: int) -> DataVersion:
        self._version = self._version.next(now, self._state_version)
        return self._version

    def _change_spec(self, changed: list[TopicConfig]) -> RoundSpec:
        cfg = self._config
        steps: list[Registration | TopicSend]
        if cfg.enable_single_topic_register:
            perm = self._permission
            adjust = lacks_read_or_write(perm)
            steps = [TopicSend(topic=t.topic_name, queue_data=queue_row(
                t, cfg.broker_name, Perm(t.perm & perm) if adjust else t.perm))
                for t in changed]
        else:
            mappings = {t.topic_name: self._mappings[t.topic_name] for t in changed
                        if t.topic_name in self._mappings}
            steps = [Registration(
                cluster=cfg.cluster, broker_name=cfg.broker_name, broker_id=cfg.broker_id,
                broker_addr=cfg.broker_addr, ha_server_addr=cfg.ha_server_addr,
                zone_name=cfg.zone_name, heartbeat_timeout_ms=cfg.heartbeat_timeout_ms,
                enable_acting_master=cfg.enable_slave_acting_master,
                data_version=self._version,
                topics=increment_topics(changed, self._permission),
                topic_queue_mappings=mappings, filter_servers=(), partial=True)]
        return RoundSpec(force=True, oneway=False, periodic=False, check_order=True,
                         steps=tuple(steps))

    def _apply_order_config(self, table: Mapping[str, str] | None, now: int) -> None:
        """``updateOrderTopicConfig``: every local topic named in the table that is not yet
        ordered becomes ``order=True``; if any did, the version is bumped once. Topics missing
        from the table are left as they are (Java commented that part out)."""
        if table is None:
            return
        self._order_kv = FrozenMap(table)
        changed = False
        for name in table:
            held = self._topics.get(name)
            if held is not None and not held.order:
                self._topics[name] = attrs.evolve(held, order=True)
                changed = True
        if changed:
            self._bump(now)
