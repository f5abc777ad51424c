"""`FakeClock`: a `ManualClock` that runs the fake name servers' scheduled work (scans,
periodic registrations) at the exact instants it falls due."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Protocol

from .._clock import ManualClock
from ._errors import ClockReentered
from ._fake_lock import FakeLock

__all__ = ["FakeClock", "Scheduled"]


class Scheduled(Protocol):
    """What the clock needs of a fake name server (a `FakeNameServer` is one): when its next
    scan or registration falls due, and running the work due at an instant."""

    def _next_due_ms(self) -> int | None: ...
    def _run_registrations_due(self, now_ms: int) -> None: ...
    def _run_scan_due(self, now_ms: int) -> None: ...


class FakeClock(ManualClock):
    """A `ManualClock` that runs the scheduled work of the fake name servers using it.

    ``advance``/``set`` stop at every instant where a scan or a periodic registration is
    due, run it with the clock reading exactly that instant, and go on. So time may be
    moved by the test, by code under test, or by any fake sharing the clock, and the
    fakes still behave as if their schedulers had fired on time. At one instant,
    registrations run before scans, name server by name server in creation order.
    ``lock`` is the `FakeLock` of every fake on this clock; moving time holds it.
    """

    def __init__(self, start_ms: int = 0) -> None:
        super().__init__(start_ms)
        self._servers: list[weakref.ref[Scheduled]] = []
        self._stepping = False
        self.lock = FakeLock()

    def _attach(self, server: Scheduled) -> None:
        self._servers.append(weakref.ref(server))

    def _attached(self) -> list[Scheduled]:
        alive = [s for ref in self._servers if (s := ref()) is not None]
        if len(alive) != len(self._servers):
            self._servers = [weakref.ref(s) for s in alive]
        return alive

    def advance(self, ms: int) -> int:
        """Move forward ``ms`` (>= 0) milliseconds, running due work; return the new time."""
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            return super().advance(ms)  # raises: not milliseconds, or going backwards
        return self.set(self.now_ms() + ms)

    def set(self, ms: int) -> int:
        """Jump to instant ``ms`` (not earlier than now), running due work on the way."""
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < self.now_ms():
            return super().set(ms)  # raises: not milliseconds, or going backwards
        with self.lock:
            if self._stepping:
                raise ClockReentered(f"the clock was moved to {ms} ms from inside a "
                                     f"scheduled step (a listener or wrapper must not move "
                                     f"time)", field="ms", value=ms)
            _run_until(self, self._attached(), ms)
        return ms

    def _jump(self, ms: int) -> None:
        super().set(ms)

    def __repr__(self) -> str:
        return f"FakeClock(now_ms={self.now_ms()})"


def _run_until(clock: ManualClock, servers: Sequence[Scheduled], target_ms: int) -> None:
    """Step ``clock`` to ``target_ms`` through every due instant of ``servers``."""
    jump = clock._jump if isinstance(clock, FakeClock) else clock.set
    while True:
        due = [t for s in servers if (t := s._next_due_ms()) is not None and t <= target_ms]
        if not due:
            break
        instant = max(min(due), clock.now_ms())
        jump(instant)
        if isinstance(clock, FakeClock):
            clock._stepping = True
        try:
            for server in servers:
                server._run_registrations_due(instant)
            for server in servers:
                server._run_scan_due(instant)
        finally:
            if isinstance(clock, FakeClock):
                clock._stepping = False
    jump(target_ms)
