"""What every request handler of `NameServerProcessor` shares, and what it hands its host.

A handler is ``(ctx, request, fields, channel) -> Outcome``: ``ctx`` is the processor seen
through `Context` (the manager, the KV store, the settings, the notices), ``fields`` the
request's ext fields read with Java's parsing (`Fields`), ``channel`` the connection's
handle. It answers with `ok`/`fail` or builds an `Outcome`: the response, channels to
close, `Notification` s to send. Java: ``DefaultRequestProcessor``'s helpers and
``RemotingCommand.createResponseCommand``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Literal, Protocol

import attrs

from ..._errors import InvalidRequest
from ..._frozen import dict_of
from ..._messages import (
    BrokerMemberGroup,
    ClusterInfo,
    ExpiredBroker,
    MinBrokerIdChanged,
    RegisterResult,
    Registration,
    RoutingConfig,
    TopicList,
    VersionAnswer,
)
from ..._values import DataVersion, QueueData, TopicRouteData
from ..wire._codec import FLAG_ONEWAY, RemotingCommand
from ..wire._codes import CURRENT_VERSION, RequestCode, ResponseCode
from ._kv import KVStore
from ._namesrv_config import NamesrvConfig

__all__ = ["Context", "Fields", "Notices", "Notification", "Outcome", "RouteManager", "answer",
           "fail", "ignored", "null_field", "ok"]

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

#: How an accepted REGISTER_BROKER relates to the broker's previous one, for the host's log.
Registered = Literal["first", "changed", "unchanged"]


@attrs.frozen(kw_only=True)
class Notification:
    """A oneway request the host should send to ``addr`` (a broker's listen address).

    Java sends NOTIFY_MIN_BROKER_ID_CHANGE over a fresh client connection with a 300 ms
    timeout (``RouteInfoManager.notifyMinBrokerIdChanged``); losing one is harmless.
    A plain value: building one is O(1).
    """

    addr: str
    command: RemotingCommand


@attrs.frozen(kw_only=True)
class Outcome:
    """What the host must do after one `NameServerProcessor` call.

    ``response`` is None for oneway requests and for incoming responses. ``close`` lists
    channels to close (expired brokers). ``removed`` is for logging. ``error`` is an
    unexpected exception turned into SYSTEM_ERROR, for the host to log. ``registered``
    says how an accepted REGISTER_BROKER relates to the broker's previous registration
    (``first``, ``changed`` body, ``unchanged``; None for any other request), for the
    host's log. A plain value: building one is O(1).
    """

    response: RemotingCommand | None = None
    close: tuple[Hashable, ...] = ()
    notifications: tuple[Notification, ...] = ()
    removed: tuple[ExpiredBroker, ...] = ()
    error: Exception | None = attrs.field(default=None, eq=False)
    registered: Registered | None = None


#: `Outcome`'s slot setters in field order, for `answer` (as ``_codec._trusted`` builds a
#: command): about a third of the generated ``__init__``'s cost.
_OUTCOME_SETTERS = tuple(Outcome.__dict__[a.name].__set__ for a in attrs.fields(Outcome))
_new = object.__new__


def answer(response: RemotingCommand) -> Outcome:
    """``Outcome(response=response)``, built without the generated ``__init__``: the
    outcome of nearly every request, so it is built as cheaply as possible. O(1)."""
    out = _new(Outcome)
    s_response, s_close, s_notifications, s_removed, s_error, s_registered = _OUTCOME_SETTERS
    s_response(out, response)
    s_close(out, ())
    s_notifications(out, ())
    s_removed(out, ())
    s_error(out, None)
    s_registered(out, None)
    return out


def ok(request: RemotingCommand, *, ext: Mapping[str, str] | None = None,
       body: bytes = b"", remark: str | None = None) -> Outcome:
    """SUCCESS with ``ext`` fields, ``body`` and ``remark``. O(fields)."""
    return answer(request.make_response(ResponseCode.SUCCESS, remark, ext_fields=ext,
                                        body=body))


def null_field(name: str) -> str:
    """The remark for a missing header field, as Java words its own check. O(1)."""
    return f"the custom field <{name}> is null"


def ignored(request: RemotingCommand, reason: str, *,
            ext: Mapping[str, str] | None = None) -> Outcome:
    """SUCCESS for a write that cannot be acted on (``reason``: the missing or unparsable
    field), with nothing changed: Java answers these SUCCESS after acting on a null
    (``wipeTopicCount=0``, a delete of nothing, an unregister its queue drops). The remark
    ``nothing done: <reason>`` says why, where Java's is null. O(fields)."""
    return ok(request, ext=ext, remark=f"nothing done: {reason}")


def fail(request: RemotingCommand, code: int, remark: str) -> Outcome:
    """Response ``code`` with ``remark`` (Java's remarks, word for word). O(1)."""
    return answer(request.make_response(code, remark))


class RouteManager(Protocol):
    """What the processor needs: `routing.RouteInfoManager`, or anything with its methods
    (a ``routing.journal.JournalRecorder`` wrapping one, for example)."""

    @property
    def config(self) -> RoutingConfig: ...
    def register(self, registration: Registration) -> RegisterResult: ...
    def unregister(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   generation: int | None = None) -> bool: ...
    def query_data_version(self, *, cluster: str, broker_addr: str,
                           data_version: DataVersion) -> VersionAnswer: ...
    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool: ...
    def scan_expired(self) -> tuple[ExpiredBroker, ...]: ...
    def on_channel_closed(self, channel: Hashable | None) -> tuple[ExpiredBroker, ...]: ...
    def pickup_route(self, topic: str) -> TopicRouteData | None: ...
    def wipe_write_perm(self, broker_name: str) -> int: ...
    def add_write_perm(self, broker_name: str) -> int: ...
    def delete_topic(self, topic: str, cluster: str | None = None) -> bool: ...
    def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> None: ...
    def cluster_info(self) -> ClusterInfo: ...
    def all_topics(self) -> tuple[str, ...]: ...
    def topics_by_cluster(self, cluster: str) -> tuple[str, ...]: ...
    def system_topics(self) -> TopicList: ...
    def unit_topics(self) -> tuple[str, ...]: ...
    def has_unit_sub_topics(self) -> tuple[str, ...]: ...
    def has_unit_sub_non_unit_topics(self) -> tuple[str, ...]: ...
    def broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup: ...


class Fields:
    """Typed reads of a request's ext fields with Java's parsing (``decodeCommandCustomHeader``).

    A missing or malformed field raises `routing.InvalidRequest` naming it (the processor
    answers SYSTEM_ERROR with that remark). O(1) per read.
    """

    __slots__ = ("ext",)

    def __init__(self, request: RemotingCommand) -> None:
        #: The fields, read-only: the command's own table (a plain dict lookup per read).
        self.ext: Mapping[str, str] = dict_of(request.ext_fields)

    def text(self, name: str) -> str:
        value = self.ext.get(name)
        if value is None:
            raise InvalidRequest(null_field(name), field=name)
        return str(value)

    def given(self, name: str) -> str | None:
        """The field as sent (``""`` included), or None when it is missing."""
        value = self.ext.get(name)
        return None if value is None else str(value)

    def optional_text(self, name: str) -> str | None:
        value = self.ext.get(name)
        return value if value else None

    def long(self, name: str) -> int:
        value = self.optional_long(name)
        if value is None:
            raise InvalidRequest(null_field(name), field=name)
        return value

    def optional_long(self, name: str) -> int | None:
        raw = self.ext.get(name)
        if raw is None:
            return None
        digits = raw[1:] if raw[:1] in ("-", "+") else raw
        if not digits.isascii() or not digits.isdigit():
            raise InvalidRequest(f"the custom field <{name}> is not an integer: {raw!r:.40}",
                                 field=name, value=raw)
        value = int(raw)
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise InvalidRequest(f"the custom field <{name}> overflows a long: {raw!r:.40}",
                                 field=name, value=raw)
        return value

    def optional_bool(self, name: str) -> bool | None:
        raw = self.ext.get(name)
        return None if raw is None else raw.lower() == "true"  # Boolean.parseBoolean


class Notices:
    """NOTIFY_MIN_BROKER_ID_CHANGE commands for the host to send (Java
    ``RouteInfoManager.notifyMinBrokerIdChanged``), numbered by one opaque counter, and the
    removal notices the manager's listener hands over until the request that caused them
    takes them (one list per thread, so concurrent requests keep theirs apart).
    Thread-safe; O(1) per notice and per recipient.
    """

    def __init__(self) -> None:
        self._opaques = itertools.count(1)
        self._removals = threading.local()

    def commands(self, notices: tuple[MinBrokerIdChanged, ...]) -> tuple[Notification, ...]:
        """One oneway command per notice and recipient."""
        out = []
        for notice in notices:
            ext = {"minBrokerId": str(notice.min_broker_id), "brokerName": notice.broker_name,
                   "minBrokerAddr": notice.min_broker_addr}
            if notice.offline_broker_addr is not None:
                ext["offlineBrokerAddr"] = notice.offline_broker_addr
            if notice.ha_broker_addr is not None:
                ext["haBrokerAddr"] = notice.ha_broker_addr
            for addr in notice.recipients:
                out.append(Notification(addr=addr, command=RemotingCommand(
                    code=RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, version=CURRENT_VERSION,
                    opaque=next(self._opaques) & 0x7FFFFFFF, flag=FLAG_ONEWAY,
                    ext_fields=ext)))
        return tuple(out)

    def add_removals(self, notices: Iterable[MinBrokerIdChanged]) -> None:
        """Keep the notices of a removal (unregister, scan, channel close) for this thread."""
        pending = getattr(self._removals, "items", None)
        if pending is None:
            pending = self._removals.items = []
        pending.extend(notices)

    def take_removals(self) -> tuple[Notification, ...]:
        """The commands of the removal notices this thread kept so far; forgets them."""
        pending = getattr(self._removals, "items", None)
        if not pending:
            return ()
        self._removals.items = []
        return self.commands(tuple(pending))


class Context(Protocol):
    """What a handler may use of the processor that calls it (`NameServerProcessor`)."""

    manager: RouteManager
    kv: KVStore
    notices: Notices
    enable_all_topic_list: bool
    enable_topic_list: bool
    return_order_topic_config_to_broker: bool

    @property
    def settings(self) -> NamesrvConfig: ...
    def update_config(self, pairs: Iterable[tuple[str, str]]) -> tuple[str, ...]: ...
