"""What a `FakeNameServer` knows of the endpoint serving it on the wire (``ns.wire``).

`WireFace` is the endpoint's public face (what a test calls on ``ns.wire``) plus the three
hooks the fake calls when it stops, starts and expires brokers. `WireEndpoint`
(``_wire.py``) implements it; the fake names only this protocol, so ``_fake.py`` never
imports the wire side (which imports the fake) and importing the fake never imports
``routing.remoting``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .._messages import ExpiredBroker
    from .._values import TopicRouteData
    from ._faults import Faults
    from ._wire_records import WireConnection, WireRequest

__all__ = ["WireFace"]


class WireFace(Protocol):
    """A fake name server's endpoint on the wire, as its fake and its test see it (see
    `routing.testing.WireEndpoint` for each member's contract)."""

    host: str
    port: int
    #: The fault rules of this endpoint (`routing.testing.Faults`).
    faults: Faults

    @property
    def address(self) -> str: ...

    @property
    def frozen(self) -> bool: ...

    @property
    def held(self) -> int: ...

    def freeze(self) -> None: ...

    def thaw(self) -> None: ...

    def view_route(self, topic: str) -> TopicRouteData | None: ...

    def connections(self) -> tuple[WireConnection, ...]: ...

    def requests(self, code: int | None = None) -> tuple[WireRequest, ...]: ...

    def disconnect(self, broker: str | None = None, *, connection: int | None = None) -> int: ...

    def wait_for(self, condition: Callable[[], bool], timeout_s: float = 10.0) -> None: ...

    # the fake's hooks, called holding its lock

    def _expired(self, gone: tuple[ExpiredBroker, ...]) -> None: ...

    def _stopped(self) -> None: ...

    def _started(self) -> None: ...
