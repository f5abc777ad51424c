"""routing.testing.RouteStateMachine: RouteInfoManager against RouteModel, and proof that
the machine catches wrong systems with a readable trace."""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

import routing as r
from routing.testing import FakeClock, Fleet, RouteStateMachine
from routing.testing import strategies as rst

# --------------------------------------------------------------------------- the real thing


class ManagerMachine(RouteStateMachine):
    """The default machine: every rule, every drawn config."""


class NoPartialMachine(RouteStateMachine):
    """Full registrations only, so delete-by-omission (when drawn) applies on every one."""

    partial_registrations = False


class ActingMasterMachine(RouteStateMachine):
    """Every group in acting-master mode and support on: write-bit wipes of master-less
    groups, prime slaves writing read-only rows, and the route rewrite."""

    def fleet_strategy(self) -> st.SearchStrategy[Fleet]:
        return rst.fleets(acting=st.just(True))

    def config_strategy(self) -> st.SearchStrategy[r.RoutingConfig]:
        return rst.routing_configs(support_acting_master=st.just(True))


TestManagerMachine = ManagerMachine.TestCase
TestManagerMachine.settings = settings(stateful_step_count=30)
TestNoPartialMachine = NoPartialMachine.TestCase
TestNoPartialMachine.settings = settings(
    max_examples=max(10, settings().max_examples // 4), stateful_step_count=30)
TestActingMasterMachine = ActingMasterMachine.TestCase
TestActingMasterMachine.settings = settings(
    max_examples=max(10, settings().max_examples // 4), stateful_step_count=30)


# --------------------------------------------------------------------------- mutants


class Wrapper:
    """Forwards everything to a manager; mutants override one method."""

    def __init__(self, manager: r.RouteInfoManager) -> None:
        self.m = manager

    def register(self, registration: r.Registration) -> r.RegisterResult:
        return self.m.register(registration)

    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool:
        return self.m.heartbeat(cluster=cluster, broker_addr=broker_addr)

    def query_data_version(self, *, cluster: str, broker_addr: str,
                           data_version: r.DataVersion) -> r.VersionAnswer:
        return self.m.query_data_version(cluster=cluster, broker_addr=broker_addr,
                                         data_version=data_version)

    def scan_expired(self) -> tuple[r.ExpiredBroker, ...]:
        return self.m.scan_expired()

    def unregister(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   generation: int | None = None) -> bool:
        return self.m.unregister(cluster=cluster, broker_addr=broker_addr,
                                 broker_name=broker_name, broker_id=broker_id,
                                 generation=generation)

    def on_channel_closed(self, channel: Hashable | None) -> tuple[r.ExpiredBroker, ...]:
        return self.m.on_channel_closed(channel)

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        return self.m.delete_topic(topic, cluster)

    def wipe_write_perm(self, broker_name: str) -> int:
        return self.m.wipe_write_perm(broker_name)

    def add_write_perm(self, broker_name: str) -> int:
        return self.m.add_write_perm(broker_name)

    def register_topic(self, topic: str, queue_datas: Sequence[r.QueueData]) -> None:
        self.m.register_topic(topic, queue_datas)

    def pickup_route(self, topic: str) -> r.TopicRouteData | None:
        return self.m.pickup_route(topic)

    def all_topics(self) -> tuple[str, ...]:
        return self.m.all_topics()

    def live_brokers(self) -> Mapping[r.BrokerAddr, r.BrokerLiveInfo]:
        return self.m.live_brokers()

    def cluster_info(self) -> r.ClusterInfo:
        return self.m.cluster_info()

    def check_invariants(self) -> None:
        self.m.check_invariants()


class DeafToHeartbeats(Wrapper):
    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool:
        return any(k.addr == broker_addr for k in self.m.live_brokers())


class ExpiresAtTheDeadline(Wrapper):
    """Off by one: treats ``last + timeout == now`` as expired (D1 says strict)."""

    def __init__(self, manager: r.RouteInfoManager, clock: FakeClock) -> None:
        super().__init__(manager)
        self.clock = clock

    def scan_expired(self) -> tuple[r.ExpiredBroker, ...]:
        now = self.clock.now_ms()
        for key, info in self.m.live_brokers().items():
            if info.last_update_timestamp + info.heartbeat_timeout_ms == now:
                self.m.unregister(cluster=key.cluster, broker_addr=key.addr,
                                  broker_name="?", broker_id=0)
        return self.m.scan_expired()


class CachesRoutesForever(Wrapper):
    def __init__(self, manager: r.RouteInfoManager) -> None:
        super().__init__(manager)
        self.cache: dict[str, r.TopicRouteData | None] = {}

    def pickup_route(self, topic: str) -> r.TopicRouteData | None:
        if topic not in self.cache:
            self.cache[topic] = self.m.pickup_route(topic)
        return self.cache[topic]


HUNT = settings(max_examples=300, stateful_step_count=30, phases=[Phase.generate],
                database=None, derandomize=True, deadline=None,
                suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize(("name", "factory", "symptom"), [
    ("deaf", lambda clock, config: DeafToHeartbeats(r.RouteInfoManager(clock, config)),
     "live entry"),
    ("eager", lambda clock, config: ExpiresAtTheDeadline(r.RouteInfoManager(clock, config),
                                                         clock), "live entry|outcome differs"),
    ("stale-cache", lambda clock, config: CachesRoutesForever(
        r.RouteInfoManager(clock, config)), "route of"),
])
def test_machine_catches_a_wrong_system(name: str, factory: object, symptom: str) -> None:
    machine = RouteStateMachine.for_factory(factory, name=f"Mutant_{name}")  # type: ignore[arg-type]
    with pytest.raises(AssertionError) as info:
        run_state_machine_as_test(machine, settings=HUNT)
    message = str(info.value)
    assert re.search(symptom, message)
    assert "operation trace:" in message and "    1. setup at " in message
    if symptom == "route of":
        assert "model (expected)" in message and "system (actual)" in message


def test_make_system_override_is_used() -> None:
    built: list[object] = []

    class Counting(RouteStateMachine):
        def make_system(self, *, clock: FakeClock, config: r.RoutingConfig) -> Wrapper:
            system = Wrapper(r.RouteInfoManager(clock=clock, config=config))
            built.append(system)
            return system

    run_state_machine_as_test(Counting, settings=settings(
        HUNT, max_examples=5, stateful_step_count=5))
    assert built and all(isinstance(s, Wrapper) for s in built)
    assert RouteStateMachine.for_factory(lambda c, k: Wrapper(
        r.RouteInfoManager(c, k))).__name__ == "RouteStateMachineFor<lambda>"
