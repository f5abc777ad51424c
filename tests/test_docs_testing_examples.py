"""The full examples of docs/testing.md, as real tests.

1. Testing a producer's failover logic against a fake name server (pytest fixtures).
2. Testing a wrapper around RouteInfoManager with the state machine.
3. Writing property tests with the strategies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.testing import (
    FakeBroker,
    FakeClock,
    FakeNameServer,
    NameServerUnavailable,
    Operation,
    RouteModel,
    RouteStateMachine,
    apply_operation,
)
from routing.testing import strategies as rst

# =========================================================================== 1. a producer


class SendFailed(Exception):
    """The broker did not answer."""


class Producer:
    """A toy producer with RocketMQ's failover rules.

    * Routes come from the first name server that answers, and are refreshed every
      ``refresh_ms`` (the RocketMQ client polls every 30 000 ms).
    * Queues are picked round-robin among writable ones; a failed send is retried up
      to ``retries`` times, avoiding the broker that just failed.
    """

    def __init__(self, nameservers: Sequence[FakeNameServer], clock: r.Clock,
                 send: Callable[[str], None], *, refresh_ms: int = 30_000,
                 retries: int = 2) -> None:
        self.nameservers, self.clock, self.send_to = nameservers, clock, send
        self.refresh_ms, self.retries = refresh_ms, retries
        self.routes: dict[str, tuple[int, r.TopicRouteData | None]] = {}
        self.counter = 0

    def route(self, topic: str) -> r.TopicRouteData | None:
        fetched_at, route = self.routes.get(topic, (None, None))
        now = self.clock.now_ms()
        if fetched_at is None or now - fetched_at >= self.refresh_ms:
            for ns in self.nameservers:
                try:
                    route = ns.route(topic)
                except NameServerUnavailable:
                    continue
                self.routes[topic] = (now, route)
                break
        return route

    def send(self, topic: str) -> str:
        """Send one message; return the name of the broker that took it."""
        route = self.route(topic)
        if route is None:
            raise LookupError(f"no route for {topic}")
        queues = [q.broker_name for q in route.queue_datas if q.writable
                  for _ in range(q.write_queue_nums)]
        avoid = None
        for _ in range(1 + self.retries):
            candidates = [b for b in queues if b != avoid] or queues
            broker = candidates[self.counter % len(candidates)]
            self.counter += 1
            try:
                self.send_to(broker)
                return broker
            except SendFailed:
                avoid = broker
        raise SendFailed(topic)


def network(*brokers: FakeBroker) -> Callable[[str], None]:
    """Sends succeed to brokers that are online."""
    by_name = {b.name: b for b in brokers}

    def send(broker_name: str) -> None:
        if by_name[broker_name].state != "online":
            raise SendFailed(broker_name)

    return send


@pytest.mark.routing(heartbeat_timeout_ms=30_000, scan_interval_ms=5_000)
def test_producer_fails_over_when_a_broker_crashes(fake_nameserver: FakeNameServer,
                                                  routing_clock: FakeClock) -> None:
    ns = fake_nameserver
    a = ns.broker(name="broker-a", topics=["Orders"], queues=2)
    b = ns.broker(name="broker-b", topics=["Orders"], queues=2)
    producer = Producer([ns], routing_clock, network(a, b))
    assert {producer.send("Orders") for _ in range(4)} == {"broker-a", "broker-b"}

    a.go_quiet()  # broker-a crashes: its route lingers until expiry
    ns.assert_route("Orders", brokers=["broker-a", "broker-b"])
    assert [producer.send("Orders") for _ in range(4)] == ["broker-b"] * 4  # retries

    ns.tick(35_000)  # 30 000 ms timeout, strict, then the 35 000 ms scan
    ns.assert_expired(a)
    ns.assert_route("Orders", brokers=["broker-b"], writable_queues=2)
    producer.route("Orders")  # the 30 s refresh picked up the new route
    assert producer.routes["Orders"][1] == ns.route("Orders")


def test_producer_uses_the_next_name_server_when_one_is_down() -> None:
    ns1 = FakeNameServer(name="ns1")
    ns2 = FakeNameServer(name="ns2", clock=ns1.clock)  # one clock for both
    a1 = ns1.broker(name="broker-a", topics=["Orders"], addr="10.0.0.1:10911")
    a2 = ns2.broker(name="broker-a", topics=["Orders"], addr="10.0.0.1:10911")
    producer = Producer([ns1, ns2], ns1.clock, network(a1))
    ns1.stop()
    assert producer.send("Orders") == "broker-a"
    assert ns1.events_of("unavailable") and a2.is_live

    a1.disconnect()  # the broker drops its connection to ns1 only
    ns1.start()
    ns1.tick(30_000)
    ns1.assert_no_route("Orders")
    ns2.assert_route("Orders", brokers=["broker-a"])


# =========================================================================== 2. a wrapper


class CachingRouter:
    """A host-side wrapper: serves routes from its own cache, keyed by route_version.

    This is the kind of code the state machine checks: the cache must never serve a
    route the manager no longer has.
    """

    def __init__(self, manager: r.RouteInfoManager) -> None:
        self.manager = manager
        self.cache: dict[str, tuple[int, r.TopicRouteData | None]] = {}

    def pickup_route(self, topic: str) -> r.TopicRouteData | None:
        version = self.manager.route_version(topic)
        cached = self.cache.get(topic)
        if cached is None or cached[0] != version:
            cached = self.cache[topic] = (version, self.manager.pickup_route(topic))
        return cached[1]

    def __getattr__(self, name: str) -> Any:  # everything else goes to the manager
        return getattr(self.manager, name)


class CachingRouterMachine(RouteStateMachine):
    def make_system(self, *, clock: FakeClock, config: r.RoutingConfig) -> Any:
        return CachingRouter(r.RouteInfoManager(clock=clock, config=config))


TestCachingRouter = CachingRouterMachine.TestCase
TestCachingRouter.settings = settings(max_examples=max(10, settings().max_examples // 4),
                                      stateful_step_count=25)


# =========================================================================== 3. properties


def pick_queue(route: r.TopicRouteData, n: int) -> tuple[str, int] | None:
    """The n-th writable queue of a route, round-robin, or None if nothing is writable."""
    queues = [(q.broker_name, i) for q in route.queue_datas if q.writable
              for i in range(q.write_queue_nums)]
    return queues[n % len(queues)] if queues else None


@given(route=st.from_type(r.TopicRouteData), n=st.integers(0, 10_000))
def test_pick_queue_only_picks_writable_queues(route: r.TopicRouteData, n: int) -> None:
    choice = pick_queue(route, n)
    if route.writable_queue_count == 0:
        assert choice is None
    else:
        assert choice is not None
        row = next(q for q in route.queue_datas if q.broker_name == choice[0])
        assert row.writable and 0 <= choice[1] < row.write_queue_nums


@given(ops=rst.operation_sequences(max_size=30))
def test_every_listed_topic_has_a_route_in_a_coherent_fleet(ops: list[Operation]) -> None:
    clock = FakeClock(0)
    mgr = r.RouteInfoManager(clock=clock)
    model = RouteModel()
    for op in ops:
        assert apply_operation(mgr, op, clock=clock) == model.apply(op)
    assert all(mgr.pickup_route(t) is not None for t in mgr.all_topics())


@given(reg=rst.registrations(topics=rst.topic_tables(min_size=2, max_size=5),
                             timeouts=st.none()),
       timeout=st.integers(1, 200_000))
def test_a_registered_broker_expires_exactly_after_its_timeout(reg: r.Registration,
                                                                timeout: int) -> None:
    clock = r.ManualClock(0)
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(
        default_heartbeat_timeout_ms=timeout))
    assert mgr.register(reg).accepted
    clock.advance(timeout)
    assert mgr.scan_expired() == ()  # last + timeout == now: alive (D1, strict)
    clock.advance(1)
    assert [e.broker_addr for e in mgr.scan_expired()] == [reg.broker_addr]
