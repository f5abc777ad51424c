"""The manager's write calls as values: one frozen value per `RouteInfoManager` write method.

A call holds the arguments of one write (a registration, a heartbeat, a scan, an admin
write), applies itself to a manager (`apply`: exactly what the method returns) and says
what it is in one line (`describe`). It is the one model of those calls shared by the
journal (`routing.journal` records and replays them, adding their JSON ``args``) and the
test kit (`routing.testing` generates, applies and compares them, naming them
``RegisterOp``, ``HeartbeatOp``, …). The values check nothing: the manager validates at
`apply`, which is how the test kit's invalid operations reach it.

>>> import routing as r
>>> from routing._calls import Heartbeat
>>> call = Heartbeat(cluster="c", broker_addr="10.0.0.1:10911")
>>> call.op, call.describe()
('heartbeat', 'heartbeat c/10.0.0.1:10911')
>>> call.apply(r.RouteInfoManager(clock=r.ManualClock()))  # an unknown broker: ignored
False
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import ClassVar, Protocol, TypeAlias

import attrs

from ._messages import (
    ExpiredBroker,
    RegisterResult,
    Registration,
    UnregisterRequest,
    VersionAnswer,
)
from ._values import DataVersion, Perm, QueueData

__all__ = [
    "CALLS",
    "AddWritePerm",
    "Call",
    "CallResult",
    "ChannelClosed",
    "DeleteTopic",
    "Heartbeat",
    "ManagerWrites",
    "QueryDataVersion",
    "Register",
    "RegisterTopic",
    "Scan",
    "Unregister",
    "UnregisterMany",
    "WipeWritePerm",
]


class ManagerWrites(Protocol):
    """The write methods a call is applied to: `RouteInfoManager`, a journal recorder, or
    any wrapper forwarding them (``unregister_many`` is `BatchWrites`'s)."""

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


class BatchWrites(ManagerWrites, Protocol):
    """`ManagerWrites` plus the batch unregistration (`UnregisterMany`)."""

    def unregister_many(self, requests: Iterable[UnregisterRequest]) -> tuple[bool, ...]: ...


#: What `apply` returns: exactly what the manager method returned.
CallResult: TypeAlias = (
    RegisterResult | bool | tuple[bool, ...] | VersionAnswer | tuple[ExpiredBroker, ...]
    | int | None
)


def _short_version(v: DataVersion) -> str:
    return f"v{v.state_version}.{v.counter}.{v.timestamp}"


def _short_rows(rows: Iterable[tuple[str, int, int, int]]) -> str:
    """``name:read/write/perm`` for each (name, read queues, write queues, perm)."""
    return ", ".join(f"{name}:{read}/{write}/{Perm.to_string(perm)}"
                     for name, read, write, perm in rows)


def _short_request(q: UnregisterRequest) -> str:
    gen = "" if q.generation is None else f" generation={q.generation}"
    return f"{q.cluster}/{q.broker_name} id={q.broker_id} {q.broker_addr}{gen}"


@attrs.frozen(kw_only=True)
class Register:
    """``register(registration)`` (REGISTER_BROKER, Java ``registerBroker``)."""

    op: ClassVar[str] = "register"
    registration: Registration

    def apply(self, manager: ManagerWrites) -> RegisterResult:
        return manager.register(self.registration)

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
        topics = _short_rows((name, c.read_queue_nums, c.write_queue_nums, c.perm)
                             for name, c in sorted(r.topics.items()))
        return (f"register {r.cluster}/{r.broker_name} id={r.broker_id} {r.broker_addr} "
                f"{_short_version(r.data_version)} topics={{{topics}}}{tail}")


@attrs.frozen(kw_only=True)
class Unregister:
    """``unregister(...)`` (UNREGISTER_BROKER, applied synchronously; ``generation``
    fences it, D2)."""

    op: ClassVar[str] = "unregister"
    request: UnregisterRequest

    def apply(self, manager: ManagerWrites) -> bool:
        r = self.request
        return manager.unregister(cluster=r.cluster, broker_addr=r.broker_addr,
                                  broker_name=r.broker_name, broker_id=r.broker_id,
                                  generation=r.generation)

    def describe(self) -> str:
        return f"unregister {_short_request(self.request)}"


@attrs.frozen(kw_only=True)
class UnregisterMany:
    """``unregister_many(requests)``: one batch, one lock, one route event (Java's batch
    unregistration worker)."""

    op: ClassVar[str] = "unregister_many"
    requests: tuple[UnregisterRequest, ...]

    def apply(self, manager: BatchWrites) -> tuple[bool, ...]:
        return manager.unregister_many(self.requests)

    def describe(self) -> str:
        return "unregister_many [" + "; ".join(map(_short_request, self.requests)) + "]"


@attrs.frozen(kw_only=True)
class Heartbeat:
    """``heartbeat(cluster=, broker_addr=)`` (BROKER_HEARTBEAT: refreshes a known broker
    only)."""

    op: ClassVar[str] = "heartbeat"
    cluster: str
    broker_addr: str

    def apply(self, manager: ManagerWrites) -> bool:
        return manager.heartbeat(cluster=self.cluster, broker_addr=self.broker_addr)

    def describe(self) -> str:
        return f"heartbeat {self.cluster}/{self.broker_addr}"


@attrs.frozen(kw_only=True)
class QueryDataVersion:
    """``query_data_version(cluster=, broker_addr=, data_version=)`` (QUERY_DATA_VERSION;
    also refreshes liveness)."""

    op: ClassVar[str] = "query_data_version"
    cluster: str
    broker_addr: str
    data_version: DataVersion

    def apply(self, manager: ManagerWrites) -> VersionAnswer:
        return manager.query_data_version(cluster=self.cluster, broker_addr=self.broker_addr,
                                          data_version=self.data_version)

    def describe(self) -> str:
        return (f"query_data_version {self.cluster}/{self.broker_addr} "
                f"{_short_version(self.data_version)}")


@attrs.frozen(kw_only=True)
class Scan:
    """``scan_expired()``: the host's periodic scan (Java ``scanNotActiveBroker``, 5 000 ms)."""

    op: ClassVar[str] = "scan"

    def apply(self, manager: ManagerWrites) -> tuple[ExpiredBroker, ...]:
        return manager.scan_expired()

    def describe(self) -> str:
        return "scan_expired"


@attrs.frozen(kw_only=True)
class ChannelClosed:
    """``on_channel_closed(channel)``: a connection closed (Java
    ``BrokerHousekeepingService``)."""

    op: ClassVar[str] = "channel_closed"
    channel: Hashable | None

    def apply(self, manager: ManagerWrites) -> tuple[ExpiredBroker, ...]:
        return manager.on_channel_closed(self.channel)

    def describe(self) -> str:
        return f"close channel {self.channel!r}"


@attrs.frozen(kw_only=True)
class DeleteTopic:
    """``delete_topic(topic, cluster)`` (DELETE_TOPIC_IN_NAMESRV)."""

    op: ClassVar[str] = "delete_topic"
    topic: str
    cluster: str | None = None

    def apply(self, manager: ManagerWrites) -> bool:
        return manager.delete_topic(self.topic, self.cluster)

    def describe(self) -> str:
        where = "" if self.cluster is None else f" in cluster {self.cluster}"
        return f"delete topic {self.topic}{where}"


def _tuple_of_rows(rows: Iterable[QueueData]) -> tuple[QueueData, ...]:
    return tuple(rows)


@attrs.frozen(kw_only=True)
class RegisterTopic:
    """``register_topic(topic, queue_datas)`` (REGISTER_TOPIC_IN_NAMESRV)."""

    op: ClassVar[str] = "register_topic"
    topic: str
    queue_datas: tuple[QueueData, ...] = attrs.field(converter=_tuple_of_rows)

    def apply(self, manager: ManagerWrites) -> None:
        manager.register_topic(self.topic, self.queue_datas)

    def describe(self) -> str:
        rows = _short_rows((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm)
                           for q in self.queue_datas)
        return f"register topic {self.topic} [{rows}]"


@attrs.frozen(kw_only=True)
class WipeWritePerm:
    """``wipe_write_perm(broker_name)`` (WIPE_WRITE_PERM_OF_BROKER: the group's topics
    become read-only)."""

    op: ClassVar[str] = "wipe_write_perm"
    broker_name: str

    def apply(self, manager: ManagerWrites) -> int:
        return manager.wipe_write_perm(self.broker_name)

    def describe(self) -> str:
        return f"wipe write perm of {self.broker_name}"


@attrs.frozen(kw_only=True)
class AddWritePerm:
    """``add_write_perm(broker_name)`` (ADD_WRITE_PERM_OF_BROKER: the write bit back)."""

    op: ClassVar[str] = "add_write_perm"
    broker_name: str

    def apply(self, manager: ManagerWrites) -> int:
        return manager.add_write_perm(self.broker_name)

    def describe(self) -> str:
        return f"add write perm of {self.broker_name}"


#: Any write call.
Call: TypeAlias = (
    Register | Unregister | UnregisterMany | Heartbeat | QueryDataVersion | Scan
    | ChannelClosed | DeleteTopic | RegisterTopic | WipeWritePerm | AddWritePerm
)

#: Operation name (``Call.op``, the journal's ``op`` field) → call class.
CALLS: dict[str, type[Call]] = {c.op: c for c in (
    Register, Unregister, UnregisterMany, Heartbeat, QueryDataVersion, Scan, ChannelClosed,
    DeleteTopic, RegisterTopic, WipeWritePerm, AddWritePerm)}
