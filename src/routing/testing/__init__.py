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
  the rest of this module works without hypothesis);
* `serve_on_wire` — the same fakes over RocketMQ's remoting protocol on loopback ports, for
  real clients and brokers, with faults on demand (`Faults`) and the fake's clock still the
  test's (imported lazily with `Wire`, `WireEndpoint` and the rest, see
  ``docs/testing-clients.md``).

The pytest fixtures live in `routing.testing.pytest_plugin`, the strategies in
`routing.testing.strategies`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import (
    ClockReentered,
    NameServerUnavailable,
    RouteMismatch,
    UnknownName,
    WaitTimedOut,
)
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
    from ._control import start_control
    from ._faults import Fault, FaultError, Faults
    from ._fleet import FakeFleet
    from ._machine import RouteStateMachine
    from ._wire import Wire, WireEndpoint, WireError, serve_on_wire
    from ._wire_records import WireConnection, WireRequest

__all__ = (
    "FakeFleet",
    "start_control",
    "AddWritePermOp",
    "AdvanceOp",
    "BrokerSpec",
    "BrokerState",
    "ClockReentered",
    "CloseChannelOp",
    "DeleteTopicOp",
    "Fault",
    "FaultError",
    "Faults",
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
    "WaitTimedOut",
    "WipeWritePermOp",
    "Wire",
    "WireConnection",
    "WireEndpoint",
    "WireError",
    "WireRequest",
    "apply_operation",
    "describe",
    "route_lines",
    "run_operations",
    "serve_on_wire",
    "side_by_side",
)

#: Names imported on first use (they pull in ``routing.remoting``), by module.
_LAZY = {"Fault": "_faults", "FaultError": "_faults", "Faults": "_faults",
         "Wire": "_wire", "WireEndpoint": "_wire", "WireError": "_wire",
         "serve_on_wire": "_wire", "WireConnection": "_wire_records",
         "WireRequest": "_wire_records", "FakeFleet": "_fleet",
         "start_control": "_control"}


def __getattr__(name: str) -> Any:
    # The state machine needs hypothesis (the ``testing`` extra); import it on first use.
    if name == "RouteStateMachine":
        from ._machine import RouteStateMachine

        return RouteStateMachine
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
