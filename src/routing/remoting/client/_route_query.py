"""A small client for route queries: GET_ROUTEINFO_BY_TOPIC against any name server.

`query_route` (blocking, a socket) and `query_route_async` (asyncio) open one connection,
send one request, read its answer and close: what a RocketMQ client does to learn where a
topic lives (Java ``MQClientAPIImpl.getTopicRouteInfoFromNameServer``), built on this
package's codec (`encode`, `FrameDecoder`, `decode_route`). Cost: one round trip, O(route
size) to decode.

>>> from routing import remoting as rm
>>> try:
...     rm.query_route("127.0.0.1", 1, "TopicTest", timeout_ms=500)
... except rm.RouteQueryError as exc:
...     print(exc)  # doctest: +ELLIPSIS
cannot reach the name server 127.0.0.1:1: ...
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time

from ..._errors import RoutingError
from ..._values import TopicRouteData
from ..wire._bodies import decode_route
from ..wire._codec import ProtocolError, RemotingCommand, encode
from ..wire._codes import CURRENT_VERSION, RequestCode, ResponseCode
from ..wire._frame_decoder import FrameDecoder

__all__ = ["RouteQueryError", "query_route", "query_route_async", "route_request"]

_opaques = itertools.count(1)


class RouteQueryError(RoutingError, OSError):
    """A route query got no usable answer: the name server could not be reached, did not
    answer within the timeout, closed the connection, sent what is not a route, or answered
    an error (``code`` and ``remark`` are then the answer's; Java's "name server not ready"
    is SYSTEM_ERROR). ``address`` is ``HOST:PORT``."""

    def __init__(self, message: str, *, address: str, code: int | None = None,
                 remark: str | None = None) -> None:
        super().__init__(message)
        self.address, self.code, self.remark = address, code, remark


def route_request(topic: str, *, opaque: int | None = None) -> RemotingCommand:
    """The GET_ROUTEINFO_BY_TOPIC request for ``topic`` (at the current protocol version,
    so the answer is standard JSON)."""
    return RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, version=CURRENT_VERSION,
                           opaque=next(_opaques) & 0x7FFFFFFF if opaque is None else opaque,
                           ext_fields={"topic": topic})


def _answer(response: RemotingCommand, address: str, topic: str) -> TopicRouteData | None:
    if response.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    if response.code != ResponseCode.SUCCESS:
        try:
            name = ResponseCode(response.code).name
        except ValueError:
            name = str(response.code)
        raise RouteQueryError(f"{address} answered {name} for topic {topic!r}: "
                              f"{response.remark or '(no remark)'}", address=address,
                              code=response.code, remark=response.remark)
    try:
        return decode_route(response.body)
    except RoutingError as exc:
        raise RouteQueryError(f"{address} sent a route for {topic!r} that does not decode: "
                              f"{exc}", address=address, code=response.code) from None


def query_route(host: str, port: int, topic: str, *,
                timeout_ms: int = 3_000) -> TopicRouteData | None:
    """Ask the name server at ``host:port`` for ``topic``'s route: the `TopicRouteData`, or
    None when it has none (TOPIC_NOT_EXIST). Blocks for at most ``timeout_ms`` (ms, connect
    included). Raises `RouteQueryError` (a `RoutingError` and an `OSError`) when there is
    no usable answer; a bad topic name is answered by the server (SYSTEM_ERROR)."""
    address = f"{host}:{port}"
    deadline = time.monotonic() + timeout_ms / 1000
    request = route_request(topic)
    try:
        conn = socket.create_connection((host, port), timeout=timeout_ms / 1000)
    except OSError as exc:
        raise RouteQueryError(f"cannot reach the name server {address}: "
                              f"{exc.strerror or exc}", address=address) from None
    with conn:
        decoder = FrameDecoder()
        try:
            conn.sendall(encode(request))
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RouteQueryError(f"no answer from {address} within {timeout_ms} ms",
                                          address=address)
                conn.settimeout(left)
                data = conn.recv(65_536)
                if not data:
                    raise RouteQueryError(f"{address} closed the connection before "
                                          f"answering", address=address)
                for command in decoder.feed(data):
                    if command.is_response and command.opaque == request.opaque:
                        return _answer(command, address, topic)
        except TimeoutError:  # the socket's own timeout
            raise RouteQueryError(f"no answer from {address} within {timeout_ms} ms",
                                  address=address) from None
        except ProtocolError as exc:
            raise RouteQueryError(f"{address} sent a bad frame: {exc}",
                                  address=address) from None
        except RouteQueryError:
            raise
        except OSError as exc:
            raise RouteQueryError(f"the connection to {address} failed: "
                                  f"{exc.strerror or exc}", address=address) from None


async def query_route_async(host: str, port: int, topic: str, *,
                            timeout_ms: int = 3_000) -> TopicRouteData | None:
    """`query_route` on the running event loop (one connection, closed before returning)."""
    address = f"{host}:{port}"
    request = route_request(topic)
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError as exc:
                raise RouteQueryError(f"cannot reach the name server {address}: "
                                      f"{exc.strerror or exc}", address=address) from None
            try:
                writer.write(encode(request))
                await writer.drain()
                decoder = FrameDecoder()
                while data := await reader.read(65_536):
                    for command in decoder.feed(data):
                        if command.is_response and command.opaque == request.opaque:
                            return _answer(command, address, topic)
                raise RouteQueryError(f"{address} closed the connection before answering",
                                      address=address)
            except ProtocolError as exc:
                raise RouteQueryError(f"{address} sent a bad frame: {exc}",
                                      address=address) from None
            except (ConnectionError, OSError) as exc:
                if isinstance(exc, RouteQueryError):
                    raise
                raise RouteQueryError(f"the connection to {address} failed: "
                                      f"{exc.strerror or exc}", address=address) from None
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except TimeoutError:
        raise RouteQueryError(f"no answer from {address} within {timeout_ms} ms",
                              address=address) from None
