"""Operations on a name server as values, and the fleets they are drawn for.

An *operation* is one call a name server receives (a registration, a heartbeat, a scan, an
admin write) or the passage of time. Operations are frozen attrs values so that hypothesis
can generate, shrink and print them, and so that the same sequence can be replayed against
`RouteInfoManager`, a user's wrapper around it, and `RouteModel`.

`apply_operation` performs one operation on a system and returns a plain, comparable
*outcome* (tuples, bools, ``None``), which is what the state machine compares with the
model. Nothing here imports hypothesis or pytest.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

import attrs

from .._clock import ManualClock
from .._errors import InvalidRequest
from .._messages import (
    ClusterInfo,
    ExpiredBroker,
    RegisterResult,
    Registration,
    UnregisterRequest,
    VersionAnswer,
)
from .._values import BrokerAddr, BrokerLiveInfo, DataVersion, Perm, QueueData, TopicRouteData

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
        """The group called ``broker_name`` (KeyError if none)."""
        for g in self.groups:
            if g.broker_name == broker_name:
                return g
        raise KeyError(broker_name)


# --------------------------------------------------------------------------- operations


def _short_version(v: DataVersion) -> str:
    return f"v{v.state_version}.{v.counter}.{v.timestamp}"


def _short_topics(reg: Registration) -> str:
    parts = []
    for name, c in sorted(reg.topics.items()):
        parts.append(f"{name}:{c.read_queue_nums}/{c.write_queue_nums}/{Perm.to_string(c.perm)}")
    return "{" + ", ".join(parts) + "}"


@attrs.frozen(kw_only=True)
class RegisterOp:
    """REGISTER_BROKER: `RouteInfoManager.register`."""

    registration: Registration

    def describe(self) -> str:
        r = self.registration
        extra = []
        if r.heartbeat_timeout_ms is not None:
            extra.append(f"timeout={r.heartbeat_timeout_ms}ms")
        if r.enable_acting_master is not None:
            extra.append(f"acting={r.enable_acting_master}")
        if r.zone_name is not None:
            extra.append(f"zone={r.zone_name}")
        if r.channel is not None:
            extra.append(f"channel={r.channel!r}")
        if r.partial:
            extra.append("partial")
        tail = (" " + " ".join(extra)) if extra else ""
        return (f"register {r.cluster}/{r.broker_name} id={r.broker_id} {r.broker_addr} "
                f"{_short_version(r.data_version)} topics={_short_topics(r)}{tail}")


@attrs.frozen(kw_only=True)
class HeartbeatOp:
    """BROKER_HEARTBEAT: `RouteInfoManager.heartbeat` (refreshes a known broker only)."""

    cluster: str
    broker_addr: str

    def describe(self) -> str:
        return f"heartbeat {self.cluster}/{self.broker_addr}"


@attrs.frozen(kw_only=True)
class QueryDataVersionOp:
    """QUERY_DATA_VERSION: `RouteInfoManager.query_data_version` (also refreshes liveness)."""

    cluster: str
    broker_addr: str
    data_version: DataVersion

    def describe(self) -> str:
        return (f"query_data_version {self.cluster}/{self.broker_addr} "
                f"{_short_version(self.data_version)}")


@attrs.frozen(kw_only=True)
class AdvanceOp:
    """Time passes: the clock moves forward by ``ms`` milliseconds (>= 0)."""

    ms: int = attrs.field(validator=attrs.validators.ge(0))

    def describe(self) -> str:
        return f"advance {self.ms} ms"


@attrs.frozen(kw_only=True)
class ScanOp:
    """The periodic scan: `RouteInfoManager.scan_expired`."""

    def describe(self) -> str:
        return "scan_expired"


@attrs.frozen(kw_only=True)
class UnregisterOp:
    """UNREGISTER_BROKER: `RouteInfoManager.unregister` (``generation`` fences it, D2)."""

    request: UnregisterRequest

    def describe(self) -> str:
        q = self.request
        gen = "" if q.generation is None else f" generation={q.generation}"
        return (f"unregister {q.cluster}/{q.broker_name} id={q.broker_id} "
                f"{q.broker_addr}{gen}")


@attrs.frozen(kw_only=True)
class CloseChannelOp:
    """A connection closed: `RouteInfoManager.on_channel_closed`."""

    channel: Hashable

    def describe(self) -> str:
        return f"close channel {self.channel!r}"


@attrs.frozen(kw_only=True)
class DeleteTopicOp:
    """DELETE_TOPIC_IN_NAMESRV: `RouteInfoManager.delete_topic`."""

    topic: str
    cluster: str | None = None

    def describe(self) -> str:
        where = "" if self.cluster is None else f" in cluster {self.cluster}"
        return f"delete topic {self.topic}{where}"


@attrs.frozen(kw_only=True)
class WipeWritePermOp:
    """WIPE_WRITE_PERM_OF_BROKER: `RouteInfoManager.wipe_write_perm`."""

    broker_name: str

    def describe(self) -> str:
        return f"wipe write perm of {self.broker_name}"


@attrs.frozen(kw_only=True)
class AddWritePermOp:
    """ADD_WRITE_PERM_OF_BROKER: `RouteInfoManager.add_write_perm`."""

    broker_name: str

    def describe(self) -> str:
        return f"add write perm of {self.broker_name}"


@attrs.frozen(kw_only=True)
class RegisterTopicOp:
    """REGISTER_TOPIC_IN_NAMESRV: `RouteInfoManager.register_topic`."""

    topic: str
    queue_datas: tuple[QueueData, ...] = attrs.field(converter=tuple)

    def describe(self) -> str:
        rows = ", ".join(f"{q.broker_name}:{q.read_queue_nums}/{q.write_queue_nums}/"
                         f"{Perm.to_string(q.perm)}" for q in self.queue_datas)
        return f"register topic {self.topic} [{rows}]"


#: Any one operation.
Operation: TypeAlias = (
    RegisterOp | HeartbeatOp | QueryDataVersionOp | AdvanceOp | ScanOp | UnregisterOp
    | CloseChannelOp | DeleteTopicOp | WipeWritePermOp | AddWritePermOp | RegisterTopicOp
)

#: What an operation returned, normalized so that two systems can be compared with ``==``.
Outcome: TypeAlias = Any


def describe(op: Operation) -> str:
    """A one-line, human-readable description of ``op`` (for traces)."""
    return op.describe()


# --------------------------------------------------------------------------- systems


@runtime_checkable
class RoutingSystem(Protocol):
    """What the state machine and `apply_operation` need from a system under test.

    `RouteInfoManager` satisfies it; so does any wrapper that forwards these methods.
    """

    def register(self, registration: Registration) -> RegisterResult: ...
    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool: ...
    def query_data_version(self, *, cluster: str, broker_addr: str,
                           data_version: DataVersion) -> VersionAnswer: ...
    def scan_expired(self) -> tuple[ExpiredBroker, ...]: ...
    def unregister(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   generation: int | None = None) -> bool: ...
    def on_channel_closed(self, channel: Hashable | None) -> tuple[ExpiredBroker, ...]: ...
    def delete_topic(self, topic: str, cluster: str | None = None) -> bool: ...
    def wipe_write_perm(self, broker_name: str) -> int: ...
    def add_write_perm(self, broker_name: str) -> int: ...
    def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> None: ...
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
    match op:
        case RegisterOp(registration=reg):
            return _register_outcome(system.register(reg))
        case HeartbeatOp(cluster=cluster, broker_addr=addr):
            return system.heartbeat(cluster=cluster, broker_addr=addr)
        case QueryDataVersionOp(cluster=cluster, broker_addr=addr, data_version=dv):
            answer = system.query_data_version(cluster=cluster, broker_addr=addr,
                                               data_version=dv)
            return (answer.changed, answer.stored)
        case AdvanceOp(ms=ms):
            return clock.advance(ms)
        case ScanOp():
            return _removed_outcome(system.scan_expired())
        case UnregisterOp(request=q):
            return system.unregister(cluster=q.cluster, broker_addr=q.broker_addr,
                                     broker_name=q.broker_name, broker_id=q.broker_id,
                                     generation=q.generation)
        case CloseChannelOp(channel=channel):
            return _removed_outcome(system.on_channel_closed(channel))
        case DeleteTopicOp(topic=topic, cluster=cluster):
            return system.delete_topic(topic, cluster)
        case WipeWritePermOp(broker_name=name):
            return system.wipe_write_perm(name)
        case AddWritePermOp(broker_name=name):
            return system.add_write_perm(name)
        case RegisterTopicOp(topic=topic, queue_datas=rows):
            system.register_topic(topic, rows)
            return None
    raise TypeError(f"not an operation: {op!r}")


def run_operations(system: RoutingSystem, operations: Iterable[Operation], *,
                   clock: ManualClock) -> list[Outcome]:
    """Apply every operation in order; return their outcomes (see `apply_operation`)."""
    return [apply_operation(system, op, clock=clock) for op in operations]
