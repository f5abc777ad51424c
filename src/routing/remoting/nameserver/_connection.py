"""One accepted connection of `NameServerHost`, as an asyncio buffered protocol, and its
handle `Channel` (what the manager sees).

The socket is read straight into one receive buffer the host shares among its connections
(``recv_into``; the event loop runs one callback at a time, and each read is decoded before
the next): no per-read ``bytes`` object, no stream buffer, no task switch per read. A frame
received whole is decoded in place, only a trailing partial frame is copied into the
connection's `FrameDecoder`; a body equal to the connection's previous one is handed over
as that same object (``wire/_header_cache.py``). With frames of a few hundred KB
(a broker's 1 000-topic registration is about 168 KB), this is what keeps the host from
copying each frame four times and from allocating (and page-faulting) a fresh large buffer
per read.

A broker's repeated BROKER_HEARTBEAT and a client's repeated GET_ROUTEINFO_BY_TOPIC are
recognised from their bytes before any decoding: once one has been answered at once in a
way that can be remembered, the connection keeps it (`FrameMemo`, ``_memo.py``), and a
read that is exactly that frame again but for its opaque goes to the host's ``again`` (a
heartbeat's liveness refresh, a route read's proof that its route is unchanged, and the
remembered answer; about 2 µs instead of 9 for a heartbeat). A connection gives up
remembering after ``_LEARN_TRIES`` lone such requests in a row that cannot be remembered.

Back-pressure: when the transport's write buffer passes its high-water mark the
connection stops being read until the peer has read its answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import cast

import attrs

from ..processor._request import Outcome
from ..wire._codec import ProtocolError, RemotingCommand
from ..wire._frame_decoder import FrameDecoder
from ._logs import log_event as _log
from ._memo import FrameMemo

__all__ = ["Channel", "Connection"]

#: Lone heartbeats or route reads in a row a connection tries to remember before it stops
#: trying (a header that cannot be remembered exactly, a missing topic: ``_memo.py``).
_LEARN_TRIES = 8


@attrs.frozen(kw_only=True)
class Channel:
    """The handle of one accepted connection, as the manager sees it: hashable, equal by
    ``id`` (the host's counter, from 1) and ``peer`` (``host:port``); O(1) to hash and
    compare. Printed ``#id(peer)`` in the logs."""

    id: int
    peer: str

    def __str__(self) -> str:
        return f"#{self.id}({self.peer})"


class Connection(asyncio.BufferedProtocol):
    """An accepted connection: reading (the protocol callbacks), writing (``write``,
    ``close``, ``wait_closed``) and the host's bookkeeping (``pending`` admitted requests
    not answered yet, ``eof`` once nothing more will be read, ``finished`` once the host
    removed its brokers). ``receive`` is the host's shared receive buffer; ``channel_of``,
    ``admit`` and ``ended`` the host's callbacks for the new connection (its handle), each
    decoded command (with whether it was the only one its read brought; the outcome of a
    heartbeat or route read served at once comes back) and the end of reading; ``learn``
    and ``again`` the host's for a repeated one (what to remember of one served at once,
    and serving it again from memory: ``_memo.py``; False sends it the ordinary way)."""

    #: The host's handle of this connection, set once connected.
    channel: Channel

    def __init__(self, channel_of: Callable[[Connection, asyncio.BaseTransport], Channel],
                 receive: memoryview, max_frame_bytes: int, write_buffer_bytes: int,
                 admit: Callable[[RemotingCommand, Connection, bool], Outcome | None],
                 ended: Callable[[Connection], None], *,
                 again: Callable[[Connection, FrameMemo, bytes, bytes], bool] | None = None,
                 learn: Callable[[bytes, RemotingCommand, Outcome],
                                 FrameMemo | None] | None = None) -> None:
        self._channel_of, self._receive = channel_of, receive
        self._admit, self._ended = admit, ended
        self._again, self._learn = again, learn
        #: This connection's repeated heartbeat or route read, once learnt (``_memo.py``).
        self.memo: FrameMemo | None = None
        self._learn_tries = _LEARN_TRIES
        self._write_buffer_bytes = write_buffer_bytes
        self.decoder = FrameDecoder(max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.pending = 0        # admitted requests not answered yet
        self.eof = False        # nothing more will be read
        self.finished = False   # channel_closed done
        self.last_read_s = 0.0
        self._loop = asyncio.get_running_loop()
        self._closed: asyncio.Future[None] = self._loop.create_future()

    # ------------------------------------------------------------------ protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.transport.set_write_buffer_limits(high=self._write_buffer_bytes)
        self.last_read_s = self._loop.time()
        self.channel = self._channel_of(self, transport)
        _log(logging.DEBUG, "connection_opened", channel=self.channel)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receive

    def buffer_updated(self, nbytes: int) -> None:
        if self.eof:
            return
        self.last_read_s = self._loop.time()
        decoder = self.decoder
        whole = not decoder.buffered  # the read starts at a frame's start
        memo, known = self.memo, False
        if memo is not None and nbytes == memo.size and whole and self._again is not None:
            data = self._receive[:nbytes].tobytes()
            opaque = memo.opaque(data)
            if opaque is not None:
                if self._again(self, memo, data, opaque):
                    return  # the request again, answered from memory
                # the host wants it the ordinary way this time; if it forgot the memo (a
                # route that changed), the ordinary answer may be remembered in its turn
                known = self.memo is not None
        error: ProtocolError | None = None
        try:
            commands = decoder.feed(self._receive[:nbytes])
        except ProtocolError as exc:
            commands, error = list(exc.commands), exc
        alone = len(commands) == 1
        answered = None
        for command in commands:
            answered = self._admit(command, self, alone)
        if error is not None:
            _log(logging.WARNING, "protocol_error", channel=self.channel, error=error)
            self.stop_reading("protocol_error")
        elif (answered is not None and whole and alone and not known
              and self._learn is not None and self._learn_tries and not decoder.buffered):
            # a lone heartbeat or route read served at once, the read exactly its frame
            memo = self._learn(self._receive[:nbytes].tobytes(), commands[0], answered)
            if memo is not None:
                self.memo, self._learn_tries = memo, _LEARN_TRIES
            else:
                self._learn_tries -= 1

    def eof_received(self) -> bool:
        self.stop_reading("eof")
        return True  # half-closed: the answers still go out, then `close`

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_reading("eof" if exc is None else type(exc).__name__)
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        if self.transport is not None and not self.eof:
            self.transport.pause_reading()  # until the peer reads its answers

    def resume_writing(self) -> None:
        if self.transport is not None and not self.eof and not self.transport.is_closing():
            self.transport.resume_reading()

    def stop_reading(self, reason: str) -> None:
        """Read nothing more (end of input, protocol error, shutdown) and tell the host
        once; what was read stays queued and is answered."""
        if self.eof:
            return
        self.eof = True
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.pause_reading()
        _log(logging.DEBUG, "connection_closed", channel=self.channel, reason=reason)
        self._ended(self)

    # ------------------------------------------------------------------ writing

    def write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def is_closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def close(self) -> None:
        """Close once the buffered answers are written."""
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    async def wait_closed(self) -> None:
        await self._closed
