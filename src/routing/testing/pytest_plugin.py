"""pytest plugin for `routing` (registered through the ``pytest11`` entry point).

Fixtures, each function-scoped:

* ``routing_config`` — the `RoutingConfig` the others use. Override it in a conftest to
  change settings for a directory; by default it is built from the ``routing`` marker.
* ``routing_clock`` — a `routing.testing.FakeClock` (a `ManualClock`) at ``start_ms``.
* ``route_manager`` — a `RouteInfoManager` on that clock and config.
* ``fake_nameserver`` — a `routing.testing.FakeNameServer` on the same clock and config
  (with its own manager: ``fake_nameserver.manager``). Advancing the clock, from
  anywhere, runs its scans at every ``scan_interval_ms``.
* ``nameserver_on_wire`` — ``fake_nameserver`` served over RocketMQ's remoting protocol on
  a free loopback port (``ns.wire.address``), for real clients and brokers;
  ``nameservers_on_wire(n)`` makes ``n`` more on the same clock, one port each
  (``routing.testing._wire_fixtures``, docs/testing-clients.md).

Marker::

    @pytest.mark.routing(start_ms=0, heartbeat_timeout_ms=120_000, scan_interval_ms=5_000)

Markers on a class or module apply too; the closest value of each keyword wins.
Requires pytest (``pip install 'rocketmq-routing[testing]'``).
"""

from __future__ import annotations

from typing import Any

import pytest

from .._errors import InvalidType
from .._manager import RouteInfoManager
from .._messages import RoutingConfig
from ._fake import FakeClock, FakeNameServer
from ._wire_fixtures import nameserver_on_wire, nameservers_on_wire

__all__ = ["fake_nameserver", "nameserver_on_wire", "nameservers_on_wire", "route_manager",
           "routing_clock", "routing_config"]

MARKER = "routing"
_KEYWORDS = ("start_ms", "heartbeat_timeout_ms", "scan_interval_ms")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(start_ms=0, heartbeat_timeout_ms=120000, scan_interval_ms=5000): "
        "configure the routing fixtures (routing_clock, route_manager, fake_nameserver); "
        "times in ms")


def routing_marker_options(node: pytest.Item) -> dict[str, int]:
    """The ``routing`` marker keywords that apply to ``node`` (closest marker wins).

    Raises `routing.InvalidType` (a ``TypeError``) for positional arguments or unknown
    keywords.
    """
    options: dict[str, int] = {}
    for marker in node.iter_markers(MARKER):  # closest first
        if marker.args:
            raise InvalidType(f"@pytest.mark.{MARKER} takes keyword arguments only "
                              f"({', '.join(_KEYWORDS)}), got {marker.args!r}",
                              field=f"{MARKER}.args", value=marker.args)
        unknown = sorted(set(marker.kwargs) - set(_KEYWORDS))
        if unknown:
            raise InvalidType(f"@pytest.mark.{MARKER} got unknown keyword(s) {unknown}; "
                              f"expected some of {list(_KEYWORDS)}", field=MARKER,
                              value=unknown)
        for key, value in marker.kwargs.items():
            options.setdefault(key, value)
    return options


def _options(request: pytest.FixtureRequest) -> dict[str, int]:
    node: Any = request.node
    return routing_marker_options(node)


@pytest.fixture
def routing_config(request: pytest.FixtureRequest) -> RoutingConfig:
    """The `RoutingConfig` for the routing fixtures; override it to change settings.

    From the marker: ``heartbeat_timeout_ms`` → ``default_heartbeat_timeout_ms``,
    ``scan_interval_ms`` → ``scan_interval_ms``; everything else is the default.
    """
    options = _options(request)
    kwargs: dict[str, Any] = {}
    if "heartbeat_timeout_ms" in options:
        kwargs["default_heartbeat_timeout_ms"] = options["heartbeat_timeout_ms"]
    if "scan_interval_ms" in options:
        kwargs["scan_interval_ms"] = options["scan_interval_ms"]
    return RoutingConfig(**kwargs)


@pytest.fixture
def routing_clock(request: pytest.FixtureRequest) -> FakeClock:
    """A `FakeClock` at the marker's ``start_ms`` (default 0 ms)."""
    return FakeClock(_options(request).get("start_ms", 0))


@pytest.fixture
def route_manager(routing_clock: FakeClock, routing_config: RoutingConfig) -> RouteInfoManager:
    """A fresh `RouteInfoManager` reading ``routing_clock``, configured by
    ``routing_config``."""
    return RouteInfoManager(clock=routing_clock, config=routing_config)


@pytest.fixture
def fake_nameserver(routing_clock: FakeClock, routing_config: RoutingConfig) -> FakeNameServer:
    """A `FakeNameServer` on ``routing_clock`` and ``routing_config``; its scans run every
    ``routing_config.scan_interval_ms`` as the clock moves."""
    return FakeNameServer(clock=routing_clock, config=routing_config)
