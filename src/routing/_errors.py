"""The exceptions `routing` raises. Every exception it raises on purpose derives from
:class:`RoutingError`, in the core and in every capability (``routing.journal``,
``routing.testing``, ``routing.sim``, ``routing.heartbeat``, the CLI's own parsing), so
``except routing.RoutingError`` catches them all and nothing else.

Where callers already catch a built-in exception for the same mistake, the error keeps it
as a second base: `InvalidRequest` is a ``ValueError``, `InvalidType` a ``TypeError``,
`InvariantViolation` an ``AssertionError`` (and in the test kit ``NameServerUnavailable`` a
``ConnectionError``, ``RouteMismatch`` an ``AssertionError``, ``UnknownName`` a
``KeyError``). An error about one argument names it and its value: in the message, and as
``field`` and ``value``.

What is left to built-in exceptions, on purpose, is protocol: ``KeyError`` from a mapping's
``__getitem__``, ``AttributeError`` from a frozen value's ``__setattr__`` or a module's
``__getattr__``, ``NotImplementedError``, and click's own exceptions in the CLI (click prints
them as usage errors). ``tests/test_errors.py`` checks every ``raise`` against that list.

>>> import routing as r
>>> try:
...     r.ManualClock(start_ms=0).advance(-5)
... except r.RoutingError as exc:
...     print(type(exc).__name__, exc.field, exc.value, isinstance(exc, ValueError))
InvalidRequest ms -5 True
"""

from __future__ import annotations

__all__ = ["InvalidRequest", "InvalidType", "InvariantViolation", "NotReady", "RoutingError"]


class RoutingError(Exception):
    """Base class of every error this library raises on purpose.

    ``field`` (a dotted name such as ``"registration.broker_addr"``) and ``value`` say which
    argument was wrong and how, when one was; both are None otherwise.
    """

    def __init__(self, message: str = "", *, field: str | None = None,
                 value: object = None) -> None:
        super().__init__(message)
        #: Dotted name of the field that was wrong, when known (``"registration.broker_addr"``).
        self.field = field
        #: The offending value, when known.
        self.value = value


class InvalidRequest(RoutingError, ValueError):
    """An argument or decoded document is malformed.

    The message names the field and the offending value. A call that raises this
    changed nothing (spec principle 4: all-or-nothing writes).
    """


class InvalidType(RoutingError, TypeError):
    """An argument is not of the kind the call takes at all (a float where milliseconds are
    an ``int``, an object that is not an operation or a strategy): a mistake in the calling
    code rather than in the data. The message names the field and the value."""


class NotReady(RoutingError):
    """The name server is inside its readiness window (``RoutingConfig.wait_for_service_ms``).

    Java answers SYSTEM_ERROR "name server not ready" (``ClientRequestProcessor``).
    """

    def __init__(self, message: str, *, ready_at_ms: int) -> None:
        super().__init__(message)
        #: The clock instant (ms) from which routes are served.
        self.ready_at_ms = ready_at_ms


class InvariantViolation(RoutingError, AssertionError):
    """`RouteInfoManager.check_invariants` found broken rules; ``problems`` lists all of them."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__(
            f"{len(problems)} invariant(s) broken:\n" + "\n".join(f"  - {p}" for p in problems)
        )


# Tracebacks and doctests name them where users import them: ``routing.InvalidRequest``.
for _error in (RoutingError, InvalidRequest, InvalidType, NotReady, InvariantViolation):
    _error.__module__ = "routing"
del _error
