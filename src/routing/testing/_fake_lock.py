"""The lock that makes a `FakeNameServer` safe to drive from a test while it is served.

A fake served on the wire (`routing.testing.serve_on_wire`) is touched by two threads: the
test's, calling ``ns.tick``, ``broker.go_quiet`` and the rest, and the server loop's,
answering requests. `FakeLock` is the one lock they share (one per `FakeClock`, so every
name server moved by that clock is covered); `guarded` wraps every public method and
property of a class so that it runs holding it.

Work that must wait for the server loop (closing a stopped name server's port) cannot
wait while the lock is held, since the loop may be waiting for the same lock to answer a
request: it is handed to `FakeLock.defer` and runs once the outermost holder lets go.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["FakeLock", "guarded"]

_C = TypeVar("_C", bound=type)


class FakeLock:
    """A re-entrant lock with work deferred to its release (see the module docstring).

    Uncontended, entering and leaving costs about 1 µs; a fake that is not served has one
    thread and never waits.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()

    def __enter__(self) -> FakeLock:
        self._lock.acquire()
        self._local.depth = getattr(self._local, "depth", 0) + 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._local.depth -= 1
        deferred: list[Callable[[], object]] = []
        if self._local.depth == 0:
            deferred = getattr(self._local, "deferred", [])
            self._local.deferred = []
        self._lock.release()
        for work in deferred:
            work()

    @property
    def held(self) -> bool:
        """Whether the calling thread holds the lock."""
        return getattr(self._local, "depth", 0) > 0

    def defer(self, work: Callable[[], object]) -> None:
        """Run ``work`` once the calling thread no longer holds the lock (now if it does
        not hold it)."""
        if not self.held:
            work()
            return
        pending: list[Callable[[], object]] = getattr(self._local, "deferred", [])
        pending.append(work)
        self._local.deferred = pending


def guarded(lock_of: Callable[[Any], FakeLock]) -> Callable[[_C], _C]:
    """A class decorator: every public method and property of the class (inherited ones
    included) runs holding ``lock_of(self)``. Private names are left alone: they are only
    reached through public ones."""

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock_of(self):
                return function(self, *args, **kwargs)

        return locked

    def decorate(cls: _C) -> _C:
        for name in dir(cls):
            if name.startswith("_"):
                continue
            attr = inspect.getattr_static(cls, name)
            if isinstance(attr, property) and attr.fget is not None:
                setattr(cls, name, property(wrap(attr.fget), attr.fset, attr.fdel,
                                            attr.__doc__))
            elif inspect.isfunction(attr):
                setattr(cls, name, wrap(attr))
        return cls

    return decorate
