"""The byte stream cut into frames: `FrameDecoder` (a connection's decoder) and `decode`
(exactly one whole frame), sans-I/O. Each frame is decoded by ``_codec.py``; a stream that
breaks the protocol raises `RemoteProtocolError`, after which the decoder refuses further
input. Java: ``NettyDecoder``, a ``LengthFieldBasedFrameDecoder`` with a 16 MiB limit.
"""

from __future__ import annotations

import struct

from ..._errors import InvalidRequest
from ._codec import (
    HEADER_LENGTH_MASK,
    ProtocolError,
    RemoteProtocolError,
    RemotingCommand,
    decode_frame,
)
from ._codes import MAX_FRAME_BYTES, SerializeType
from ._header_cache import HeaderCache

__all__ = ["FrameDecoder", "decode"]

_INT32 = struct.Struct(">i")


def _check_length(length: int, max_frame_bytes: int) -> None:
    if length < 0:
        raise RemoteProtocolError(f"negative frame length {length}")
    if length < 4:
        raise RemoteProtocolError(
            f"frame length {length} is shorter than the 4-byte header-length word")
    if length + 4 > max_frame_bytes:
        raise RemoteProtocolError(f"frame length {length} (+4-byte prefix) exceeds the maximum "
                                  f"frame size of {max_frame_bytes} bytes")


def decode(data: bytes, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> RemotingCommand:
    """Decode exactly one whole frame, length prefix included. O(frame size).

    Raises `RemoteProtocolError` if ``data`` is not exactly one valid frame.
    """
    view = memoryview(data)
    if len(view) < 4:
        raise RemoteProtocolError(f"{len(view)} bytes cannot hold the 4-byte length prefix")
    (length,) = _INT32.unpack_from(view, 0)
    _check_length(length, max_frame_bytes)
    if length != len(view) - 4:
        raise RemoteProtocolError(f"frame length {length} does not match the {len(view) - 4} bytes "
                            "after the prefix")
    return decode_frame(view[4:])


class FrameDecoder:
    """Turns a byte stream, in any chunking, into whole `RemotingCommand` values.

    Java's ``NettyDecoder`` (a ``LengthFieldBasedFrameDecoder`` with a 16 MiB limit, prefix
    included). It buffers at most one partial frame, so memory stays below
    ``max_frame_bytes`` plus one fed chunk; `feed` costs O(bytes fed) plus each frame's
    decoding (a repeated JSON header about 1 µs, `HeaderCache`). A length, header word or
    header that breaks the protocol raises `RemoteProtocolError` (as soon as its first
    bytes arrive where possible); the decoder then refuses further input and the host
    should close the connection.

    >>> from routing.remoting import encode
    >>> dec = FrameDecoder()
    >>> frame = encode(RemotingCommand(code=106))
    >>> dec.feed(frame[:5]), [c.code for c in dec.feed(frame[5:] + frame)]
    ([], [106, 106])
    """

    __slots__ = ("_buf", "_error", "_headers", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 8:
            raise InvalidRequest(f"max_frame_bytes must be at least 8, got {max_frame_bytes}",
                                 field="max_frame_bytes", value=max_frame_bytes)
        #: The largest frame accepted, 4-byte length prefix included (bytes).
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._error: str | None = None
        self._headers = HeaderCache()

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a whole frame."""
        return len(self._buf)

    @property
    def closed(self) -> bool:
        """True after a `RemoteProtocolError`: every later `feed` raises one."""
        return self._error is not None

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Add received bytes; return the commands completed by them, in order.

        Cost: O(len(data)) plus the decoding of each completed frame: frames wholly inside
        ``data`` (``bytes``, or a byte ``memoryview`` such as a receive buffer: the
        commands never refer to it) with nothing buffered are decoded in place, only a
        trailing partial frame is copied. On a protocol error the exception's ``commands`` carries
        the commands decoded before the bad frame.
        """
        if self._error is not None:
            raise RemoteProtocolError(f"decoder closed after an earlier error: {self._error}")
        buf = self._buf
        if not buf and (type(data) is bytes or (type(data) is memoryview and data.ndim == 1
                                                and data.format == "B")):
            source: bytes | bytearray | memoryview = data  # decoded in place
        else:
            buf += data
            source = buf
        commands: list[RemotingCommand] = []
        headers = self._headers
        pos, size = 0, len(source)
        try:
            with memoryview(source) as view:
                while size - pos >= 4:
                    (length,) = _INT32.unpack_from(view, pos)
                    _check_length(length, self.max_frame_bytes)
                    if size - pos >= 8:
                        (word,) = _INT32.unpack_from(view, pos + 4)
                        kind, header_length = (word >> 24) & 0xFF, word & HEADER_LENGTH_MASK
                        if kind > SerializeType.ROCKETMQ:
                            raise RemoteProtocolError(
                                f"unknown serialize type {kind} in the header-length word")
                        if header_length > length - 4:
                            raise RemoteProtocolError(
                                f"header length {header_length} is longer than the frame "
                                f"({length - 4} bytes after the header-length word)")
                    end = pos + 4 + length
                    if end > size:
                        break
                    commands.append(decode_frame(view[pos + 4:end], headers))
                    pos = end
        except ProtocolError as exc:
            self._error = str(exc)
            self._buf = bytearray()
            raise type(exc)(str(exc), commands=tuple(commands)) from None
        if source is buf:
            if pos:
                del buf[:pos]
        elif pos < size:
            buf += source[pos:] if pos else source
        return commands
