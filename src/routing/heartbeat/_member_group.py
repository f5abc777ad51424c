"""``syncBrokerMemberGroup`` and the min-broker-id view of an acting-master broker (Java
``BrokerController``: ``syncBrokerMemberGroup``, ``updateMinBroker``, ``onMinBrokerChange``).

In acting-master mode the broker asks a name server every ``sync_broker_member_group_period_ms``
(first 1 000 ms after start) who is in its group: GET_BROKER_MEMBER_GROUP, or, when
``compatible_with_old_namesrv``, the route of ``rmq_sys_SYNC_BROKER_MEMBER_<name>``. From the
answer (and from a NOTIFY_MIN_BROKER_ID_CHANGE push) a slave learns the smallest live id of its
group and whether that is itself: then it *acts as master* (Java starts its "special
services": schedule, transaction check, pop revive). The view changes only for a slave
(``broker_id != 0``) in acting-master mode, as in Java; a master always acts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs

from .._frozen import FrozenMap
from .._messages import BrokerMemberGroup
from .._validate import check_addr, check_int, fail
from .._values import MASTER_ID, TopicRouteData
from ._rules import (
    MEMBER_GROUP_TIMEOUT_MS,
    SYNC_MEMBER_GROUP_INITIAL_DELAY_MS,
    Action,
    BrokerConfig,
    MinBrokerChanged,
    SendMemberGroupQuery,
    next_tick_ms,
)

__all__ = ["MemberGroupSync", "MemberGroupView", "member_group_from_route"]


def member_group_from_route(route: TopicRouteData | None, cluster: str,
                            broker_name: str) -> BrokerMemberGroup:
    """Java ``getBrokerMemberGroupCompatible``: the members of ``broker_name`` in ``cluster``
    from the route of ``rmq_sys_SYNC_BROKER_MEMBER_<name>`` (an empty group when the route or
    the group is missing). O(groups of the route).

    >>> from routing import BrokerData, TopicRouteData
    >>> route = TopicRouteData(broker_datas=(BrokerData(cluster="c", broker_name="b",
    ...     broker_addrs={1: "10.0.0.2:10911"}),))
    >>> dict(member_group_from_route(route, "c", "b").broker_addrs)
    {1: '10.0.0.2:10911'}
    """
    addrs: dict[int, str] = {}
    if route is not None:
        for data in route.broker_datas:
            if data.broker_name == broker_name and data.cluster == cluster:
                addrs.update(data.broker_addrs)
                break
    return BrokerMemberGroup(cluster=cluster, broker_name=broker_name, broker_addrs=addrs)


def check_push(min_broker_id: int, min_broker_addr: str | None,
               offline_broker_addr: str | None, ha_broker_addr: str | None) -> None:
    """Validate a NOTIFY_MIN_BROKER_ID_CHANGE's fields (`InvalidRequest` naming the field)."""
    check_int("min_broker_id", min_broker_id, low=0)
    for field, value in (("min_broker_addr", min_broker_addr),
                         ("offline_broker_addr", offline_broker_addr),
                         ("ha_broker_addr", ha_broker_addr)):
        if value is not None:
            check_addr(field, value)


class MemberGroupSync:
    """The schedule, the query in flight and the view. Not thread-safe (the broker's lock
    guards it). O(1) per call plus O(members) per answer."""

    def __init__(self, config: BrokerConfig) -> None:
        self._config = config
        self.enabled = config.enable_slave_acting_master
        self.min_broker_id = MASTER_ID
        self.min_broker_addr: str | None = None
        self.acting_as_master = False
        self.group: BrokerMemberGroup | None = None
        self._first: int | None = None
        self._next: int | None = None
        self._pending: tuple[int, str, int] | None = None  # request id, server, deadline
        self._choice = 0

    # ------------------------------------------------------------------ schedule

    def start(self, now: int, isolated: bool) -> None:
        if not isolated:  # Java start: changeSpecialServiceStatus(brokerId == MASTER_ID)
            self.acting_as_master = self._config.broker_id == MASTER_ID
        if self.enabled:
            self._first = self._next = now + SYNC_MEMBER_GROUP_INITIAL_DELAY_MS

    def stop(self) -> None:
        self._next = self._pending = None

    @property
    def next_deadline_ms(self) -> int | None:
        due = self._next
        if self._pending is not None:
            due = self._pending[2] if due is None else min(due, self._pending[2])
        return due

    def poll(self, now: int, new_id: Callable[[], int]) -> list[SendMemberGroupQuery]:
        """Expire a query past its timeout (a failure: the next query goes to the next name
        server); when the period is due, ask, unless a query is still in flight (Java's
        fixed-rate task does not overlap itself; the missed run is skipped here)."""
        if self._pending is not None and now >= self._pending[2]:
            self._pending = None
            self._choice += 1
        if self._next is None or self._first is None or now < self._next:
            return []
        self._next = next_tick_ms(self._first, self._config.sync_broker_member_group_period_ms,
                                  now)
        servers = self._config.name_servers
        if self._pending is not None or not servers:
            return []
        # Java: invokeSync(null, ...) uses the client's chosen name server (full list).
        ns = servers[self._choice % len(servers)]
        rid = new_id()
        self._pending = (rid, ns, now + MEMBER_GROUP_TIMEOUT_MS)
        cfg = self._config
        return [SendMemberGroupQuery(name_server=ns, request_id=rid, cluster=cfg.cluster,
                                     broker_name=cfg.broker_name,
                                     via_route=cfg.compatible_with_old_namesrv,
                                     timeout_ms=MEMBER_GROUP_TIMEOUT_MS)]

    def owns(self, name_server: str, request_id: int) -> bool:
        return self._pending is not None and self._pending[:2] == (request_id, name_server)

    def failed(self) -> None:
        """The query failed (connect error, timeout): Java picks another name server."""
        self._pending = None
        self._choice += 1

    # ------------------------------------------------------------------ answers

    def answered(self, group: BrokerMemberGroup | None, isolated: bool) -> list[MinBrokerChanged]:
        """``syncBrokerMemberGroup`` after the query returned ``group`` (None: a non-SUCCESS
        answer, which Java turns into an empty group)."""
        if group is not None and not isinstance(group, BrokerMemberGroup):
            fail("group", group, "a BrokerMemberGroup or None")
        self._pending = None
        if group is None or not group.broker_addrs:
            return []  # "Couldn't find any broker member from namesrv"
        self.group = group
        if isolated:
            return []
        smallest = group.minimum_broker_id()
        return self._update(smallest, group.broker_addrs.get(smallest), None, None,
                            infer_offline=True)

    def pushed(self, min_broker_id: int, min_broker_addr: str | None,
               offline_broker_addr: str | None, ha_broker_addr: str | None
               ) -> list[MinBrokerChanged]:
        """NOTIFY_MIN_BROKER_ID_CHANGE (``updateMinBroker`` with the offline and HA
        addresses of the push); not gated on isolation, as in Java."""
        check_push(min_broker_id, min_broker_addr, offline_broker_addr, ha_broker_addr)
        return self._update(min_broker_id, min_broker_addr, offline_broker_addr, ha_broker_addr,
                            infer_offline=False)

    def _update(self, min_id: int, min_addr: str | None, offline: str | None,
                ha: str | None, *, infer_offline: bool) -> list[MinBrokerChanged]:
        cfg = self._config
        if not (self.enabled and cfg.broker_id != MASTER_ID) or min_id == self.min_broker_id:
            return []
        if infer_offline and min_id > self.min_broker_id:
            offline = self.min_broker_addr  # the old smallest is gone
        self.min_broker_id, self.min_broker_addr = min_id, min_addr
        self.acting_as_master = cfg.broker_id == min_id
        return [MinBrokerChanged(min_broker_id=min_id, min_broker_addr=min_addr,
                                 offline_broker_addr=offline, ha_broker_addr=ha,
                                 acting_as_master=self.acting_as_master,
                                 master_offline=False)]

    def members(self) -> FrozenMap[int, str]:
        return self.group.broker_addrs if self.group is not None else FrozenMap()


class MemberGroupView:
    """The member-group half of `BrokerHeartbeat`'s public face."""

    _lock: threading.RLock
    _group: MemberGroupSync
    _isolated: bool
    _master_addr: str | None

    def _now(self, now_ms: int | None) -> int:
        raise NotImplementedError  # pragma: no cover - BrokerHeartbeat's

    def _advance(self, now: int) -> list[Action]:
        raise NotImplementedError  # pragma: no cover - BrokerHeartbeat's

    @property
    def min_broker_id(self) -> int:
        """The smallest live broker id of the group as this broker last learned it (Java
        ``minBrokerIdInGroup``, 0 until a member-group answer or push says otherwise)."""
        return self._group.min_broker_id

    @property
    def min_broker_addr(self) -> str | None:
        """The address of `min_broker_id` (None until learned)."""
        return self._group.min_broker_addr

    @property
    def acting_as_master(self) -> bool:
        """Whether the master-only services run here (``changeSpecialServiceStatus``): a master
        once started, a slave while it holds the group's smallest live id; never while
        isolated."""
        return self._group.acting_as_master

    @property
    def member_group(self) -> FrozenMap[int, str]:
        """The group's members (id → address) from the last non-empty member-group answer."""
        return self._group.members()

    def on_member_group(
        self, name_server: str, request_id: int, group: BrokerMemberGroup | None,
        *, now_ms: int | None = None,
    ) -> tuple[Action, ...]:
        """The answer to a `SendMemberGroupQuery` (``syncBrokerMemberGroup``): the group, or
        None for a non-SUCCESS answer (Java then sees an empty group and changes nothing).
        A non-empty group sets `member_group`; unless isolated, a slave in acting-master mode
        then takes its smallest id as the group's, and a `MinBrokerChanged` event comes back
        when that changed (a higher id than before means the old one went offline)."""
        if group is not None and not isinstance(group, BrokerMemberGroup):
            fail("group", group, "a BrokerMemberGroup or None")
        with self._lock:
            now = self._now(now_ms)
            out = self._advance(now)
            if self._group.owns(name_server, request_id):
                out += self._min_changed(self._group.answered(group, self._isolated))
            return tuple(out)

    def on_min_broker_id_changed(
        self, min_broker_id: int, min_broker_addr: str | None, *,
        offline_broker_addr: str | None = None, ha_broker_addr: str | None = None,
        now_ms: int | None = None,
    ) -> tuple[Action, ...]:
        """A NOTIFY_MIN_BROKER_ID_CHANGE push from a name server (``updateMinBroker`` with the
        header's fields). Same effect as a member-group answer, with the push's offline and
        HA addresses."""
        check_push(min_broker_id, min_broker_addr, offline_broker_addr, ha_broker_addr)
        with self._lock:
            now = self._now(now_ms)
            out = self._advance(now)
            out += self._min_changed(self._group.pushed(
                min_broker_id, min_broker_addr, offline_broker_addr, ha_broker_addr))
            return tuple(out)

    def _min_changed(self, events: list[MinBrokerChanged]) -> list[Action]:
        """Java ``onMinBrokerChange``: an offline address equal to the master address means the
        master is gone (``onMasterOffline``: stop syncing from it)."""
        out: list[Action] = []
        for event in events:
            offline = event.offline_broker_addr
            if offline is not None and offline == self._master_addr:
                self._master_addr = None
                event = attrs.evolve(event, master_offline=True)
            out.append(event)
        return out
