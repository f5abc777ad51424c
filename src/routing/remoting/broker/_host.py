"""An asyncio host for `routing.heartbeat.BrokerHeartbeat`: ``routing broker``.

The host is thin. One driver task polls the heartbeat at its next deadline and performs the
actions; each request goes out on that name server's connection (one per server, opened on
demand, as Java's ``NettyRemotingClient`` does) and its response, failure or timeout is fed
back (``broker/_wire.py``'s `deliver`). Connection results feed the available list
(`BrokerHeartbeat.on_connect_result`); a server that cannot be reached is retried with
exponential backoff (``backoff_initial_ms`` doubling up to ``backoff_max_ms``), at the
scans the heartbeat asks for (`CheckNameServer`, every ``connect_timeout_ms``) or when a
request needs it. With ``listen``, the host accepts the name servers' NOTIFY_MIN_BROKER_ID_CHANGE
pushes on the broker's address. `shutdown` unregisters from every name server, one after the
other, each waiting for its answer (Java ``unregisterBrokerAll``).

Logs: logger ``routing.broker``, message ``event key=value ...`` with the fields in
``extra``, like ``routing serve``. With a ``journal`` stream, every action and outcome is
also written there as one JSON object per line.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Iterable
from typing import IO, Any

from ..._errors import InvalidRequest
from ...heartbeat import (
    Action,
    BrokerHeartbeat,
    CheckNameServer,
    MinBrokerChanged,
    SendUnregister,
    UpdateMasterAddress,
)
from ..wire._codec import ProtocolError, RemotingCommand, encode
from ..wire._codes import RequestCode, ResponseCode
from ..wire._frame_decoder import FrameDecoder
from ._wire import deliver, notify_fields, request_for

__all__ = ["BrokerHost"]

log = logging.getLogger("routing.broker")


class _Link:
    """One name server's connection: pending requests by opaque, a reader task."""

    def __init__(self, addr: str, backoff_ms: int) -> None:
        self.addr = addr
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task[None] | None = None
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.backoff_ms = backoff_ms
        self.next_attempt_s = 0.0
        self.connecting: asyncio.Future[bool] | None = None

    @property
    def up(self) -> bool:
        return self.writer is not None and not self.writer.is_closing()


class BrokerHost:
    """Drives one `BrokerHeartbeat` over TCP (see the module docstring). Use `start`, then
    `shutdown` (or ``async with``). Cost: one connection per name server, one task per
    request in flight; a registration costs O(topics) to encode, a heartbeat O(1)."""

    def __init__(self, heartbeat: BrokerHeartbeat, *, listen: tuple[str, int] | None = None,
                 compressed_register: bool = False, journal: IO[str] | None = None,
                 backoff_initial_ms: int = 200, backoff_max_ms: int = 10_000) -> None:
        self.hb = heartbeat
        self.listen = listen
        self.compressed_register = compressed_register
        self.journal = journal
        self.backoff_initial_ms, self.backoff_max_ms = backoff_initial_ms, backoff_max_ms
        self._links = {ns: _Link(ns, backoff_initial_ms) for ns in heartbeat.config.name_servers}
        self._opaque = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._wake = asyncio.Event()
        self._driver: asyncio.Task[None] | None = None
        self._server: asyncio.Server | None = None
        self._stopping = False

    async def __aenter__(self) -> BrokerHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Listen for pushes (if asked), connect to every name server, then start the
        heartbeat (its first registration goes to the servers that answered)."""
        if self.listen is not None:
            self._server = await asyncio.start_server(self._serve_push, *self.listen)
            _log(logging.INFO, "listening", addr=f"{self.listen[0]}:{self.listen[1]}")
        await asyncio.gather(*(self._ensure(link) for link in self._links.values()))
        self.perform(self.hb.start())
        self._driver = asyncio.create_task(self._drive(), name="routing-broker-driver")

    async def shutdown(self) -> None:
        """Unregister from every name server in order (3 000 ms each, failures logged), then
        close everything."""
        if self._stopping:
            return
        self._stopping = True
        if self._driver is not None:
            self._driver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._driver
        for action in self.hb.shutdown():
            await self._unregister(action)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5.0)
        for link in self._links.values():
            self._drop(link, "shutdown", report=False)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        _log(logging.INFO, "stopped", broker=self.hb.config.broker_name)

    def perform(self, actions: Iterable[Action]) -> None:
        """Carry out actions the heartbeat returned (from any call the caller made, e.g.
        `BrokerHeartbeat.update_topics`), then re-arm the driver."""
        for action in actions:
            self._record("action", action)
            if isinstance(action, UpdateMasterAddress):
                _log(logging.INFO, "master_address", master_addr=action.master_addr,
                     ha_server_addr=action.ha_server_addr, name_server=action.name_server)
            elif isinstance(action, MinBrokerChanged):
                _log(logging.INFO, "min_broker_changed", min_broker_id=action.min_broker_id,
                     min_broker_addr=action.min_broker_addr,
                     acting_as_master=action.acting_as_master)
            elif isinstance(action, CheckNameServer):
                self._spawn(self._check(self._links[action.name_server]))
            elif not self._stopping:
                self._spawn(self._send(action))
        self._wake.set()

    # ------------------------------------------------------------------ driver

    async def _drive(self) -> None:
        clock = self.hb.clock
        while True:
            self.perform(self.hb.poll())
            self._wake.clear()
            due = self.hb.next_deadline_ms()
            delay = None if due is None else max(0, due - clock.now_ms()) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, action: Action) -> None:
        ns = getattr(action, "name_server", None)
        wanted = request_for(action, next(self._opaque) & 0x7FFFFFFF,
                             compressed=self.compressed_register)
        if ns is None or wanted is None:
            return
        command, timeout_ms = wanted
        response = await self._call(self._links[ns], command, timeout_ms)
        if timeout_ms is not None:
            self._record("outcome", action, response)
            self.perform(deliver(self.hb, ns, action, response))

    async def _unregister(self, action: SendUnregister) -> None:
        wanted = request_for(action, next(self._opaque) & 0x7FFFFFFF)
        assert wanted is not None
        response = await self._call(self._links[action.name_server], *wanted)
        self._record("outcome", action, response)
        ok = response is not None and response.code == ResponseCode.SUCCESS
        _log(logging.INFO if ok else logging.WARNING, "unregistered" if ok else
             "unregister_failed", name_server=action.name_server)

    async def _call(self, link: _Link, command: RemotingCommand,
                    timeout_ms: int | None) -> RemotingCommand | None:
        """Send; wait for the response when one is expected. None on any failure."""
        if not await self._ensure(link, force=self._stopping) or link.writer is None:
            return None
        future: asyncio.Future[RemotingCommand] | None = None
        if timeout_ms is not None:
            future = asyncio.get_running_loop().create_future()
            link.pending[command.opaque] = future
        try:
            link.writer.write(encode(command))
            await link.writer.drain()
            if future is None:
                return None
            async with asyncio.timeout(timeout_ms / 1000 if timeout_ms else None):
                return await future
        except (OSError, TimeoutError, ConnectionError, ProtocolError) as exc:
            _log(logging.WARNING, "request_failed", name_server=link.addr, code=command.code,
                 error=repr(exc))
            return None
        finally:
            link.pending.pop(command.opaque, None)

    # ------------------------------------------------------------------ connections

    async def _check(self, link: _Link) -> None:
        """`CheckNameServer`: connect if needed, and say whether the server is reachable."""
        if link.up:
            self.perform(self.hb.on_connect_result(link.addr, True))
        else:
            await self._ensure(link)

    async def _ensure(self, link: _Link, *, force: bool = False) -> bool:
        """Connect unless connected (honouring the backoff unless ``force``); a new result is
        reported to the heartbeat. True when the link is up."""
        if link.up:
            return True
        if link.connecting is not None:
            return await asyncio.shield(link.connecting)
        loop = asyncio.get_running_loop()
        if not force and loop.time() < link.next_attempt_s:
            return False
        link.connecting = loop.create_future()
        host, _, port = link.addr.rpartition(":")
        try:
            async with asyncio.timeout(self.hb.config.connect_timeout_ms / 1000):
                reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except (OSError, TimeoutError, ValueError) as exc:
            link.next_attempt_s = loop.time() + link.backoff_ms / 1000
            _log(logging.WARNING, "connect_failed", name_server=link.addr, error=repr(exc),
                 retry_in_ms=link.backoff_ms)
            link.backoff_ms = min(link.backoff_ms * 2, self.backoff_max_ms)
            ok = False
        else:
            link.writer, link.backoff_ms = writer, self.backoff_initial_ms
            link.reader_task = asyncio.create_task(self._read(link, reader))
            _log(logging.INFO, "connected", name_server=link.addr)
            ok = True
        link.connecting.set_result(ok)
        link.connecting = None
        if not self._stopping:
            self.perform(self.hb.on_connect_result(link.addr, ok))
        return ok

    async def _read(self, link: _Link, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder()
        reason = "eof"
        try:
            while True:
                data = await reader.read(64 * 1024)
                if not data:
                    break
                for command in decoder.feed(data):
                    future = link.pending.get(command.opaque)
                    if command.is_response and future is not None and not future.done():
                        future.set_result(command)
        except (OSError, ProtocolError) as exc:
            reason = repr(exc)
        self._drop(link, reason, report=not self._stopping)

    def _drop(self, link: _Link, reason: str, *, report: bool) -> None:
        if link.writer is None:
            return
        link.writer.close()
        link.writer = None
        for future in link.pending.values():
            if not future.done():
                future.set_exception(ConnectionError(f"connection to {link.addr} closed"))
        if link.reader_task is not None and link.reader_task is not asyncio.current_task():
            link.reader_task.cancel()
        _log(logging.INFO, "disconnected", name_server=link.addr, reason=reason)
        if report:
            self.perform(self.hb.on_connect_result(link.addr, False))

    # ------------------------------------------------------------------ pushes

    async def _serve_push(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            while data := await reader.read(64 * 1024):
                for request in decoder.feed(data):
                    response = self._on_push(request)
                    if response is not None and not request.is_oneway:
                        writer.write(encode(response))
        except (OSError, ProtocolError):
            pass
        finally:
            writer.close()

    def _on_push(self, request: RemotingCommand) -> RemotingCommand | None:
        if request.is_response:
            return None
        if request.code != RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE:
            return request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                         f" request type {request.code} not supported")
        try:
            fields: dict[str, Any] = notify_fields(request)
            self._record("push", None, request)
            self.perform(self.hb.on_min_broker_id_changed(**fields))
        except InvalidRequest as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        return request.make_response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ journal

    def _record(self, kind: str, action: Action | None,
                response: RemotingCommand | None = None) -> None:
        if self.journal is None:
            return
        doc: dict[str, Any] = {"ts_ms": self.hb.clock.now_ms(), "kind": kind}
        if action is not None:
            doc["action"] = type(action).__name__
            for key in ("name_server", "request_id", "topic", "master_addr", "min_broker_id",
                        "acting_as_master"):
                if hasattr(action, key):
                    doc[key] = getattr(action, key)
            reg = getattr(action, "registration", None)
            if reg is not None:
                doc["topics"] = sorted(reg.topics)
                doc["data_version"] = reg.data_version.to_json()
        if kind != "action":
            doc["code"] = None if response is None else response.code
            if kind == "push" and response is not None:
                doc["fields"] = dict(response.ext_fields)
        self.journal.write(json.dumps(doc, default=str, separators=(",", ":")) + "\n")


def _log(level: int, event: str, **fields: Any) -> None:
    if log.isEnabledFor(level):
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        log.log(level, "%s %s", event, text, extra={"event": event, **fields})
