"""An asyncio host for `NameServerProcessor` (``routing serve``; `serve` in ``_serve.py``).

One connection is one channel (Java's Netty channel). Bytes go through a `FrameDecoder`,
each command into its class's bounded queue (``_admission.py``: route reads, the rest;
SYSTEM_BUSY past the bound or the connection's fair share), through the processor in that
queue's worker (a turn as long as what arrived since the last), and each response back
through `encode`. A closed connection calls ``on_channel_closed`` once what
it sent is answered; a timer calls ``scan_expired`` every ``scan_interval_ms`` and closes
the expired brokers' connections. Per-connection memory is bounded: reads of at most
``read_chunk_bytes``, one partial frame (``max_frame_bytes``), and a write buffer above
which the connection stops being read until the peer catches up.

Logs are structured: logger ``routing.remoting``, message ``event key=value ...``, and the
same fields in the record's ``extra`` (``event`` plus the keys) for JSON formatters.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING

import attrs

from ..._errors import InvalidRequest
from ..processor._processor import NameServerProcessor
from ..processor._request import Notification, Outcome
from ..wire._codec import LocalProtocolError, RemotingCommand, encode
from ..wire._codes import MAX_FRAME_BYTES, RequestCode, ResponseCode
from ..wire._frame_decoder import decode
from ._admission import BUSY_REMARK, CLIENT, DEFAULT, ClassQueue, Job, request_class
from ._connection import Channel
from ._connection import Connection as _Connection
from ._logs import log, log_broker_request
from ._logs import log_event as _log
from ._memo import FrameMemo, heartbeat_proof, learn

if TYPE_CHECKING:
    from ._metrics import HostMetrics

__all__ = ["NameServerHost"]


_NOTIFY_TIMEOUT_S = 3.0
_KV_WRITES = frozenset({RequestCode.PUT_KV_CONFIG, RequestCode.DELETE_KV_CONFIG})
#: Settings the host follows at each scan tick once UPDATE_NAMESRV_CONFIG changes them.
_HOST_KEYS = ("scanNotActiveBrokerInterval", "clientRequestThreadPoolQueueCapacity",
              "defaultThreadPoolQueueCapacity", "serverChannelMaxIdleTimeSeconds")
_BROKER_CODES = frozenset({RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER,
                           RequestCode.BROKER_HEARTBEAT, RequestCode.QUERY_DATA_VERSION})
_HEARTBEATS = frozenset({RequestCode.BROKER_HEARTBEAT, RequestCode.QUERY_DATA_VERSION})
_MAX_PENDING_NOTIFICATIONS = 1_024
_BEAT_CODE, _SUCCESS = int(RequestCode.BROKER_HEARTBEAT), int(ResponseCode.SUCCESS)
_ROUTE_CODE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
#: The requests a connection may remember and the host answer from memory (``_memo.py``).
_MEMO_CODES = frozenset({_BEAT_CODE, _ROUTE_CODE})


class NameServerHost:
    """Serves a `NameServerProcessor` over TCP with asyncio.

    ``port=0`` picks a free port; `start` returns the bound ``(host, port)``. Sizes are in
    bytes, times in ms. ``scan_interval_ms=None`` runs no expiry timer: whoever owns the
    clock (a test's manual clock, `routing.testing`) scans and hands the outcome to
    `scanned`, so one host serves either clock. A connection that sent nothing for
    ``idle_timeout_ms`` is closed (Java's ``serverChannelMaxIdleTimeSeconds``, 120 s;
    None disables), checked at each scan. Requests wait in one bounded queue per class
    (``nameserver/_admission.py``): route reads (``client_queue_capacity``, Java's
    50 000) and the rest (``default_queue_capacity``, Java's 10 000), each also bounded
    by ``queue_bytes``; past either bound a request is answered SYSTEM_BUSY. `close` is
    graceful: requests already read are answered before the connections close (up to
    ``grace_ms``). Use ``async with`` or `start`/`close`. Cost per request: the
    processor's, plus O(frame) to decode and encode in place; memory per connection: a
    partial frame, its last body and up to ``write_buffer_bytes`` of answers.
    """

    def __init__(self, processor: NameServerProcessor, *, host: str = "127.0.0.1",
                 port: int = 9876, scan_interval_ms: int | None = 5_000,
                 max_frame_bytes: int = MAX_FRAME_BYTES, read_chunk_bytes: int = 256 * 1024,
                 write_buffer_bytes: int = 4 * 1024 * 1024,
                 idle_timeout_ms: int | None = 120_000,
                 client_queue_capacity: int = 50_000, default_queue_capacity: int = 10_000,
                 queue_bytes: int = 64 * 1024 * 1024, grace_ms: int = 10_000) -> None:
        if scan_interval_ms is not None and scan_interval_ms <= 0:
            raise InvalidRequest(f"scan_interval_ms must be > 0, got {scan_interval_ms}",
                                 field="scan_interval_ms", value=scan_interval_ms)
        self.queues = {CLIENT: ClassQueue(CLIENT, capacity=client_queue_capacity,
                                          max_bytes=queue_bytes),
                       DEFAULT: ClassQueue(DEFAULT, capacity=default_queue_capacity,
                                           max_bytes=queue_bytes)}
        #: The queue each of `_MEMO_CODES` goes to.
        self._memo_queues = {code: self.queues[request_class(RemotingCommand(code=code))]
                             for code in _MEMO_CODES}
        self.grace_ms = grace_ms
        self._workers: list[asyncio.Task[None]] = []
        self._busy_logged = 0
        #: Set by ``--metrics`` (``nameserver/_metrics.py``'s `HostMetrics`), else None.
        self.metrics: HostMetrics | None = None
        self.processor = processor
        self.host, self.port = host, port
        self.scan_interval_ms = scan_interval_ms
        self.max_frame_bytes = max_frame_bytes
        self.read_chunk_bytes = read_chunk_bytes
        self.write_buffer_bytes = write_buffer_bytes
        self.idle_timeout_ms = idle_timeout_ms
        self._ids = itertools.count(1)
        self._connections: dict[Channel, _Connection] = {}
        self._receive: memoryview | None = None  # the shared receive buffer
        self._notifications: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._scanner: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(host, port)``; valid after `start`."""
        return self.host, self.port

    @property
    def channels(self) -> tuple[Channel, ...]:
        """Open connections, oldest first."""
        return tuple(self._connections)

    async def __aenter__(self) -> NameServerHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> tuple[str, int]:
        """Listen and start the expiry timer. Returns the bound address."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._connection, self.host, self.port)
        sockname = self._server.sockets[0].getsockname()
        self.host, self.port = sockname[0], sockname[1]
        if self.scan_interval_ms is not None:
            self._scanner = asyncio.create_task(self._scan_loop(), name="routing-scan")
        self._workers = [asyncio.create_task(self._worker(q), name=f"routing-{name}")
                         for name, q in self.queues.items()]
        _log(logging.INFO, "listening", host=self.host, port=self.port,
             scan_interval_ms=self.scan_interval_ms,
             loop="uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio")
        return self.address

    async def close(self) -> None:
        """Stop accepting and reading, answer every request already read (up to
        ``grace_ms``), then close every connection and wait for them.

        Shutdown does not unregister the brokers of the closed connections: the state is
        the process's own and ends with it.
        """
        self._closing = True
        if self._server is not None:
            self._server.close()
        if self._scanner is not None:
            self._scanner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scanner
        for conn in list(self._connections.values()):  # what was read stays queued
            conn.stop_reading("shutdown")
        in_flight = sum(len(q) + q.busy for q in self.queues.values())
        try:
            async with asyncio.timeout(self.grace_ms / 1000):
                for queue in self.queues.values():
                    await queue.wait_idle()
        except TimeoutError:
            _log(logging.WARNING, "shutdown_grace_exceeded", grace_ms=self.grace_ms,
                 unanswered=sum(len(q) for q in self.queues.values()))
        for task in self._workers:
            task.cancel()
        conns = list(self._connections.values())
        for conn in conns:
            conn.close()
        closing = [asyncio.ensure_future(c.wait_closed()) for c in conns]
        if closing:  # answers flush; a peer that does not read is cut off after the grace
            _, late = await asyncio.wait(closing, timeout=self.grace_ms / 1000)
            for task in late:
                task.cancel()
            for conn in conns if late else ():
                conn.abort()
            for task in closing:
                if not task.cancelled():
                    task.exception()  # retrieved: a reset peer is not an error here
        self._connections.clear()
        for task in list(self._notifications):
            task.cancel()
        if self._server is not None:
            await self._server.wait_closed()
        _log(logging.INFO, "stopped", host=self.host, port=self.port, answered_at_stop=in_flight)

    # ------------------------------------------------------------------ connections

    def _connection(self) -> _Connection:
        """A new connection's protocol (``nameserver/_connection.py``); all share the
        host's receive buffer of ``read_chunk_bytes``."""
        if self._receive is None:
            self._receive = memoryview(bytearray(self.read_chunk_bytes))
        return _Connection(self._channel_of, self._receive, self.max_frame_bytes,
                           self.write_buffer_bytes, self._admit, self._ended,
                           again=self._again, learn=self._learn)

    def _channel_of(self, conn: _Connection, transport: asyncio.BaseTransport) -> Channel:
        """A new connection's handle; the connection is now the host's."""
        peer = transport.get_extra_info("peername")
        channel = Channel(id=next(self._ids), peer=f"{peer[0]}:{peer[1]}" if peer else "?")
        self._connections[channel] = conn
        return channel

    def _ended(self, conn: _Connection) -> None:
        """``conn`` reads nothing more: finish it once its requests are answered (at
        shutdown `close` does)."""
        if not self._closing:
            self._finish(conn)

    def _admit(self, command: RemotingCommand, conn: _Connection,
               alone: bool) -> Outcome | None:
        """Serve ``command`` at once when it is ``alone`` (the only command its read
        brought), its class's queue is empty and idle, and it is no KV write that goes to
        a thread; else queue it in its class's queue, or answer SYSTEM_BUSY if that is
        full.

        Served at once, a request costs no queue operations and no wake-up of the worker
        (one loop iteration less: an ``epoll_wait`` and a task step per request for a
        client alone): the common case of clients with one request in flight each. It is
        still served in its connection's order (nothing of its class waits). A read that
        brings several requests, and every request while some wait, go through the queue
        as before: admission, fair shares and SYSTEM_BUSY are unchanged under overload.

        Returns the outcome of a BROKER_HEARTBEAT or GET_ROUTEINFO_BY_TOPIC served at once
        (for the connection to remember, `_learn`), else None."""
        if command.is_response:
            return None  # the processor ignores incoming responses
        queue = self.queues[request_class(command)]
        if alone and not len(queue) and not queue.busy and not (
                command.code in _KV_WRITES and self.processor.kv.path is not None):
            start = time.perf_counter() if self.metrics is not None else 0.0
            conn.pending += 1
            try:
                outcome = self.processor.process(command, conn.channel)
            except Exception:  # as the worker: never lose the connection's bookkeeping
                log.exception("request failed", extra={"event": "worker_error"})
                conn.pending -= 1
                return None
            self._complete(conn, command, start, outcome)
            return outcome if command.code in _MEMO_CODES else None
        if queue.offer(Job(conn, command)):
            conn.pending += 1
            return None
        if not command.is_oneway and not conn.is_closing():
            conn.write(encode(command.make_response(ResponseCode.SYSTEM_BUSY,
                                                           BUSY_REMARK)))
        _log(logging.DEBUG, "request_rejected", channel=conn.channel, code=command.code,
             queue=queue.name, reason="system_busy")
        return None

    def _learn(self, frame: bytes, command: RemotingCommand,
               outcome: Outcome) -> FrameMemo | None:
        """What ``conn`` may remember of ``command`` (whose whole ``frame`` its read was,
        one of `_MEMO_CODES`) served at once with ``outcome`` (``nameserver/_memo.py``):
        a `FrameMemo` when the answer was SUCCESS without remark or ext fields (a
        heartbeat: no body either, or oneway none; a route read: the body of the
        manager's route snapshot, `NameServerProcessor.route_proof`) and the processor
        answers that code as `NameServerProcessor` does (`plain_heartbeats`,
        `plain_routes`); else None. O(frame + answer)."""
        response, processor = outcome.response, self.processor
        if outcome.error is not None or outcome.close or outcome.notifications:
            return None
        proof: tuple[object, ...] | None = None
        if command.code == _BEAT_CODE:
            proof = heartbeat_proof(command) if processor.plain_heartbeats else None
            if response is None:
                return learn(frame, command, None, proof) if (
                    proof is not None and command.is_oneway) else None
            if response.body:
                return None
        elif response is None or not processor.plain_routes:
            return None  # a oneway route read, or a processor of its own
        if (response.code != ResponseCode.SUCCESS or response.remark is not None
                or response.ext_fields):
            return None
        if command.code == _ROUTE_CODE:
            proof = processor.route_proof(command, response.body)
        if proof is None:
            return None
        try:
            answer = encode(response)
        except LocalProtocolError:
            return None
        return learn(frame, command, answer, proof)

    def _again(self, conn: _Connection, memo: FrameMemo, frame: bytes, opaque: bytes) -> bool:
        """Serve ``frame``, the connection's remembered request again with ``opaque``
        (``nameserver/_memo.py``), as `_admit` would serve it at once and the processor
        answer it: a heartbeat's liveness refresh and the remembered answer; a route
        read's remembered answer once `NameServerProcessor.route_current` proves it still
        the route's. False (nothing done) when `_admit` would not serve it at once (other
        requests of its class wait), the broker log is at DEBUG (the ordinary path logs
        each heartbeat) or the route changed (then the memo is forgotten, and the
        connection may remember the new answer). O(frame + answer) for the answer's bytes;
        no command, outcome or encoding."""
        queue = self._memo_queues[memo.code]
        if len(queue) or queue.busy or log.isEnabledFor(logging.DEBUG):
            return False
        metrics = self.metrics
        start = time.perf_counter() if metrics is not None else 0.0
        if memo.code == _BEAT_CODE:
            cluster, addr = memo.proof
            error = self.processor.beat(str(cluster), str(addr))
            if error is not None:  # as the processor answers it: the whole command, then
                command = decode(frame, max_frame_bytes=self.max_frame_bytes)
                conn.pending += 1
                self._complete(conn, command, start,
                               self.processor.failed_beat(command, error))
                return True
        elif not self.processor.route_current(memo.proof):
            conn.memo = None  # stale: the ordinary answer is remembered in its turn
            return False
        answer = memo.answer(opaque)
        transport = conn.transport
        if answer is not None and transport is not None and not transport.is_closing():
            transport.write(answer)
        if metrics is not None:
            metrics.observe(memo.code, None if answer is None else _SUCCESS,
                            time.perf_counter() - start)
        return True

    def _finish(self, conn: _Connection) -> None:
        """Once a connection has ended and all it sent is answered: close it and remove
        its brokers (after their queued requests, so none re-registers a dead channel)."""
        if not conn.eof or conn.pending or conn.finished:
            return
        conn.finished = True
        self._connections.pop(conn.channel, None)
        conn.close()
        outcome = self.processor.channel_closed(conn.channel)
        if self.metrics is not None and outcome.removed:
            self.metrics.broker_removed("channel_closed", len(outcome.removed))
        for gone in outcome.removed:
            _log(logging.INFO, "broker_removed", reason="channel_closed",
                 cluster=gone.cluster, broker_name=gone.broker_name,
                 broker_addr=gone.broker_addr, channel=conn.channel)
        for note in outcome.notifications:
            self._notify(note)

    async def _worker(self, queue: ClassQueue) -> None:
        """Serve one class's queue in turns (a run of KV writes together, so that they
        share a file write), yielding between turns so the other class and the readers get
        theirs. A turn serves as many requests as arrived since the previous one
        (`ClassQueue.turn`): the worker keeps pace with the readers under overload."""
        kv_file = self.processor.kv.path is not None
        while True:
            job: Job | None = await queue.take()
            turn, served = queue.turn(), 0
            while job is not None:
                try:
                    if kv_file and job.command.code in _KV_WRITES:
                        batch = [job, *queue.take_while(_KV_WRITES)]
                        outcomes = await asyncio.gather(
                            *(self._process(j.command, j.conn.channel) for j in batch))
                        for done, outcome in zip(batch, outcomes, strict=True):
                            self._complete(done.conn, done.command, done.start, outcome)
                    else:
                        outcome = self.processor.process(job.command, job.conn.channel)
                        self._complete(job.conn, job.command, job.start, outcome)
                except Exception:  # never lose the worker
                    log.exception("request worker failed", extra={"event": "worker_error"})
                served += 1
                job = queue.take_nowait() if served < turn else None
            queue.done()
            if len(queue):  # the turn is over: let the other class and the readers in
                await asyncio.sleep(0)
            # (an empty queue yields in `take` anyway: no extra loop iteration per request)

    def _complete(self, conn: _Connection, command: RemotingCommand, start: float,
                  outcome: Outcome) -> None:
        """Deliver ``outcome`` of ``command`` (read at ``time.perf_counter()`` ``start``)
        on ``conn``; the connection may then finish."""
        try:
            self._deliver(outcome, conn, command)
        finally:  # whatever happens, the connection can finish
            conn.pending -= 1
            if conn.eof:
                self._finish(conn)
        if self.metrics is not None:
            response = outcome.response
            self.metrics.observe(command.code, None if response is None else response.code,
                                 time.perf_counter() - start)

    async def _process(self, command: RemotingCommand, channel: Channel) -> Outcome:
        """Process one command; a KV change with a file goes to a worker thread so that
        its fsync does not stall the loop (`KVStore`)."""
        if command.code in _KV_WRITES and self.processor.kv.path is not None:
            return await asyncio.to_thread(self.processor.process, command, channel)
        return self.processor.process(command, channel)

    def _deliver(self, outcome: Outcome, conn: _Connection | None,
                 command: RemotingCommand | None = None) -> None:
        """Write the response (no waiting: the connection's reader waits for the peer),
        close channels, send notifications, log broker events."""
        if outcome.error is not None:
            log.error("processor error on %s", conn.channel if conn else None,
                      exc_info=outcome.error, extra={"event": "processor_error"})
        response = outcome.response
        transport = conn.transport if conn is not None else None
        if response is not None and transport is not None and not transport.is_closing():
            try:
                frame = encode(response)
            except LocalProtocolError as exc:  # e.g. a stored string the binary form cannot carry
                _log(logging.WARNING, "response_unencodable",
                     channel=conn.channel if conn else None, error=exc)
                frame = encode(attrs.evolve(response, code=1, remark=f"unencodable: {exc}",
                                            ext_fields={}, body=b""))
            transport.write(frame)
        code = command.code if command is not None else None
        if code in _HEARTBEATS and not log.isEnabledFor(logging.DEBUG):
            pass  # the most frequent request: logged at DEBUG only (log_broker_request)
        elif command is not None and code in _BROKER_CODES:
            log_broker_request(command, outcome, conn.channel if conn else None, self.metrics)
        elif command is not None and code == RequestCode.UPDATE_NAMESRV_CONFIG:
            ok = response is None or response.code == ResponseCode.SUCCESS
            _log(logging.INFO if ok else logging.WARNING, "config_update",
                 channel=conn.channel if conn else None,
                 response=None if response is None else response.code,
                 remark=None if response is None else response.remark,
                 body=command.body[:512].decode("utf-8", errors="replace").replace("\n", ";"))
        if outcome.close:
            self._close_channels(outcome.close)
        for note in outcome.notifications:
            self._notify(note)

    def _close_channels(self, channels: tuple[Hashable, ...]) -> None:
        for channel in channels:
            if isinstance(channel, Channel):
                self.close_channel(channel, "expired")

    # ------------------------------------------------------------------ timers, notifications

    def _follow_settings(self, seen: tuple[str | None, ...]) -> tuple[str | None, ...]:
        """Adopt the host's settings that UPDATE_NAMESRV_CONFIG changed since ``seen`` (the
        values at start are the constructor's): scan interval, queue capacities, idle
        timeout. Returns the values now seen."""
        settings = self.processor.settings
        now = tuple(settings.get(k) for k in _HOST_KEYS)
        for key, old, new in zip(_HOST_KEYS, seen, now, strict=True):
            if new == old or new is None:
                continue
            value = int(new)
            if key == "scanNotActiveBrokerInterval":
                self.scan_interval_ms = value
            elif key == "clientRequestThreadPoolQueueCapacity":
                self.queues[CLIENT].capacity = value
            elif key == "defaultThreadPoolQueueCapacity":
                self.queues[DEFAULT].capacity = value
            else:
                self.idle_timeout_ms = value * 1000 if value > 0 else None
            _log(logging.INFO, "setting_applied", key=key, value=value)
        return now

    async def _scan_loop(self) -> None:
        seen = tuple(self.processor.settings.get(k) for k in _HOST_KEYS)
        while self.scan_interval_ms is not None:
            await asyncio.sleep(self.scan_interval_ms / 1000)
            seen = self._follow_settings(seen)
            try:
                outcome = self.processor.scan()
            except Exception:  # keep scanning; the error is the manager's to report
                log.exception("scan_expired failed", extra={"event": "scan_error"})
                continue
            self.scanned(outcome)

    def scanned(self, outcome: Outcome) -> None:
        """Act on one expiry scan's `Outcome` (`NameServerProcessor.scan`): log and count
        the removed brokers, close their channels, send the notices, close idle
        connections. The timer calls it after each scan; with ``scan_interval_ms=None``
        the clock's owner does. Call it on the host's event loop."""
        if self.metrics is not None and outcome.removed:
            self.metrics.broker_removed("expired", len(outcome.removed))
        for gone in outcome.removed:
            _log(logging.INFO, "broker_removed", reason="expired", cluster=gone.cluster,
                 broker_name=gone.broker_name, broker_addr=gone.broker_addr,
                 last_update_ms=gone.last_update_ms, timeout_ms=gone.timeout_ms)
        self._deliver(outcome, None)
        self._close_idle()
        rejected = sum(q.rejected for q in self.queues.values())
        if rejected > self._busy_logged:
            _log(logging.WARNING, "overloaded", rejected=rejected - self._busy_logged,
                 **{f"{n}_queued": len(q) for n, q in self.queues.items()})
            self._busy_logged = rejected

    def send(self, channel: Channel, command: RemotingCommand) -> bool:
        """Write ``command`` on ``channel``'s connection (a reply held back, e.g. by a
        test's injected delay); False when that connection is gone. Call it on the
        host's event loop."""
        conn = self._connections.get(channel)
        if conn is None or conn.is_closing():
            return False
        conn.write(encode(command))
        return True

    def close_channel(self, channel: Channel, reason: str) -> bool:
        """Close ``channel``'s connection once its buffered answers are written; its
        brokers are removed as for any closed connection. False when it is gone. Call it
        on the host's event loop."""
        conn = self._connections.get(channel)
        if conn is None or conn.is_closing():
            return False
        _log(logging.INFO, "channel_closing", channel=channel, reason=reason)
        conn.close()
        return True

    def _close_idle(self) -> None:
        if self.idle_timeout_ms is None:
            return
        oldest = asyncio.get_running_loop().time() - self.idle_timeout_ms / 1000
        for conn in list(self._connections.values()):
            if conn.last_read_s < oldest and not conn.is_closing():
                _log(logging.INFO, "channel_closing", channel=conn.channel, reason="idle")
                conn.close()

    def _notify(self, note: Notification) -> None:
        if len(self._notifications) >= _MAX_PENDING_NOTIFICATIONS:
            _log(logging.WARNING, "notification_dropped", addr=note.addr,
                 code=note.command.code, reason="too_many_pending")
            return
        task = asyncio.create_task(self._send_oneway(note))
        self._notifications.add(task)
        task.add_done_callback(self._notifications.discard)

    async def _send_oneway(self, note: Notification) -> None:
        host, _, port = note.addr.rpartition(":")
        try:
            async with asyncio.timeout(_NOTIFY_TIMEOUT_S):
                _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
                try:
                    writer.write(encode(note.command))
                    await writer.drain()
                finally:
                    writer.close()
            _log(logging.INFO, "notification_sent", addr=note.addr, code=note.command.code)
        except (OSError, TimeoutError, ValueError) as exc:
            _log(logging.WARNING, "notification_failed", addr=note.addr,
                 code=note.command.code, error=repr(exc))
