"""The test kit's errors: each a `routing.RoutingError`, with the built-in base tests catch."""

from __future__ import annotations

from .._errors import RoutingError

__all__ = ["ClockReentered", "NameServerUnavailable", "RouteMismatch", "UnknownName",
           "WaitTimedOut"]


class NameServerUnavailable(RoutingError, ConnectionError):
    """The fake name server was stopped with `FakeNameServer.stop`: requests fail."""


class RouteMismatch(RoutingError, AssertionError):
    """A test kit assertion failed: the name server's routes, liveness or outcomes differ
    from what was expected (`FakeNameServer.assert_route` and the other ``assert_*``
    helpers, `RouteStateMachine`'s comparisons with the model). An ``AssertionError``, so
    test runners report it as a failed assertion; the message shows expected beside
    actual."""


class UnknownName(RoutingError, KeyError):
    """A name the test kit does not know: a `Fleet` group, a `FakeBroker` topic. A
    ``KeyError``, as a lookup's failure is; ``field`` and ``value`` name it."""

    def __str__(self) -> str:  # the message as written (KeyError would quote it)
        return str(self.args[0]) if self.args else ""


class ClockReentered(RoutingError, RuntimeError):
    """A `FakeClock` was moved from inside the work it runs (a route listener or a wrapper
    moving time during a scheduled scan or registration): time would fork."""


class WaitTimedOut(RoutingError, TimeoutError):
    """A wait for what a real process does on its own (`WireEndpoint.wait_for`: a broker
    registering, a client asking) ran out of wall time; ``field`` is ``timeout_s``. A
    ``TimeoutError``, as any wait's end is."""


# Tracebacks and doctests name them where users import them: ``routing.testing.RouteMismatch``.
for _error in (NameServerUnavailable, RouteMismatch, UnknownName, ClockReentered,
               WaitTimedOut):
    _error.__module__ = "routing.testing"
del _error
