"""A `FakeNameServer` on the wire: RocketMQ's remoting protocol in front of the fake.

`serve_on_wire` starts one background thread with its own event loop and, for each fake
given, a `routing.remoting.NameServerHost` (the host of ``routing serve``) on a free
loopback port. The host answers through a `NameServerProcessor` whose route manager is the
fake's (`routing.testing._wire_view`), so a broker registering over TCP lands in the same
tables and event log as a `FakeBroker`. The host runs no expiry timer of its own: the
fake's clock does, and each scan it runs hands its outcome to the host (channels of the
expired brokers closed, as ``routing serve`` does). One host, two clocks.

The endpoint (`WireEndpoint`, ``ns.wire``) adds what only a wire has: its address, the
connections and requests it saw, faults on demand (`routing.testing._faults`), a frozen
view, replies held in manual time. ``ns.stop()`` closes the port and every connection,
``ns.start()`` listens again on the same port with empty tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import ipaddress
import itertools
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

import attrs

from .._errors import InvalidRequest
from .._messages import ExpiredBroker
from .._values import TopicRouteData
from ..remoting import (
    Channel,
    NameServerHost,
    NameServerProcessor,
    Outcome,
    RemotingCommand,
    RequestCode,
    ResponseCode,
)
from ._errors import WaitTimedOut
from ._fake_clock import FakeClock
from ._faults import Fault, Faults
from ._wire_face import WireFace
from ._wire_records import Connections, WireConnection, WireRequest
from ._wire_view import FrozenView, WireManager

if TYPE_CHECKING:
    from ._fake import FakeNameServer

__all__ = ["Wire", "WireEndpoint", "WireError", "check_loopback", "serve_on_wire"]

_T = TypeVar("_T")
#: Java's remark when a request is refused for flow control (``NettyRemotingAbstract``).
BUSY_REMARK = "[OVERLOAD]system busy, start flow control for a while"
#: How long a call from the test's thread waits for the server loop (s).
_LOOP_TIMEOUT_S = 30.0


class WireError(InvalidRequest):
    """Serving a fake on the wire was asked something it cannot do (names field and value)."""


def check_loopback(host: str, *, allow_remote: bool, what: str = "host") -> None:
    """Raise `WireError` unless ``host`` is a loopback address (or ``allow_remote``): a fake
    name server, and above all its control API, must not be reachable from elsewhere by
    accident."""
    if allow_remote:
        return
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise WireError(f"{what} {host!r} is not a loopback address; pass allow_remote "
                        "(--allow-remote) to listen there on purpose", field=what, value=host)


class _WireProcessor(NameServerProcessor):
    """`NameServerProcessor` over the fake's tables, with the endpoint's faults and lock."""

    def __init__(self, endpoint: WireEndpoint) -> None:
        super().__init__(endpoint._manager)
        self._endpoint = endpoint

    def process(self, request: RemotingCommand, channel: Hashable | None = None) -> Outcome:
        return self._endpoint._process(request, channel, super().process)

    def channel_closed(self, channel: Hashable | None) -> Outcome:
        with self._endpoint.ns._lock:
            self._endpoint._connections.closed(channel)
            outcome = super().channel_closed(channel)
        self._endpoint._changed()
        return outcome


@attrs.frozen(order=True)
class _Held:
    due_ms: int
    seq: int
    channel: Channel = attrs.field(eq=False, order=False)
    response: RemotingCommand = attrs.field(eq=False, order=False)


class WireEndpoint(WireFace):
    """One fake name server served over TCP; ``ns.wire`` while it is served.

    ``address`` is ``host:port`` for clients and brokers. ``faults`` takes rules
    (`Faults.add`); `freeze`/`thaw` fix what clients read; `connections` and `requests`
    show what arrived; `disconnect` closes a broker's connection; `wait_for` waits (in
    wall time, bounded) for something a real client or broker does. Everything is safe
    to call from the test's thread.
    """

    def __init__(self, wire: Wire, ns: FakeNameServer, host: str, port: int) -> None:
        self.ns = ns
        self.wire = wire
        self.host, self.port = host, port
        self.faults = Faults(lock=ns._lock, log=lambda text: ns._log("admin", text))
        self._connections = Connections()
        self._manager = WireManager(ns, self._connections.describe)
        self._host: NameServerHost | None = None
        self._held: list[_Held] = []
        self._seq = itertools.count()
        self._change = threading.Condition()
        self._closed = False

    def __repr__(self) -> str:
        return f"<WireEndpoint {self.ns.name} {self.address}>"

    @property
    def address(self) -> str:
        """``host:port`` to give clients and brokers (``namesrvAddr``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    # ------------------------------------------------------------------ views

    @property
    def frozen(self) -> bool:
        """Whether clients read a frozen view (`freeze`)."""
        return self._manager.frozen is not None

    def freeze(self) -> None:
        """From now on clients read the routes, cluster info and topic lists as they are
        now, while brokers' registrations and expiries still change the tables underneath
        (and ``ns.route``/``ns.assert_route`` show those): one side of a split brain. O(topics)."""
        with self.ns._lock:
            if self._manager.frozen is None:
                self._manager.frozen = FrozenView(self.ns)
                self.ns._log("frozen", f"clients read the view of {self.ns.now_ms} ms "
                             f"({len(self._manager.frozen.routes)} topic(s))")

    def thaw(self) -> None:
        """Clients read the live tables again."""
        with self.ns._lock:
            if self._manager.frozen is not None:
                self._manager.frozen = None
                self.ns._log("thawed", "clients read the live tables")

    def view_route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC as a TCP client gets it now: the frozen view's route
        while frozen, else the live one (a `routing.TopicRouteData` or None)."""
        with self.ns._lock:
            return self._manager.pickup_route(topic)

    def connections(self) -> tuple[WireConnection, ...]:
        """The open connections that sent at least one request, oldest first."""
        with self.ns._lock:
            return self._connections.snapshot()

    def requests(self, code: int | None = None) -> tuple[WireRequest, ...]:
        """The requests received (the last 10 000), oldest first; only ``code``'s if given."""
        with self.ns._lock:
            log = tuple(self._connections.log)
        return log if code is None else tuple(r for r in log if r.code == code)

    @property
    def held(self) -> int:
        """Replies held by ``delay`` faults, waiting for the clock."""
        with self.ns._lock:
            return len(self._held)

    def disconnect(self, broker: str | None = None, *, connection: int | None = None) -> int:
        """Close the connection(s) that spoke for ``broker`` (an address), or the one with
        id ``connection``: the name server removes their brokers at once, as for a broker
        whose channel dropped. Returns how many were closed."""
        if (broker is None) == (connection is None):
            raise WireError("pass either broker or connection", field="broker", value=broker)
        with self.ns._lock:
            if broker is not None:
                channels = self._connections.of_broker(broker)
            else:
                assert connection is not None
                found = self._connections.channel(connection)
                channels = () if found is None else (found,)
            for channel in channels:
                self.ns._log("admin", f"test closes connection {channel}", broker)
        for channel in channels:
            self.wire._post(self._close_channel, channel)
        return len(channels)

    def wait_for(self, condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
        """Wait until ``condition()`` is true, checking it after every request and closed
        connection (wall time, at most ``timeout_s``; then `WaitTimedOut`, a
        ``TimeoutError``). For what real processes do on their own (a broker registering,
        a client asking)."""
        deadline = time.monotonic() + timeout_s
        with self._change:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimedOut(f"{self.ns.name}: condition still false after "
                                       f"{timeout_s} s\n{self.ns.event_log(last=12)}",
                                       field="timeout_s", value=timeout_s)
                self._change.wait(min(left, 0.5))

    # ------------------------------------------------------------------ request path

    def _process(self, request: RemotingCommand, channel: Hashable | None,
                 process: Callable[[RemotingCommand, Hashable | None], Outcome]) -> Outcome:
        ns = self.ns
        if request.is_response or not isinstance(channel, Channel):
            return process(request, channel)
        with ns._lock:
            if not ns.running:  # a stopped name server answers nothing
                return Outcome(close=(channel,))
            brokers = self._connections.seen(request, channel)
            fault = self.faults.match(request.code, channel.id, brokers)
            self._connections.record(ns.now_ms, request, channel,
                                     None if fault is None else fault.id)
            outcome = (process(request, channel) if fault is None
                       else self._inject(fault, request, channel, process))
        self._changed()
        return outcome

    def _inject(self, fault: Fault, request: RemotingCommand, channel: Channel,
                process: Callable[[RemotingCommand, Hashable | None], Outcome]) -> Outcome:
        what = _name(RequestCode, request.code)
        addr = request.ext_fields.get("brokerAddr") or None
        action = fault.action
        effect = {"busy": "answered SYSTEM_BUSY", "answer": "answered "
                  + _name(ResponseCode, fault.response_code), "drop_request": "lost",
                  "close": "connection closed", "drop_reply": "applied, reply dropped",
                  "delay": f"applied, reply held until {self.ns.now_ms + fault.delay_ms} ms"}
        outcome: Outcome
        if action == "busy":
            outcome = Outcome(response=request.make_response(
                ResponseCode.SYSTEM_BUSY, fault.remark or BUSY_REMARK))
        elif action == "answer":
            outcome = Outcome(response=request.make_response(fault.response_code, fault.remark))
        elif action == "drop_request":
            outcome = Outcome()
        elif action == "close":
            outcome = Outcome(close=(channel,))
        else:  # drop_reply, delay: the request is applied
            applied = process(request, channel)
            if action == "delay" and applied.response is not None:
                heapq.heappush(self._held, _Held(self.ns.now_ms + fault.delay_ms,
                                                 next(self._seq), channel, applied.response))
            outcome = attrs.evolve(applied, response=None)
        self.ns._log("fault", f"{what} from {channel}: {effect[action]} (rule {fault.id})",
                     addr)
        return outcome

    def _changed(self) -> None:
        with self._change:
            self._change.notify_all()

    # ------------------------------------------------------------------ the clock's work

    def _next_due_ms(self) -> int | None:
        return self._held[0].due_ms if self._held else None

    def _run_registrations_due(self, now_ms: int) -> None:
        return None

    def _run_scan_due(self, now_ms: int) -> None:
        while self._held and self._held[0].due_ms <= now_ms:
            held = heapq.heappop(self._held)
            self.ns._log("fault", f"held reply {_name(ResponseCode, held.response.code)} to "
                                  f"{held.channel} released")
            self.wire._post(self._send, held.channel, held.response)

    # ------------------------------------------------------------------ FakeNameServer hooks

    def _expired(self, gone: tuple[ExpiredBroker, ...]) -> None:
        """The fake's scan removed ``gone``: the host closes the TCP ones' channels."""
        tcp = tuple(e for e in gone if isinstance(e.channel, Channel))
        if tcp:
            channels = tuple(dict.fromkeys(e.channel for e in tcp))
            self.wire._post(self._scanned, Outcome(close=channels, removed=tcp))

    def _stopped(self) -> None:
        """``ns.stop()``: the port closes and every connection drops (nothing answered)."""
        self._held.clear()
        self._connections.clear()
        self._manager.frozen = None
        self.wire._run_after(self.ns, self._close_host())

    def _started(self) -> None:
        """``ns.start()``: listen again on the same port."""
        self.wire._run_after(self.ns, self._open_host())

    # ------------------------------------------------------------------ on the loop

    async def _open_host(self) -> None:
        host = NameServerHost(_WireProcessor(self), host=self.host, port=self.port,
                              scan_interval_ms=None, idle_timeout_ms=None, grace_ms=0)
        await host.start()
        self.host, self.port = host.address
        self._host = host

    async def _close_host(self) -> None:
        host, self._host = self._host, None
        if host is not None:
            await host.close()

    def _scanned(self, outcome: Outcome) -> None:
        if self._host is not None:
            self._host.scanned(outcome)

    def _send(self, channel: Channel, response: RemotingCommand) -> None:
        if self._host is not None:
            self._host.send(channel, response)

    def _close_channel(self, channel: Channel) -> None:
        if self._host is not None:
            self._host.close_channel(channel, "test")


class Wire(Sequence[WireEndpoint]):
    """The background thread and event loop serving fakes (`serve_on_wire`): a sequence of
    `WireEndpoint`, one per fake, in the order served."""

    def __init__(self, *, host: str = "127.0.0.1", allow_remote: bool = False) -> None:
        check_loopback(host, allow_remote=allow_remote)
        self.host = host
        self._endpoints: list[WireEndpoint] = []
        self._loop = asyncio.new_event_loop()
        running = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(running,),
                                        name="routing-fake-wire", daemon=True)
        self._thread.start()
        running.wait()

    def _run(self, running: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(running.set)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    @overload
    def __getitem__(self, index: int) -> WireEndpoint: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[WireEndpoint]: ...

    def __getitem__(self, index: int | slice) -> WireEndpoint | Sequence[WireEndpoint]:
        return self._endpoints[index]

    def __len__(self) -> int:
        return len(self._endpoints)

    @property
    def address(self) -> str:
        """The first endpoint's ``host:port``."""
        return self._endpoints[0].address

    @property
    def namesrv_addr(self) -> str:
        """Every endpoint's address joined with ``;`` (Java's ``namesrvAddr``)."""
        return ";".join(e.address for e in self._endpoints)

    def serve(self, ns: FakeNameServer, port: int = 0) -> WireEndpoint:
        """Serve ``ns`` on ``port`` (0: a free one); sets and returns ``ns.wire``."""
        if not isinstance(ns.clock, FakeClock):
            raise WireError("a fake served on the wire needs a FakeClock (the default); got "
                            f"{type(ns.clock).__name__}", field="clock", value=ns.clock)
        if ns.wire is not None:
            raise WireError(f"{ns.name} is already served at {ns.wire.address}",
                            field="ns", value=ns.name)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65_535:
            raise WireError(f"port must be 0..65535, got {port!r}", field="port", value=port)
        endpoint = WireEndpoint(self, ns, self.host, port)
        if ns.running:
            self._call(endpoint._open_host())
        with ns._lock:
            ns.wire = endpoint
            ns.clock._attach(endpoint)
        self._endpoints.append(endpoint)
        return endpoint

    def close(self) -> None:
        """Close every endpoint's port and connections, detach them, stop the thread."""
        if not self._thread.is_alive():
            return
        for endpoint in self._endpoints:
            with endpoint.ns._lock:
                endpoint.ns.wire = None
                endpoint._held.clear()
            with contextlib.suppress(Exception):
                self._call(endpoint._close_host())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_LOOP_TIMEOUT_S)

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ thread plumbing

    def _call(self, work: Any) -> Any:
        """Run a coroutine on the loop and wait for it (never from the loop itself)."""
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(_LOOP_TIMEOUT_S)

    def _post(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop soon; do not wait."""
        self._loop.call_soon_threadsafe(fn, *args)

    def _run_after(self, ns: FakeNameServer, work: Any) -> None:
        """Start a coroutine on the loop now and wait for it once the fake's lock is let
        go (the loop may need that lock to finish the requests in flight)."""
        future = asyncio.run_coroutine_threadsafe(work, self._loop)
        if threading.current_thread() is self._thread:
            return
        ns._lock.defer(lambda: future.result(_LOOP_TIMEOUT_S))


@contextlib.contextmanager
def serve_on_wire(*servers: FakeNameServer, host: str = "127.0.0.1",
                  ports: Sequence[int] | None = None,
                  allow_remote: bool = False) -> Iterator[Wire]:
    """Serve each fake over RocketMQ's remoting protocol, one port each, for the block.

    >>> from routing.testing import FakeNameServer, serve_on_wire
    >>> ns = FakeNameServer()
    >>> with serve_on_wire(ns) as wire:
    ...     ns.wire is wire[0] and ns.wire.address.startswith("127.0.0.1:")
    True
    >>> ns.wire is None
    True

    ``ports`` (default: free ones) pairs with ``servers``. ``host`` must be a loopback
    address unless ``allow_remote``. Fakes sharing a clock share one lock and one thread.
    """
    if not servers:
        raise WireError("serve_on_wire needs at least one FakeNameServer", field="servers",
                        value=())
    chosen = list(ports) if ports is not None else [0] * len(servers)
    if len(chosen) != len(servers):
        raise WireError(f"{len(servers)} server(s) but {len(chosen)} port(s)", field="ports",
                        value=chosen)
    wire = Wire(host=host, allow_remote=allow_remote)
    try:
        for ns, port in zip(servers, chosen, strict=True):
            wire.serve(ns, port)
        yield wire
    finally:
        wire.close()


def _name(kind: type[RequestCode] | type[ResponseCode], code: int) -> str:
    try:
        return kind(code).name
    except ValueError:
        return str(code)
