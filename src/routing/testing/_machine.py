"""`RouteStateMachine`: hypothesis stateful testing of a routing system against `RouteModel`.

Needs hypothesis (``pip install 'rocketmq-routing[testing]'``). Like zarr's
``ZarrHierarchyStateMachine``, the machine is built around the system under test, which it
gets from `RouteStateMachine.make_system`; subclass and override it to check your own
wrapper around `RouteInfoManager`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import attrs
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .._manager import RouteInfoManager
from .._messages import RoutingConfig
from . import strategies as rst
from ._errors import RouteMismatch
from ._fake import FakeClock
from ._model import RouteModel
from ._ops import AdvanceOp, Fleet, Operation, Outcome, RoutingSystem, ScanOp, apply_operation
from ._render import route_lines, side_by_side

__all__ = ["RouteStateMachine"]

#: How many of the last operations a failure message lists.
TRACE_TAIL = 60

SystemFactory = Callable[[FakeClock, RoutingConfig], RoutingSystem]


class RouteStateMachine(RuleBasedStateMachine):
    """Drive a routing system with generated operations and compare it with `RouteModel`.

    Each run draws a `Fleet` (coherent clusters and groups) and a `RoutingConfig`, builds
    the system with `make_system`, then applies registrations (masters and slaves,
    changing and unchanged versions, promotions, one-topic newcomers), heartbeats, version
    queries, time steps (including to exactly a broker's deadline and one ms past it),
    scans, unregisters (with current and stale generations), channel closes, topic
    deletions, write-perm wipes and restores, and register_topic calls, valid or not.

    After every step it checks: the operation's outcome equals the model's; the system's
    ``check_invariants()`` passes; every topic's route, the topic list, the live table
    and the cluster info equal the model's. A failure message shows the numbered
    operation trace and, for routes, the model and the system side by side.

    Use it as a test::

        TestRouting = RouteStateMachine.TestCase

    or subclass it to test a wrapper (see ``docs/testing.md``)::

        class WrapperMachine(RouteStateMachine):
            def make_system(self, *, clock, config):
                return MyWrapper(RouteInfoManager(clock=clock, config=config))

    Override `fleet_strategy` / `config_strategy` to change what is generated.
    """

    #: Optional ``factory(clock, config)``; when set, `make_system` calls it.
    system_factory: ClassVar[SystemFactory | None] = None
    #: Whether registrations may be partial (D12: split chunks and increments, which never
    #: delete topics by omission).
    partial_registrations: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.system: RoutingSystem | None = None
        self.clock = FakeClock(0)
        self.model = RouteModel()
        self.fleet: Fleet | None = None
        self.trace: list[str] = []

    # ------------------------------------------------------------------ customization

    def make_system(self, *, clock: FakeClock, config: RoutingConfig) -> RoutingSystem:
        """Build the system under test; it must read time from ``clock`` only.

        Default: ``system_factory(clock, config)`` if set, else a `RouteInfoManager`.
        """
        factory = type(self).system_factory
        if factory is not None:
            return factory(clock, config)
        return RouteInfoManager(clock=clock, config=config)

    @classmethod
    def for_factory(cls, factory: SystemFactory, *, name: str | None = None
                    ) -> type[RouteStateMachine]:
        """A subclass whose system comes from ``factory(clock, config)``::

            TestMine = RouteStateMachine.for_factory(make_mine).TestCase
        """
        return type(name or f"{cls.__name__}For{getattr(factory, '__name__', 'Factory')}",
                    (cls,), {"system_factory": staticmethod(factory)})

    def fleet_strategy(self) -> st.SearchStrategy[Fleet]:
        """The fleets to draw (default `routing.testing.strategies.fleets()`)."""
        return rst.fleets()

    def config_strategy(self) -> st.SearchStrategy[RoutingConfig]:
        """The configurations to draw (default `routing.testing.strategies.routing_configs()`)."""
        return rst.routing_configs()

    # ------------------------------------------------------------------ setup

    @initialize(data=st.data(), start_ms=st.sampled_from([0, 1_700_000_000_000]))
    def setup(self, data: st.DataObject, start_ms: int) -> None:
        """Draw the fleet and config, build the system and the model at ``start_ms``."""
        self.fleet = data.draw(self.fleet_strategy(), label="fleet")
        config = data.draw(self.config_strategy(), label="config")
        self.clock = FakeClock(start_ms)
        self.model = RouteModel(config=config, start_ms=start_ms)
        self.system = self.make_system(clock=self.clock, config=config)
        groups = "; ".join(
            f"{g.cluster}/{g.broker_name} acting={g.enable_acting_master} zone={g.zone_name} "
            f"[{', '.join(f'{m.home_id}={m.broker_addr}' for m in g.members)}]"
            for g in self.fleet.groups)
        self._record(f"setup at {start_ms} ms: {groups}; topics {list(self.fleet.topics)}; "
                     f"default timeout {config.default_heartbeat_timeout_ms} ms, "
                     f"acting-master support {config.support_acting_master}, delete by "
                     f"omission {config.delete_topic_with_broker_registration}")
        # Start from a populated name server: most brokers register once (>= 2 topics).
        fleet = self.fleet
        configs = rst.topic_configs(topic_names=st.sampled_from(fleet.topics),
                                    queue_nums=st.sampled_from([1, 4, 8]),
                                    perms=st.sampled_from([6, 6, 7, 4]),
                                    sys_flags=st.just(0), orders=st.just(False))
        tables = rst.topic_tables(configs=configs, min_size=2, max_size=len(fleet.topics))
        for spec in fleet.brokers:
            if data.draw(st.integers(0, 4), label=f"skip {spec}") == 0:
                continue
            only = attrs.evolve(fleet, groups=(attrs.evolve(fleet.group(spec.broker_name),
                                                            members=(spec,)),))
            self._step(data.draw(rst.register_ops(
                fleet=only, topics=tables, broker_ids=st.just(spec.home_id),
                timeouts=st.none() | st.sampled_from([1_000, 3_000])), label="bootstrap"))

    # ------------------------------------------------------------------ rules

    def _fleet(self) -> Fleet:
        assert self.fleet is not None
        return self.fleet

    @rule(data=st.data())
    def register(self, data: st.DataObject) -> None:
        """A broker registers (any id, any version, 0-4 topics)."""
        self._step(data.draw(rst.register_ops(fleet=self._fleet(), partial=self._partial()),
                             label="op"))

    @rule(data=st.data())
    def register_again(self, data: st.DataObject) -> None:
        """A live broker re-registers as itself, with its version or the next one."""
        live = sorted(self.model.live.items())
        if not live:
            self.register(data)
            return
        (_, addr), entry = data.draw(st.sampled_from(live), label="broker")
        fleet = self._fleet()
        spec = next(b for b in fleet.brokers if b.broker_addr == addr)
        only = attrs.evolve(fleet, groups=(attrs.evolve(fleet.group(spec.broker_name),
                                                        members=(spec,)),))
        version = entry.version
        versions = st.just(version) | st.just(version.next(0, version.state_version))
        op = data.draw(rst.register_ops(fleet=only, data_versions=versions,
                                        broker_ids=st.just(entry.broker_id),
                                        partial=self._partial()), label="op")
        self._step(op)

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        self._step(data.draw(rst.heartbeat_ops(fleet=self._fleet()), label="op"))

    @rule(data=st.data())
    def query_data_version(self, data: st.DataObject) -> None:
        self._step(data.draw(rst.query_data_version_ops(fleet=self._fleet()), label="op"))

    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        self._step(data.draw(rst.advance_ops(), label="op"))

    @precondition(lambda self: bool(self.model.live))
    @rule(data=st.data(), past=st.sampled_from([0, 1]))
    def advance_to_deadline(self, data: st.DataObject, past: int) -> None:
        """Move to exactly a live broker's deadline (still alive) or 1 ms past it."""
        deadline = data.draw(st.sampled_from(self.model.deadlines()), label="deadline")
        target = deadline + past
        if target >= self.model.now_ms:
            self._step(AdvanceOp(ms=target - self.model.now_ms))

    @rule()
    def scan(self) -> None:
        self._step(ScanOp())

    @rule(data=st.data())
    def unregister(self, data: st.DataObject) -> None:
        current = self.model.generations()
        ever = range(1, self.model.generation + 1)
        gens = st.one_of(st.none(), st.sampled_from(current) if current else st.none(),
                         st.sampled_from(ever) if ever else st.none(), st.integers(1, 60))
        self._step(data.draw(rst.unregister_ops(fleet=self._fleet(), generations=gens),
                             label="op"))

    @rule(data=st.data())
    def close_channel(self, data: st.DataObject) -> None:
        in_use = self.model.channels()
        channels = st.sampled_from(in_use) if in_use else st.nothing()
        pool = st.sampled_from([*rst.channels_of(self._fleet()), None, "ch:unknown"])
        self._step(data.draw(rst.close_channel_ops(fleet=self._fleet(),
                                                   channels=channels | pool), label="op"))

    @rule(data=st.data())
    def delete_topic(self, data: st.DataObject) -> None:
        self._step(data.draw(rst.delete_topic_ops(fleet=self._fleet()), label="op"))

    @rule(data=st.data())
    def wipe_write_perm(self, data: st.DataObject) -> None:
        self._step(data.draw(rst.wipe_write_perm_ops(fleet=self._fleet()), label="op"))

    @rule(data=st.data())
    def add_write_perm(self, data: st.DataObject) -> None:
        self._step(data.draw(rst.add_write_perm_ops(fleet=self._fleet()), label="op"))

    @rule(data=st.data())
    def register_topic(self, data: st.DataObject) -> None:
        self._step(data.draw(rst.register_topic_ops(fleet=self._fleet()), label="op"))

    # ------------------------------------------------------------------ invariants

    @invariant()
    def invariants_hold(self) -> None:
        """The system's own consistency check passes."""
        if self.system is None:
            return
        try:
            self.system.check_invariants()
        except AssertionError as exc:
            raise RouteMismatch(f"check_invariants() failed:\n{exc}\n{self._trace()}") from exc

    @invariant()
    def routes_match_model(self) -> None:
        """Every topic's route equals the model's, and so does the topic list."""
        if self.system is None:
            return
        topics = set(self.model.topics()) | set(self.system.all_topics())
        problems = []
        for topic in sorted(topics):
            want, have = self.model.route(topic), self.system.pickup_route(topic)
            if want != have:
                problems.append(f"route of {topic!r} at {self.clock.now_ms()} ms:\n"
                                + side_by_side("model (expected)", route_lines(want),
                                               "system (actual)", route_lines(have)))
        if tuple(self.system.all_topics()) != self.model.topics():
            problems.append(f"all_topics(): model {self.model.topics()}, system "
                            f"{tuple(self.system.all_topics())}")
        if problems:
            raise RouteMismatch("\n".join(problems) + "\n" + self._trace())

    @invariant()
    def liveness_matches_model(self) -> None:
        """The live table and the cluster info equal the model's."""
        if self.system is None:
            return
        want_live, have_live = dict(self.model.live_brokers()), dict(self.system.live_brokers())
        problems = []
        for key in sorted(set(want_live) | set(have_live), key=lambda k: (k.cluster, k.addr)):
            a, b = want_live.get(key), have_live.get(key)
            if a != b:
                problems.append(f"live entry {key.cluster}/{key.addr}: model {a}, system {b}")
        want_info, have_info = self.model.cluster_info(), self.system.cluster_info()
        if want_info != have_info:
            problems.append(f"cluster_info: model {want_info}\n  system {have_info}")
        if problems:
            raise RouteMismatch("\n".join(problems) + "\n" + self._trace())

    # ------------------------------------------------------------------ internals

    def _partial(self) -> st.SearchStrategy[bool]:
        return st.booleans() if self.partial_registrations else st.just(False)

    def _step(self, op: Operation) -> Outcome:
        assert self.system is not None
        expected = self.model.apply(op)
        actual = apply_operation(self.system, op, clock=self.clock)
        line = f"{op.describe()}  ->  {actual!r}"
        self._record(line)
        if expected != actual:
            raise RouteMismatch(f"outcome differs for {op.describe()}:\n  model (expected): "
                                 f"{expected!r}\n  system (actual):  {actual!r}\n"
                                 + self._trace())
        return actual

    def _record(self, line: str) -> None:
        self.trace.append(line)
        note(f"{len(self.trace)}. {line}")

    def _trace(self) -> str:
        tail = self.trace[-TRACE_TAIL:]
        first = len(self.trace) - len(tail) + 1
        lines = [f"  {first + i:>3}. {t}" for i, t in enumerate(tail)]
        return "operation trace:\n" + "\n".join(lines)

    def teardown(self) -> None:
        self.system = None
