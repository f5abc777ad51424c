"""`_session.stop_session`: the JVM side is stopped before the call returns; PySpark's
accumulator server (up to 1.5 s to notice a shutdown) is shut down in a daemon thread.
Stand-ins, no Spark: the order of the calls is what is tested."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from routing.pipeline._session import stop_session


class _Server:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def shutdown(self) -> None:
        self.thread = threading.current_thread()
        self.calls.append("accumulator shutdown")
        self.done.set()


class _Context:
    def __init__(self, server: _Server | None) -> None:
        self._accumulatorServer = server


class _Session:
    def __init__(self, server: _Server | None, calls: list[str],
                 fail: bool = False) -> None:
        self.sparkContext = _Context(server)
        self.calls = calls
        self.fail = fail

    def stop(self) -> None:
        # PySpark's stop() shuts the server down itself unless it was taken away first
        server: Any = self.sparkContext._accumulatorServer
        self.calls.append("stop" if server is None else "stop, waiting for the server")
        if self.fail:
            raise RuntimeError("the JVM is gone")


def test_the_jvm_stops_first_and_the_server_in_a_daemon_thread() -> None:
    calls: list[str] = []
    server = _Server(calls)
    session = _Session(server, calls)
    stop_session(session)
    assert server.done.wait(timeout=10)
    assert calls == ["stop", "accumulator shutdown"]
    assert server.thread is not None and server.thread.daemon
    assert server.thread is not threading.main_thread()
    assert session.sparkContext._accumulatorServer is None


def test_the_server_is_shut_down_even_when_stop_fails() -> None:
    calls: list[str] = []
    server = _Server(calls)
    with pytest.raises(RuntimeError, match="the JVM is gone"):
        stop_session(_Session(server, calls, fail=True))
    assert server.done.wait(timeout=10)
    assert calls == ["stop", "accumulator shutdown"]


def test_a_session_without_a_server_is_just_stopped() -> None:
    calls: list[str] = []
    stop_session(_Session(None, calls))
    assert calls == ["stop"]
