"""The assertions of `FakeNameServer` (``assert_route``, ``assert_no_route``,
``assert_expired``, ``assert_alive``): each compares expected with actual and, on failure,
shows both side by side with the route and the recent events."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from .._values import Perm, TopicRouteData
from ._errors import RouteMismatch
from ._render import route_lines, side_by_side

if TYPE_CHECKING:
    from .._clock import ManualClock
    from .._manager import RouteInfoManager

__all__ = ["RouteAssertions"]


class _HasAddr(Protocol):
    @property
    def addr(self) -> str: ...


class RouteAssertions:
    """Mixin: assertions over ``self.manager`` (a `RouteInfoManager`) for a fake name server."""

    manager: RouteInfoManager
    clock: ManualClock
    name: str

    def event_log(self, last: int | None = None) -> str:
        raise NotImplementedError  # pragma: no cover - FakeNameServer defines it

    def assert_route(self, topic: str, *, brokers: Iterable[str] | None = None,
                     writable_queues: int | None = None, readable_queues: int | None = None,
                     writable_brokers: Iterable[str] | None = None,
                     addrs: Mapping[str, Mapping[int, str]] | None = None) -> TopicRouteData:
        """Assert that ``topic`` has a route with the given properties; return it.

        ``brokers``: exact set of broker names in the route. ``writable_queues`` /
        ``readable_queues``: total write queues over rows with the write bit / read queues
        over rows with the read bit. ``writable_brokers``: exact set of names whose row
        has the write bit. ``addrs``: exact ``{broker name: {id: addr}}`` for the named
        groups. On failure the message shows expected and actual side by side, plus the
        recent events.
        """
        route = self._peek(topic)
        expected: list[tuple[str, str, str]] = []
        if brokers is not None:
            want = sorted(set(brokers))
            have = sorted(q.broker_name for q in route.queue_datas) if route else []
            expected.append(("brokers", ", ".join(want) or "-", ", ".join(have) or "-"))
        if writable_queues is not None:
            have_w = route.writable_queue_count if route else 0
            expected.append(("writable queues", str(writable_queues), str(have_w)))
        if readable_queues is not None:
            have_r = sum(q.read_queue_nums for q in route.queue_datas
                         if q.perm & Perm.READ) if route else 0
            expected.append(("readable queues", str(readable_queues), str(have_r)))
        if writable_brokers is not None:
            want_wb = sorted(set(writable_brokers))
            have_wb = sorted(q.broker_name for q in route.queue_datas
                             if q.writable) if route else []
            expected.append(("writable brokers", ", ".join(want_wb) or "-",
                             ", ".join(have_wb) or "-"))
        if addrs is not None:
            groups = {b.broker_name: b.broker_addrs for b in route.broker_datas} if route \
                else {}
            for name, members in sorted(addrs.items()):
                want_a = _addrs_text(members)
                have_a = _addrs_text(groups[name]) if name in groups else "(absent)"
                expected.append((f"addrs of {name}", want_a, have_a))
        failed = route is None or any(want != have for _, want, have in expected)
        if failed:
            rows = [("route", "present", "present" if route else "(no route)"), *expected]
            raise RouteMismatch(self._failure(f"route of {topic!r}", rows, route))
        assert route is not None
        return route

    def assert_no_route(self, topic: str) -> None:
        """Assert that ``topic`` has no route."""
        route = self._peek(topic)
        if route is not None:
            raise RouteMismatch(self._failure(
                f"route of {topic!r}", [("route", "(no route)", "present")], route))

    def assert_expired(self, *brokers: _HasAddr | str) -> None:
        """Assert that each broker (a handle or an address) has no live entry and is no
        member of any group: it expired, disconnected or was unregistered."""
        self._assert_liveness(brokers, alive=False)

    def assert_alive(self, *brokers: _HasAddr | str) -> None:
        """Assert that each broker (a handle or an address) has a live entry."""
        self._assert_liveness(brokers, alive=True)

    def _assert_liveness(self, brokers: Sequence[_HasAddr | str], *, alive: bool) -> None:
        live = {k.addr: v for k, v in self.manager.live_brokers().items()}
        members = {a: n for n, g in self.manager.cluster_info().broker_addr_table.items()
                   for a in g.broker_addrs.values()}
        rows = []
        for b in brokers:
            addr = b if isinstance(b, str) else b.addr
            info = live.get(addr)
            have = "absent" if info is None else (
                f"live, last update {info.last_update_timestamp} ms, timeout "
                f"{info.heartbeat_timeout_ms} ms")
            if not alive and info is None and addr in members:
                have = f"no live entry but still a member of {members[addr]}"
            ok = (info is not None) if alive else (info is None and addr not in members)
            rows.append((addr, "live" if alive else "absent", have if not ok else
                         ("live" if alive else "absent")))
        if any(want != have for _, want, have in rows):
            raise RouteMismatch(self._failure("liveness", rows, None))

    def _failure(self, what: str, rows: list[tuple[str, str, str]],
                 route: TopicRouteData | None) -> str:
        width = max(len(r[0]) for r in rows)
        left = [f"{name:<{width}}  {want}" for name, want, _ in rows]
        right = [have for _, _, have in rows]
        table = side_by_side("expected", left, "actual", right,
                             differs=[want != have for _, want, have in rows])
        details = "\n".join("    " + line for line in route_lines(route))
        return (f"{what} at {self.clock.now_ms()} ms on {self.name}:\n{table}\n"
                f"  actual route:\n{details}\n  recent events:\n"
                + "\n".join("    " + line for line in self.event_log(last=12).splitlines()))

    def _peek(self, topic: str) -> TopicRouteData | None:
        return self.manager.pickup_route(topic)


def _addrs_text(members: Mapping[int, str]) -> str:
    return ", ".join(f"{i}={a}" for i, a in sorted(members.items())) or "-"
