"""A blocking remoting client and ``routing serve`` in a thread: what the differential needs to
send the same bytes to two servers and read both answers.

`WireClient` is one TCP connection; `call` sends a request and returns the response with the
same opaque (others are kept). `RoutingServer` runs `routing.remoting.serve` (the function
``routing serve`` calls) on its own event loop in a daemon thread, on a free loopback port.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from routing.remoting import (
    FrameDecoder,
    NamesrvConfig,
    ProtocolError,
    RemotingCommand,
    encode,
    load_properties_file,
    serve,
)

__all__ = ["SCAN_MS", "RoutingServer", "WireClient", "eventually", "properties_like_java"]

TIMEOUT_S = 10.0
#: Both servers' expiry scan period in these tests (ms); Java reads it at start only.
SCAN_MS = 500
_opaques = itertools.count(1)
T = TypeVar("T")


class WireClient:
    """One blocking connection to ``address`` (every read has ``timeout_s``)."""

    def __init__(self, address: tuple[str, int], *, timeout_s: float = TIMEOUT_S) -> None:
        self.address = address
        self.sock = socket.create_connection(address, timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.pending: list[RemotingCommand] = []

    def send(self, command: RemotingCommand) -> int:
        """Send ``command`` with a fresh opaque (unless it has one); return the opaque."""
        opaque = command.opaque or next(_opaques)
        if opaque != command.opaque:
            import attrs

            command = attrs.evolve(command, opaque=opaque)
        self.sock.sendall(encode(command))
        return opaque

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self, opaque: int) -> RemotingCommand:
        """The response with ``opaque``; raises ConnectionError if the server closes first."""
        while True:
            for cmd in self.pending:
                if cmd.opaque == opaque and cmd.is_response:
                    self.pending.remove(cmd)
                    return cmd
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError(f"{self.address} closed the connection")
            self.pending += self.decoder.feed(data)

    def call(self, command: RemotingCommand) -> RemotingCommand:
        return self.receive(self.send(command))

    def closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the server closes this connection within ``timeout_s`` (what it sends
        before is read and kept); False if it is still open then."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True
            if not data:
                return True
            with contextlib.suppress(ProtocolError):
                self.pending += self.decoder.feed(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def reset(self) -> None:
        """Drop the connection abruptly (RST), as a killed broker's socket does."""
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        self.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RoutingServer:
    """`routing.remoting.serve` on ``127.0.0.1:0`` in a daemon thread with its own loop.

    ``config_file`` is a ``namesrv.properties`` read as ``routing serve --config`` reads it;
    ``kwargs`` go to `serve` (``journal_dir``, ``kv_config``, ...).
    """

    def __init__(self, *, config_file: Path | None = None,
                 settings: NamesrvConfig | None = None, **kwargs: Any) -> None:
        if config_file is not None:
            settings, _ = load_properties_file(config_file)
            if "kv_config" not in kwargs and settings.get("kvConfigPath"):
                kwargs["kv_config"] = settings.get("kvConfigPath")
        self.settings = settings
        self.kwargs = kwargs
        self.address: tuple[str, int] = ("127.0.0.1", 0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="routing-serve", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def listening(address: tuple[str, int]) -> None:
                self.address = address
                self._ready.set()

            await serve("127.0.0.1", 0, settings=self.settings, stop_event=self._stop,
                        install_signal_handlers=False, on_listening=listening, **self.kwargs)

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by start/stop
            self._error = exc
            self._ready.set()

    def start(self) -> RoutingServer:
        self._thread.start()
        if not self._ready.wait(TIMEOUT_S) or self._error is not None:
            raise RuntimeError(f"routing serve did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(TIMEOUT_S)
        if self._error is not None:
            raise self._error

    def __enter__(self) -> RoutingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def eventually(probe: Callable[[], T], done: Callable[[T], bool], *, timeout_s: float = 10.0,
               every_s: float = 0.02) -> T:
    """Call ``probe`` until ``done(result)`` or ``timeout_s`` passes; return the last result
    (the caller asserts on it). A wait on a real server's state, never a fixed sleep."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if done(result) or time.monotonic() >= deadline:
            return result
        time.sleep(every_s)


def properties_like_java(folder: Path, **extra: str) -> Path:
    """A ``namesrv.properties`` with the keys run.sh writes for Java (paths of our own)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = {"listenPort": "0", "bindAddress": "127.0.0.1", "rocketmqHome": str(folder),
             "kvConfigPath": str(folder / "namesrv" / "kvConfig.json"),
             "scanNotActiveBrokerInterval": str(SCAN_MS), **extra}
    path = folder / "namesrv.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


@contextlib.contextmanager
def clients(*addresses: tuple[str, int]) -> Iterator[list[WireClient]]:
    """One connection to each address, closed at the end."""
    opened = [WireClient(a) for a in addresses]
    try:
        yield opened
    finally:
        for c in opened:
            c.close()
