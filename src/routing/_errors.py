"""The exceptions `routing` raises. Every one derives from :class:`RoutingError`."""

from __future__ import annotations

__all__ = ["InvalidRequest", "InvariantViolation", "NotReady", "RoutingError"]


class RoutingError(Exception):
    """Base class of every error this library raises on purpose."""


class InvalidRequest(RoutingError, ValueError):
    """An argument or decoded document is malformed.

    The message names the field and the offending value. A call that raises this
    changed nothing (spec principle 4: all-or-nothing writes).
    """

    def __init__(self, message: str, *, field: str | None = None, value: object = None) -> None:
        super().__init__(message)
        #: Dotted name of the field that was wrong, when known (``"registration.broker_addr"``).
        self.field = field
        #: The offending value, when known.
        self.value = value


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
