"""What a served fake remembers of its TCP side: the requests it got and its connections.

`WireRequest` is one request as the endpoint saw it (manual time, code, connection, the
fault rule that hit it); `WireConnection` a snapshot of one connection (its peer, the
broker addresses it spoke for, how many requests it sent). `Connections` is the endpoint's
mutable table behind them, updated with the fake's lock held.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable
from typing import Any

import attrs

from ..remoting import Channel, RemotingCommand, RequestCode

__all__ = ["Connections", "WireConnection", "WireRequest"]

#: Requests an endpoint keeps in its log (the oldest are forgotten first).
REQUEST_LOG_SIZE = 10_000
_BROKER_CODES = frozenset({RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER,
                           RequestCode.BROKER_HEARTBEAT, RequestCode.QUERY_DATA_VERSION})


@attrs.frozen(kw_only=True)
class WireRequest:
    """One request a served fake received. ``at_ms`` is the fake's clock (manual ms),
    ``connection`` the channel id, ``fault`` the id of the rule that hit it, if any."""

    at_ms: int
    code: int
    connection: int
    opaque: int
    fault: int | None = None

    @property
    def name(self) -> str:
        """The request code's name (``GET_ROUTEINFO_BY_TOPIC``), or its number."""
        try:
            return RequestCode(self.code).name
        except ValueError:
            return str(self.code)

    def to_json(self) -> dict[str, Any]:
        return {"at_ms": self.at_ms, "code": self.code, "name": self.name,
                "connection": self.connection, "opaque": self.opaque, "fault": self.fault}


@attrs.frozen(kw_only=True)
class WireConnection:
    """A connection that sent at least one request: channel ``id``, the ``peer`` address,
    the ``language`` its first request named, the broker addresses it spoke for (from
    broker requests' ``brokerAddr``) and its request count."""

    id: int
    peer: str
    language: str
    brokers: tuple[str, ...]
    requests: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "peer": self.peer, "language": self.language,
                "brokers": list(self.brokers), "requests": self.requests}


class _Open:
    __slots__ = ("brokers", "channel", "language", "requests")

    def __init__(self, channel: Channel, language: str) -> None:
        self.channel, self.language = channel, language
        self.brokers: dict[str, None] = {}
        self.requests = 0


class Connections:
    """The endpoint's connections and request log (see the module docstring)."""

    def __init__(self) -> None:
        self._open: dict[int, _Open] = {}
        self.log: collections.deque[WireRequest] = collections.deque(maxlen=REQUEST_LOG_SIZE)

    def seen(self, request: RemotingCommand, channel: Channel) -> tuple[str, ...]:
        """Count ``request`` on ``channel``; return the broker addresses the connection
        has spoken for, this request's included."""
        entry = self._open.get(channel.id)
        if entry is None:
            entry = self._open[channel.id] = _Open(channel, request.language.name)
        entry.requests += 1
        if request.code in _BROKER_CODES:
            addr = request.ext_fields.get("brokerAddr")
            if addr:
                entry.brokers[addr] = None
        return tuple(entry.brokers)

    def record(self, at_ms: int, request: RemotingCommand, channel: Channel,
               fault: int | None) -> None:
        self.log.append(WireRequest(at_ms=at_ms, code=request.code, connection=channel.id,
                                    opaque=request.opaque, fault=fault))

    def closed(self, channel: Hashable | None) -> None:
        if isinstance(channel, Channel):
            self._open.pop(channel.id, None)

    def clear(self) -> None:
        """Every connection is gone (the name server stopped)."""
        self._open.clear()

    def of_broker(self, broker_addr: str) -> tuple[Channel, ...]:
        """The open channels that spoke for ``broker_addr``."""
        return tuple(e.channel for e in self._open.values() if broker_addr in e.brokers)

    def channel(self, connection: int) -> Channel | None:
        entry = self._open.get(connection)
        return None if entry is None else entry.channel

    def snapshot(self) -> tuple[WireConnection, ...]:
        return tuple(WireConnection(id=e.channel.id, peer=e.channel.peer, language=e.language,
                                    brokers=tuple(e.brokers), requests=e.requests)
                     for e in self._open.values())

    def describe(self, channel: Hashable | None) -> str:
        """``#3(127.0.0.1:50432)`` for a TCP channel, else its repr."""
        return str(channel) if isinstance(channel, Channel) else repr(channel)
