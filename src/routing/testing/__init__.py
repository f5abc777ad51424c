"""The routing test kit: a fake name server, operations, a reference model, a state machine.

Shipped inside the package, the way fakeredis, pytest-httpserver, time-machine and
``zarr.testing`` ship theirs:

* `FakeNameServer` — a `RouteInfoManager` plus a `FakeClock`, with fake brokers that
  register, heartbeat, create topics, crash and disconnect, a client-side ``route()``,
  ``tick(ms)``, assertion helpers and an event log;
* operations as values (`RegisterOp`, `AdvanceOp`, …), `apply_operation` and
  `run_operations` to replay them, and `RouteModel`, a slow reference implementation;
* `RouteStateMachine` — a hypothesis ``RuleBasedStateMachine`` comparing a system under
  test with `RouteModel` (needs ``pip install 'rocketmq-routing[testing]'``; imported lazily, so
  the rest of this module works without hypothesis).

The pytest fixtures live in `routing.testing.pytest_plugin`, the strategies in
`routing.testing.strategies`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import ClockReentered, NameServerUnavailable, RouteMismatch, UnknownName
from ._fake import BrokerState, FakeBroker, FakeChannel, FakeClock, FakeEvent, FakeNameServer
from ._model import RouteModel
from ._ops import (
    AddWritePermOp,
    AdvanceOp,
    BrokerSpec,
    CloseChannelOp,
    DeleteTopicOp,
    Fleet,
    GroupSpec,
    HeartbeatOp,
    Operation,
    Outcome,
    QueryDataVersionOp,
    RegisterOp,
    RegisterTopicOp,
    RoutingSystem,
    ScanOp,
    UnregisterOp,
    WipeWritePermOp,
    apply_operation,
    describe,
    run_operations,
)
from ._render import route_lines, side_by_side

if TYPE_CHECKING:
    from ._machine import RouteStateMachine

__all__ = (
    "AddWritePermOp",
    "AdvanceOp",
    "BrokerSpec",
    "BrokerState",
    "ClockReentered",
    "CloseChannelOp",
    "DeleteTopicOp",
    "FakeBroker",
    "FakeChannel",
    "FakeClock",
    "FakeEvent",
    "FakeNameServer",
    "Fleet",
    "GroupSpec",
    "HeartbeatOp",
    "NameServerUnavailable",
    "Operation",
    "Outcome",
    "QueryDataVersionOp",
    "RegisterOp",
    "RegisterTopicOp",
    "RouteMismatch",
    "RouteModel",
    "RouteStateMachine",
    "RoutingSystem",
    "ScanOp",
    "UnknownName",
    "UnregisterOp",
    "WipeWritePermOp",
    "apply_operation",
    "describe",
    "route_lines",
    "run_operations",
    "side_by_side",
)


def __getattr__(name: str) -> Any:
    # The state machine needs hypothesis (the ``testing`` extra); import it on first use.
    if name == "RouteStateMachine":
        from ._machine import RouteStateMachine

        return RouteStateMachine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
