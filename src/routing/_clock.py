"""Clocks. Every time in `routing` is an integer count of milliseconds.

The core never reads the system time directly: it asks the injected :class:`Clock`.
Java reads ``System.currentTimeMillis()`` inline (``RouteInfoManager``); that is the
injection point this module replaces (spec D9).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

from ._errors import InvalidRequest, InvalidType

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now_ms() -> int`` (milliseconds). Must never go backwards."""

    def now_ms(self) -> int:
        """The current instant in ms."""
        ...


class SystemClock:
    """Monotonic time, anchored to wall time once at construction.

    ``now_ms()`` = wall time at construction + monotonic time elapsed since. It therefore
    reads like epoch milliseconds but never jumps when NTP adjusts the wall clock.
    Cost: O(1).
    """

    __slots__ = ("_anchor_mono_ns", "_anchor_wall_ms")

    def __init__(self) -> None:
        self._anchor_wall_ms = time.time_ns() // 1_000_000
        self._anchor_mono_ns = time.monotonic_ns()

    def now_ms(self) -> int:
        return self._anchor_wall_ms + (time.monotonic_ns() - self._anchor_mono_ns) // 1_000_000

    def __repr__(self) -> str:
        return f"SystemClock(now_ms={self.now_ms()})"


class ManualClock:
    """A clock that moves only when told to, for tests and replays.

    >>> clock = ManualClock(start_ms=1_000)
    >>> clock.advance(500)
    1500
    >>> clock.set(2_000)
    2000
    >>> clock.set(10)
    Traceback (most recent call last):
    ...
    routing.InvalidRequest: ManualClock cannot go backwards: set(ms=10) but now_ms is 2000

    Thread-safe: ``advance`` and ``set`` are atomic.
    """

    __slots__ = ("_lock", "_now_ms")

    def __init__(self, start_ms: int = 0) -> None:
        _check_int("start_ms", start_ms)
        if start_ms < 0:
            raise InvalidRequest(f"ManualClock start_ms must be >= 0, got {start_ms!r}",
                                 field="start_ms", value=start_ms)
        self._now_ms = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (>= 0) milliseconds; return the new time."""
        _check_int("ms", ms)
        if ms < 0:
            raise InvalidRequest(f"ManualClock cannot go backwards: advance(ms={ms})",
                                 field="ms", value=ms)
        with self._lock:
            self._now_ms += ms
            return self._now_ms

    def set(self, ms: int) -> int:
        """Jump to instant ``ms``, which must not be earlier than now; return it."""
        _check_int("ms", ms)
        with self._lock:
            if ms < self._now_ms:
                raise InvalidRequest(
                    f"ManualClock cannot go backwards: set(ms={ms}) but now_ms is {self._now_ms}",
                    field="ms", value=ms)
            self._now_ms = ms
            return ms

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"


def _check_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(f"{name} must be an int (milliseconds), got {value!r}", field=name,
                          value=value)
