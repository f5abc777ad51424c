"""The calls a journal records: one frozen value per `RouteInfoManager` write operation.

Each call knows how to apply itself to a manager (`apply`), and how to write and read its
``args`` object (`encode_args` / `decode_args`). `Register` is the exception: its args
reference a topic table by id, so the recorder and the reader (which keep the table
dictionary) encode and decode it themselves.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, ClassVar, TypeAlias

import attrs

from .._errors import InvalidRequest
from .._manager import RouteInfoManager
from .._messages import (
    ExpiredBroker,
    RegisterResult,
    Registration,
    UnregisterRequest,
    VersionAnswer,
)
from .._validate import check_addr, check_int, check_name, check_topic
from .._values import DataVersion, QueueData

__all__ = [
    "AddWritePerm",
    "Call",
    "CallResult",
    "ChannelClosed",
    "DeleteTopic",
    "Heartbeat",
    "JournalChannel",
    "QueryDataVersion",
    "Register",
    "RegisterTopic",
    "Scan",
    "Unregister",
    "UnregisterMany",
    "WipeWritePerm",
    "decode_channel",
    "encode_channel",
]

Args = dict[str, Any]

#: What `Call.apply` returns: exactly what the manager method returned.
CallResult: TypeAlias = (
    RegisterResult | bool | tuple[bool, ...] | VersionAnswer | tuple[ExpiredBroker, ...]
    | int | None
)


# --------------------------------------------------------------------------- channels


@attrs.frozen(kw_only=True)
class JournalChannel:
    """Stands in, on replay, for a channel handle that JSON cannot carry as it is.

    ``str`` and ``int`` channels (and tuples of them) are written as they are and come back
    equal. Any other hashable handle is written as ``{"ref": n}``, ``n`` being numbered by
    equality within one journal, and replays as ``JournalChannel(ref=n)``: equal handles stay
    equal, different ones stay different, which is all the manager needs.
    """

    ref: int


def encode_channel(channel: Hashable | None, refs: dict[Hashable, int]) -> Any:
    """The JSON form of a channel handle. ``refs`` numbers the opaque handles. O(size)."""
    if channel is None or isinstance(channel, str):
        return channel
    if isinstance(channel, int) and not isinstance(channel, bool):
        return channel
    if isinstance(channel, tuple) and all(
            isinstance(c, str) or (isinstance(c, int) and not isinstance(c, bool))
            for c in channel):
        return {"tuple": list(channel)}
    if isinstance(channel, JournalChannel):
        return {"ref": channel.ref}
    ref = refs.get(channel)
    if ref is None:
        ref = refs[channel] = len(refs) + 1
    return {"ref": ref}


def decode_channel(value: Any) -> Hashable | None:
    """The inverse of `encode_channel`; raises `InvalidRequest` on anything else."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        if "ref" in value:
            return JournalChannel(ref=check_int("channel.ref", value["ref"], low=1))
        items = value.get("tuple")
        if isinstance(items, list) and all(
                isinstance(c, str) or (isinstance(c, int) and not isinstance(c, bool))
                for c in items):
            return tuple(items)
    raise InvalidRequest(f"channel must be null, a string, an integer, {{\"tuple\": [...]}} "
                         f"or {{\"ref\": n}}, got {value!r:.80}", field="channel", value=value)


# --------------------------------------------------------------------------- helpers


def _only(args: Mapping[str, Any], allowed: frozenset[str], op: str) -> None:
    extra = sorted(set(args) - allowed)
    if extra:
        raise InvalidRequest(f"{op}: unknown args field(s) {', '.join(map(repr, extra))}",
                             field="args")


def _need(args: Mapping[str, Any], key: str, op: str) -> Any:
    if key not in args:
        raise InvalidRequest(f"{op}: missing args field {key!r}", field=f"args.{key}")
    return args[key]


# --------------------------------------------------------------------------- calls


@attrs.frozen(kw_only=True)
class Register:
    """``register(registration)`` (REGISTER_BROKER, Java ``registerBroker``)."""

    op: ClassVar[str] = "register"
    registration: Registration

    def apply(self, manager: RouteInfoManager) -> RegisterResult:
        return manager.register(self.registration)


@attrs.frozen(kw_only=True)
class Unregister:
    """``unregister(...)`` (UNREGISTER_BROKER, applied synchronously)."""

    op: ClassVar[str] = "unregister"
    request: UnregisterRequest
    _ARGS: ClassVar[frozenset[str]] = frozenset({"broker_id", "generation"})

    def apply(self, manager: RouteInfoManager) -> bool:
        r = self.request
        return manager.unregister(cluster=r.cluster, broker_addr=r.broker_addr,
                                  broker_name=r.broker_name, broker_id=r.broker_id,
                                  generation=r.generation)

    def encode_args(self) -> Args:
        args: Args = {"broker_id": self.request.broker_id}
        if self.request.generation is not None:
            args["generation"] = self.request.generation
        return args

    @classmethod
    def decode_args(cls, args: Mapping[str, Any], cluster: Any, broker_name: Any,
                    broker_addr: Any) -> Unregister:
        _only(args, cls._ARGS, cls.op)
        return cls(request=UnregisterRequest(
            cluster=cluster, broker_addr=broker_addr, broker_name=broker_name,
            broker_id=_need(args, "broker_id", cls.op),
            generation=args.get("generation")))


def _request_json(r: UnregisterRequest) -> Args:
    doc: Args = {"cluster": r.cluster, "broker_name": r.broker_name,
                 "broker_addr": r.broker_addr, "broker_id": r.broker_id}
    if r.generation is not None:
        doc["generation"] = r.generation
    return doc


_REQUEST_KEYS = frozenset({"cluster", "broker_name", "broker_addr", "broker_id", "generation"})


@attrs.frozen(kw_only=True)
class UnregisterMany:
    """``unregister_many(requests)``: one batch, one lock, one route event (Java's batch
    unregistration worker)."""

    op: ClassVar[str] = "unregister_many"
    requests: tuple[UnregisterRequest, ...]

    def apply(self, manager: RouteInfoManager) -> tuple[bool, ...]:
        return manager.unregister_many(self.requests)

    def encode_args(self) -> Args:
        return {"requests": [_request_json(r) for r in self.requests]}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any]) -> UnregisterMany:
        _only(args, frozenset({"requests"}), cls.op)
        items = _need(args, "requests", cls.op)
        if not isinstance(items, list):
            raise InvalidRequest("unregister_many: args.requests must be a list",
                                 field="args.requests")
        requests = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidRequest(f"unregister_many: args.requests[{i}] must be an object",
                                     field=f"args.requests[{i}]")
            _only(item, _REQUEST_KEYS, f"unregister_many requests[{i}]")
            requests.append(UnregisterRequest(
                cluster=_need(item, "cluster", cls.op),
                broker_addr=_need(item, "broker_addr", cls.op),
                broker_name=_need(item, "broker_name", cls.op),
                broker_id=_need(item, "broker_id", cls.op),
                generation=item.get("generation")))
        return cls(requests=tuple(requests))

    def common(self, field: str) -> str | None:
        """The value of ``field`` shared by every request, or None (top-level column)."""
        values = {getattr(r, field) for r in self.requests}
        return values.pop() if len(values) == 1 else None


@attrs.frozen(kw_only=True)
class Heartbeat:
    """``heartbeat(cluster=, broker_addr=)`` (BROKER_HEARTBEAT)."""

    op: ClassVar[str] = "heartbeat"
    cluster: str
    broker_addr: str

    def apply(self, manager: RouteInfoManager) -> bool:
        return manager.heartbeat(cluster=self.cluster, broker_addr=self.broker_addr)

    def encode_args(self) -> Args:
        return {}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any], cluster: Any, broker_addr: Any) -> Heartbeat:
        _only(args, frozenset(), cls.op)
        return cls(cluster=check_name("cluster", cluster),
                   broker_addr=check_addr("broker_addr", broker_addr))


@attrs.frozen(kw_only=True)
class QueryDataVersion:
    """``query_data_version(cluster=, broker_addr=, data_version=)`` (QUERY_DATA_VERSION)."""

    op: ClassVar[str] = "query_data_version"
    cluster: str
    broker_addr: str
    data_version: DataVersion

    def apply(self, manager: RouteInfoManager) -> VersionAnswer:
        return manager.query_data_version(cluster=self.cluster, broker_addr=self.broker_addr,
                                          data_version=self.data_version)

    def encode_args(self) -> Args:
        return {"data_version": self.data_version.to_json()}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any], cluster: Any,
                    broker_addr: Any) -> QueryDataVersion:
        _only(args, frozenset({"data_version"}), cls.op)
        version = _need(args, "data_version", cls.op)
        if not isinstance(version, Mapping):
            raise InvalidRequest("query_data_version: args.data_version must be an object",
                                 field="args.data_version")
        return cls(cluster=check_name("cluster", cluster),
                   broker_addr=check_addr("broker_addr", broker_addr),
                   data_version=DataVersion.from_json(version))


@attrs.frozen(kw_only=True)
class Scan:
    """``scan_expired()``: the host's periodic scan (Java ``scanNotActiveBroker``, 5 000 ms)."""

    op: ClassVar[str] = "scan"

    def apply(self, manager: RouteInfoManager) -> tuple[ExpiredBroker, ...]:
        return manager.scan_expired()

    def encode_args(self) -> Args:
        return {}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any]) -> Scan:
        _only(args, frozenset(), cls.op)
        return cls()


@attrs.frozen(kw_only=True)
class ChannelClosed:
    """``on_channel_closed(channel)`` (Java ``BrokerHousekeepingService``)."""

    op: ClassVar[str] = "channel_closed"
    channel: Hashable | None

    def apply(self, manager: RouteInfoManager) -> tuple[ExpiredBroker, ...]:
        return manager.on_channel_closed(self.channel)

    def encode_args(self, refs: dict[Hashable, int]) -> Args:
        return {"channel": encode_channel(self.channel, refs)}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any]) -> ChannelClosed:
        _only(args, frozenset({"channel"}), cls.op)
        return cls(channel=decode_channel(_need(args, "channel", cls.op)))


@attrs.frozen(kw_only=True)
class DeleteTopic:
    """``delete_topic(topic, cluster)`` (DELETE_TOPIC_IN_NAMESRV)."""

    op: ClassVar[str] = "delete_topic"
    topic: str
    cluster: str | None = None

    def apply(self, manager: RouteInfoManager) -> bool:
        return manager.delete_topic(self.topic, self.cluster)

    def encode_args(self) -> Args:
        return {"topic": self.topic}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any], cluster: Any) -> DeleteTopic:
        _only(args, frozenset({"topic"}), cls.op)
        return cls(topic=check_topic("topic", _need(args, "topic", cls.op)),
                   cluster=None if cluster is None else check_name("cluster", cluster))


@attrs.frozen(kw_only=True)
class RegisterTopic:
    """``register_topic(topic, queue_datas)`` (REGISTER_TOPIC_IN_NAMESRV)."""

    op: ClassVar[str] = "register_topic"
    topic: str
    queue_datas: tuple[QueueData, ...]

    def apply(self, manager: RouteInfoManager) -> None:
        manager.register_topic(self.topic, self.queue_datas)

    def encode_args(self) -> Args:
        return {"topic": self.topic, "queue_datas": [q.to_json() for q in self.queue_datas]}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any]) -> RegisterTopic:
        _only(args, frozenset({"topic", "queue_datas"}), cls.op)
        rows = _need(args, "queue_datas", cls.op)
        if not isinstance(rows, list):
            raise InvalidRequest("register_topic: args.queue_datas must be a list",
                                 field="args.queue_datas")
        return cls(topic=check_topic("topic", _need(args, "topic", cls.op)),
                   queue_datas=tuple(QueueData.from_json(r) for r in rows))

    def common_broker_name(self) -> str | None:
        names = {q.broker_name for q in self.queue_datas}
        return names.pop() if len(names) == 1 else None


@attrs.frozen(kw_only=True)
class WipeWritePerm:
    """``wipe_write_perm(broker_name)`` (WIPE_WRITE_PERM_OF_BROKER)."""

    op: ClassVar[str] = "wipe_write_perm"
    broker_name: str

    def apply(self, manager: RouteInfoManager) -> int:
        return manager.wipe_write_perm(self.broker_name)

    def encode_args(self) -> Args:
        return {}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any], broker_name: Any) -> WipeWritePerm:
        _only(args, frozenset(), cls.op)
        return cls(broker_name=check_name("broker_name", broker_name))


@attrs.frozen(kw_only=True)
class AddWritePerm:
    """``add_write_perm(broker_name)`` (ADD_WRITE_PERM_OF_BROKER)."""

    op: ClassVar[str] = "add_write_perm"
    broker_name: str

    def apply(self, manager: RouteInfoManager) -> int:
        return manager.add_write_perm(self.broker_name)

    def encode_args(self) -> Args:
        return {}

    @classmethod
    def decode_args(cls, args: Mapping[str, Any], broker_name: Any) -> AddWritePerm:
        _only(args, frozenset(), cls.op)
        return cls(broker_name=check_name("broker_name", broker_name))


#: Any recorded call.
Call: TypeAlias = (
    Register | Unregister | UnregisterMany | Heartbeat | QueryDataVersion | Scan
    | ChannelClosed | DeleteTopic | RegisterTopic | WipeWritePerm | AddWritePerm
)

#: Operation name → call class.
CALLS: dict[str, type[Call]] = {c.op: c for c in (
    Register, Unregister, UnregisterMany, Heartbeat, QueryDataVersion, Scan, ChannelClosed,
    DeleteTopic, RegisterTopic, WipeWritePerm, AddWritePerm)}
