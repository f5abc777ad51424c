"""The pytest fixtures that serve fakes on the wire (registered by
`routing.testing.pytest_plugin`; ``routing.remoting`` is imported when one is used).

* ``nameserver_on_wire`` — ``fake_nameserver`` served over RocketMQ's remoting protocol on
  a free loopback port: connect clients and brokers to ``ns.wire.address``.
* ``nameservers_on_wire`` — a factory: ``nameservers_on_wire(2)`` returns two more fakes
  on ``routing_clock`` and ``routing_config``, each on its own port (one thread serves
  them all); ``";".join(ns.wire.address for ns in servers)`` is a ``namesrvAddr``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from .._messages import RoutingConfig
from ._fake import FakeClock, FakeNameServer

if TYPE_CHECKING:
    from ._wire import Wire

__all__ = ["nameserver_on_wire", "nameservers_on_wire"]


@pytest.fixture
def nameserver_on_wire(fake_nameserver: FakeNameServer) -> Iterator[FakeNameServer]:
    """``fake_nameserver``, served on a free loopback port (``ns.wire.address``) for the
    test; the port closes at teardown."""
    from ._wire import serve_on_wire

    with serve_on_wire(fake_nameserver):
        yield fake_nameserver


@pytest.fixture
def nameservers_on_wire(routing_clock: FakeClock, routing_config: RoutingConfig
                        ) -> Iterator[Callable[[int], tuple[FakeNameServer, ...]]]:
    """A factory of served fakes sharing ``routing_clock``: ``nameservers_on_wire(n)``
    returns ``n`` new ones (named ``namesrv-1``…), each on its own free loopback port."""
    from ._wire import Wire

    wires: list[Wire] = []
    made = 0

    def make(count: int = 2) -> tuple[FakeNameServer, ...]:
        nonlocal made
        if not wires:
            wires.append(Wire())
        servers = []
        for _ in range(count):
            made += 1
            ns = FakeNameServer(clock=routing_clock, config=routing_config,
                                name=f"namesrv-{made}")
            wires[0].serve(ns)
            servers.append(ns)
        return tuple(servers)

    yield make
    for wire in wires:
        wire.close()
