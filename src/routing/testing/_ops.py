"""Operations on a name server as values, and the fleets they are drawn for.

An *operation* is one call a name server receives (a registration, a heartbeat, a scan, an
admin write) or the passage of time. The calls are the core's model of the manager's write
calls (`routing._calls`, the very values a journal records) under the test kit's names
(``RegisterOp`` is ``routing.journal.Register``); `AdvanceOp` is the test kit's own. All are
frozen attrs values so that hypothesis can generate, shrink and print them, and so that the
same sequence can be replayed against `RouteInfoManager`, a user's wrapper around it, and
`RouteModel`.

`apply_operation` performs one operation on a system and returns a plain, comparable
*outcome* (tuples, bools, ``None``), which is what the state machine compares with the
model. Nothing here imports hypothesis or pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeAlias, runtime_checkable

import attrs

from .._calls import (
    AddWritePerm,
    ChannelClosed,
    DeleteTopic,
    Heartbeat,
    ManagerWrites,
    QueryDataVersion,
    Register,
    RegisterTopic,
    Scan,
    Unregister,
    WipeWritePerm,
)
from .._clock import ManualClock
from .._errors import InvalidRequest, InvalidType
from .._messages import ClusterInfo, ExpiredBroker, RegisterResult, VersionAnswer
from .._validate import non_negative
from .._values import BrokerAddr, BrokerLiveInfo, TopicRouteData
from ._errors import UnknownName

__all__ = [
    "AddWritePermOp",
    "AdvanceOp",
    "BrokerSpec",
    "CloseChannelOp",
    "DeleteTopicOp",
    "Fleet",
    "GroupSpec",
    "HeartbeatOp",
    "Operation",
    "Outcome",
    "QueryDataVersionOp",
    "RegisterOp",
    "RegisterTopicOp",
    "RoutingSystem",
    "ScanOp",
    "UnregisterOp",
    "WipeWritePermOp",
    "apply_operation",
    "describe",
    "run_operations",
]


# --------------------------------------------------------------------------- fleets


@attrs.frozen(kw_only=True)
class BrokerSpec:
    """One broker process of a `Fleet`: where it lives and the id it usually registers with.

    A real broker keeps its address for life; its id can change when a slave is promoted
    (it then registers its old address under id 0, Java §2.1 step 5).
    """

    cluster: str
    broker_name: str
    broker_addr: str
    home_id: int
    ha_server_addr: str | None = None

    def __str__(self) -> str:
        return f"{self.broker_name}#{self.home_id}@{self.broker_addr}"


@attrs.frozen(kw_only=True)
class GroupSpec:
    """A broker group (one master, some slaves) as the brokers themselves see it.

    ``enable_acting_master`` and ``zone_name`` are what every member registers with
    (``None`` for ``enable_acting_master`` means a pre-5.0 broker).
    """

    cluster: str
    broker_name: str
    members: tuple[BrokerSpec, ...]
    enable_acting_master: bool | None = None
    zone_name: str | None = None


@attrs.frozen(kw_only=True)
class Fleet:
    """A coherent set of clusters and broker groups, plus the topic names they may host.

    Coherent means: broker names are unique, each group belongs to one cluster, and each
    address belongs to one group. ``strangers`` are well-formed addresses that belong to no
    group, for operations that must be ignored (heartbeats from unknown brokers and so on).
    """

    groups: tuple[GroupSpec, ...]
    topics: tuple[str, ...]
    strangers: tuple[str, ...] = ("192.0.2.1:10911",)

    @property
    def brokers(self) -> tuple[BrokerSpec, ...]:
        """Every member of every group, in group order."""
        return tuple(m for g in self.groups for m in g.members)

    @property
    def clusters(self) -> tuple[str, ...]:
        """The cluster names, sorted, without repeats."""
        return tuple(sorted({g.cluster for g in self.groups}))

    @property
    def broker_names(self) -> tuple[str, ...]:
        """The group (broker) names, in group order."""
        return tuple(g.broker_name for g in self.groups)

    def group(self, broker_name: str) -> GroupSpec:
        """The group called ``broker_name`` (`UnknownName`, a ``KeyError``, if none)."""
        for g in self.groups:
            if g.broker_name == broker_name:
                return g
        raise UnknownName(f"no group with broker_name {broker_name!r} in the fleet",
                          field="broker_name", value=broker_name)


# --------------------------------------------------------------------------- operations

# The manager's calls are the core's (`routing._calls`: one model, shared with the journal),
# under the test kit's names; only the passage of time is the test kit's own.

#: REGISTER_BROKER: `RouteInfoManager.register`.
RegisterOp = Register
#: BROKER_HEARTBEAT: `RouteInfoManager.heartbeat` (refreshes a known broker only).
HeartbeatOp = Heartbeat
#: QUERY_DATA_VERSION: `RouteInfoManager.query_data_version` (also refreshes liveness).
QueryDataVersionOp = QueryDataVersion
#: The periodic scan: `RouteInfoManager.scan_expired`.
ScanOp = Scan
#: UNREGISTER_BROKER: `RouteInfoManager.unregister` (``generation`` fences it, D2).
UnregisterOp = Unregister
#: A connection closed: `RouteInfoManager.on_channel_closed`.
CloseChannelOp = ChannelClosed
#: DELETE_TOPIC_IN_NAMESRV: `RouteInfoManager.delete_topic`.
DeleteTopicOp = DeleteTopic
#: WIPE_WRITE_PERM_OF_BROKER: `RouteInfoManager.wipe_write_perm`.
WipeWritePermOp = WipeWritePerm
#: ADD_WRITE_PERM_OF_BROKER: `RouteInfoManager.add_write_perm`.
AddWritePermOp = AddWritePerm
#: REGISTER_TOPIC_IN_NAMESRV: `RouteInfoManager.register_topic`.
RegisterTopicOp = RegisterTopic


@attrs.frozen(kw_only=True)
class AdvanceOp:
    """Time passes: the clock moves forward by ``ms`` milliseconds (>= 0)."""

    ms: int = attrs.field(validator=non_negative)

    def describe(self) -> str:
        return f"advance {self.ms} ms"


#: Any one operation.
Operation: TypeAlias = (
    RegisterOp | HeartbeatOp | QueryDataVersionOp | AdvanceOp | ScanOp | UnregisterOp
    | CloseChannelOp | DeleteTopicOp | WipeWritePermOp | AddWritePermOp | RegisterTopicOp
)

#: What an operation returned, normalized so that two systems can be compared with ``==``.
Outcome: TypeAlias = Any


#: The manager's calls among the operations (every one but `AdvanceOp`).
_CALLS = (RegisterOp, HeartbeatOp, QueryDataVersionOp, ScanOp, UnregisterOp, CloseChannelOp,
          DeleteTopicOp, WipeWritePermOp, AddWritePermOp, RegisterTopicOp)


def describe(op: Operation) -> str:
    """A one-line, human-readable description of ``op`` (for traces)."""
    return op.describe()


# --------------------------------------------------------------------------- systems


@runtime_checkable
class RoutingSystem(ManagerWrites, Protocol):
    """What the state machine and `apply_operation` need from a system under test: the
    manager's write methods (`ManagerWrites`) and these reads.

    `RouteInfoManager` satisfies it; so does any wrapper that forwards these methods.
    """

    def pickup_route(self, topic: str) -> TopicRouteData | None: ...
    def all_topics(self) -> tuple[str, ...]: ...
    def live_brokers(self) -> Mapping[BrokerAddr, BrokerLiveInfo]: ...
    def cluster_info(self) -> ClusterInfo: ...
    def check_invariants(self) -> None: ...


def _register_outcome(res: RegisterResult) -> Outcome:
    if not res.accepted:
        reason = res.rejection or ""
        kind = ("stale_state_version" if "stale" in reason
                else "single_topic" if "single-topic" in reason else "other")
        return ("rejected", kind)
    return ("accepted", res.master_addr, res.ha_server_addr, res.generation)


def _removed_outcome(gone: Iterable[ExpiredBroker]) -> Outcome:
    return tuple(sorted((e.cluster, e.broker_addr, e.broker_name, e.broker_id, e.generation)
                        for e in gone))


def apply_operation(system: RoutingSystem, op: Operation, *, clock: ManualClock) -> Outcome:
    """Perform ``op`` on ``system`` and return its normalized outcome.

    `AdvanceOp` moves ``clock`` (which must be the clock ``system`` reads). An
    `InvalidRequest` raised by the system is caught and returned as
    ``("invalid", field)``; any other exception propagates. Outcomes:

    * register: ``("accepted", master_addr, ha_server_addr, generation)`` or
      ``("rejected", "stale_state_version" | "single_topic")``;
    * scan and channel close: the sorted tuple of
      ``(cluster, addr, broker_name, broker_id, generation)`` removed;
    * query_data_version: ``(changed, stored)``; advance: the new time in ms;
    * the others: what the manager method returns.
    """
    try:
        return _apply(system, op, clock)
    except InvalidRequest as exc:
        return ("invalid", exc.field)


def _apply(system: RoutingSystem, op: Operation, clock: ManualClock) -> Outcome:
    if isinstance(op, AdvanceOp):
        return clock.advance(op.ms)
    if not isinstance(op, _CALLS):
        raise InvalidType(f"operation must be one of the test kit's operations, got {op!r:.80}",
                          field="operation", value=op)
    result = op.apply(system)
    if isinstance(result, RegisterResult):
        return _register_outcome(result)
    if isinstance(result, VersionAnswer):
        return (result.changed, result.stored)
    if isinstance(op, ScanOp | CloseChannelOp):
        return _removed_outcome(result)  # type: ignore[arg-type]
    return result


def run_operations(system: RoutingSystem, operations: Iterable[Operation], *,
                   clock: ManualClock) -> list[Outcome]:
    """Apply every operation in order; return their outcomes (see `apply_operation`)."""
    return [apply_operation(system, op, clock=clock) for op in operations]
