"""The ``args`` object of each journal line: how a call (`routing._calls`) is written and read.

The calls themselves are the core's (one model, shared with the test kit); this module is
the journal's JSON form of them, version 1 of the format (``docs/journal.md``). `Register`
is the exception: its args reference a topic table by id, so the recorder and the reader
(which keep the table dictionary) encode and decode it themselves. Every decoder raises
`InvalidRequest` naming the field and the value; the reader turns it into the line's
rejection reason. Cost: O(size of the args) each way.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import attrs

from .._calls import (
    AddWritePerm,
    Call,
    ChannelClosed,
    DeleteTopic,
    Heartbeat,
    QueryDataVersion,
    RegisterTopic,
    Scan,
    Unregister,
    UnregisterMany,
    WipeWritePerm,
)
from .._errors import InvalidRequest
from .._messages import UnregisterRequest
from .._validate import check_addr, check_int, check_name, check_topic
from .._values import DataVersion, QueueData

__all__ = [
    "JournalChannel",
    "common_broker_name",
    "common_value",
    "decode_args",
    "decode_channel",
    "encode_args",
    "encode_channel",
]

Args = dict[str, Any]


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


def _plain(value: object) -> bool:
    """A ``str`` or an ``int`` that is not a ``bool``: a channel JSON carries as it is."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def encode_channel(channel: Hashable | None, refs: dict[Hashable, int]) -> Any:
    """The JSON form of a channel handle. ``refs`` numbers the opaque handles. O(size)."""
    if channel is None or _plain(channel):
        return channel
    if isinstance(channel, tuple) and all(map(_plain, channel)):
        return {"tuple": list(channel)}
    if isinstance(channel, JournalChannel):
        return {"ref": channel.ref}
    ref = refs.get(channel)
    if ref is None:
        ref = refs[channel] = len(refs) + 1
    return {"ref": ref}


def decode_channel(value: Any) -> Hashable | None:
    """The inverse of `encode_channel`; raises `InvalidRequest` on anything else."""
    if value is None or _plain(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, Mapping) and len(value) == 1:
        if "ref" in value:
            return JournalChannel(ref=check_int("channel.ref", value["ref"], low=1))
        items = value.get("tuple")
        if isinstance(items, list) and all(map(_plain, items)):
            return tuple(items)
    raise InvalidRequest(f"channel must be null, a string, an integer, {{\"tuple\": [...]}} "
                         f"or {{\"ref\": n}}, got {value!r:.80}", field="channel", value=value)


# --------------------------------------------------------------------------- writing


def _request_json(r: UnregisterRequest) -> Args:
    doc: Args = {"cluster": r.cluster, "broker_name": r.broker_name,
                 "broker_addr": r.broker_addr, "broker_id": r.broker_id}
    if r.generation is not None:
        doc["generation"] = r.generation
    return doc


def encode_args(call: Call, refs: dict[Hashable, int]) -> Args:
    """The ``args`` object of ``call``'s line (not `Register`'s: the recorder writes its
    table). The other fields of a call are the line's top-level columns. ``refs`` numbers
    opaque channel handles (`encode_channel`)."""
    match call:
        case Unregister(request=r):
            return ({"broker_id": r.broker_id} if r.generation is None
                    else {"broker_id": r.broker_id, "generation": r.generation})
        case UnregisterMany(requests=requests):
            return {"requests": [_request_json(r) for r in requests]}
        case QueryDataVersion(data_version=version):
            return {"data_version": version.to_json()}
        case ChannelClosed(channel=channel):
            return {"channel": encode_channel(channel, refs)}
        case DeleteTopic(topic=topic):
            return {"topic": topic}
        case RegisterTopic(topic=topic, queue_datas=rows):
            return {"topic": topic, "queue_datas": [q.to_json() for q in rows]}
    return {}  # heartbeat, scan, wipe/add_write_perm: every field is a column


def common_value(call: UnregisterMany, field: str) -> str | None:
    """The value of ``field`` shared by every request of the batch, or None: the line's
    top-level column."""
    values = {getattr(r, field) for r in call.requests}
    return values.pop() if len(values) == 1 else None


def common_broker_name(call: RegisterTopic) -> str | None:
    """The group shared by every row, or None: the line's top-level ``broker_name``."""
    names = {q.broker_name for q in call.queue_datas}
    return names.pop() if len(names) == 1 else None


# --------------------------------------------------------------------------- reading


def _only(args: Mapping[str, Any], allowed: frozenset[str], op: str) -> None:
    extra = sorted(set(args) - allowed)
    if extra:
        raise InvalidRequest(f"{op}: unknown args field(s) {', '.join(map(repr, extra))}",
                             field="args", value=extra)


def _need(args: Mapping[str, Any], key: str, op: str) -> Any:
    if key not in args:
        raise InvalidRequest(f"{op}: missing args field {key!r}", field=f"args.{key}")
    return args[key]


def _of_type(value: Any, kind: type, op: str, field: str, what: str) -> Any:
    if not isinstance(value, kind):
        raise InvalidRequest(f"{op}: args.{field} must be {what}", field=f"args.{field}",
                             value=value)
    return value


_REQUEST_KEYS = frozenset({"cluster", "broker_name", "broker_addr", "broker_id", "generation"})


def _requests(args: Mapping[str, Any]) -> tuple[UnregisterRequest, ...]:
    op = UnregisterMany.op
    requests = []
    for i, item in enumerate(_of_type(_need(args, "requests", op), list, op, "requests",
                                      "a list")):
        _of_type(item, Mapping, op, f"requests[{i}]", "an object")
        _only(item, _REQUEST_KEYS, f"unregister_many requests[{i}]")
        requests.append(UnregisterRequest(
            cluster=_need(item, "cluster", op), broker_addr=_need(item, "broker_addr", op),
            broker_name=_need(item, "broker_name", op), broker_id=_need(item, "broker_id", op),
            generation=item.get("generation")))
    return tuple(requests)


#: op → the args fields it may carry (`Register`'s are the reader's).
_ARGS: dict[str, frozenset[str]] = {
    Unregister.op: frozenset({"broker_id", "generation"}),
    UnregisterMany.op: frozenset({"requests"}),
    Heartbeat.op: frozenset(),
    QueryDataVersion.op: frozenset({"data_version"}),
    Scan.op: frozenset(),
    ChannelClosed.op: frozenset({"channel"}),
    DeleteTopic.op: frozenset({"topic"}),
    RegisterTopic.op: frozenset({"topic", "queue_datas"}),
    WipeWritePerm.op: frozenset(),
    AddWritePerm.op: frozenset(),
}


def decode_args(op: str, args: Mapping[str, Any], cluster: Any, broker_name: Any,
                broker_addr: Any) -> Call:
    """The call of a line: ``op``, its ``args`` and its top-level columns (not
    ``register``: see the module). Raises `InvalidRequest` naming the field."""
    _only(args, _ARGS[op], op)
    if op == Unregister.op:
        return Unregister(request=UnregisterRequest(
            cluster=cluster, broker_addr=broker_addr, broker_name=broker_name,
            broker_id=_need(args, "broker_id", op), generation=args.get("generation")))
    if op == UnregisterMany.op:
        return UnregisterMany(requests=_requests(args))
    if op == QueryDataVersion.op:
        version = _of_type(_need(args, "data_version", op), Mapping, op, "data_version",
                           "an object")
        return QueryDataVersion(cluster=check_name("cluster", cluster),
                                broker_addr=check_addr("broker_addr", broker_addr),
                                data_version=DataVersion.from_json(version))
    if op == Heartbeat.op:
        return Heartbeat(cluster=check_name("cluster", cluster),
                         broker_addr=check_addr("broker_addr", broker_addr))
    if op == Scan.op:
        return Scan()
    if op == ChannelClosed.op:
        return ChannelClosed(channel=decode_channel(_need(args, "channel", op)))
    if op == DeleteTopic.op:
        return DeleteTopic(topic=check_topic("topic", _need(args, "topic", op)),
                           cluster=None if cluster is None else check_name("cluster", cluster))
    if op == RegisterTopic.op:
        rows = _of_type(_need(args, "queue_datas", op), list, op, "queue_datas", "a list")
        return RegisterTopic(topic=check_topic("topic", _need(args, "topic", op)),
                             queue_datas=tuple(QueueData.from_json(r) for r in rows))
    if op == WipeWritePerm.op:
        return WipeWritePerm(broker_name=check_name("broker_name", broker_name))
    return AddWritePerm(broker_name=check_name("broker_name", broker_name))
