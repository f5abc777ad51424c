"""How the simulator applies each planned fault (crashes, partitions, name-server restarts,
failovers, degraded links, topic changes) and records it as a `FaultRecord`.

`FaultInjection` is a mixin of `Simulation`: it owns the fault rules, the run loop owns the
event queue, the network and the nodes (declared below for the type checker)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import attrs

from .._clock import ManualClock
from .._values import TopicConfig, TopicRouteData
from ..heartbeat import Action, BrokerHeartbeat
from ._faults import (
    Crash,
    CrashMode,
    DegradedLink,
    Failover,
    Fault,
    FaultRecord,
    NameServerRestart,
    Partition,
    SimConfig,
    TopicCreate,
    TopicDelete,
)
from ._nodes import QUEUES_PER_TOPIC, Group, NameServer, Proc

__all__ = ["FaultInjection"]


class FaultInjection:
    """The fault half of `Simulation` (see the module docstring)."""

    config: SimConfig
    clock: ManualClock
    _chaos: random.Random
    _net: random.Random
    _lat_min: int
    _lost: int
    _messages: int
    _faults: list[FaultRecord]
    _groups: list[Group]
    _ns: list[NameServer]
    _partitions: dict[tuple[str, int], int]
    _new_topics: int
    _timeline: dict[str, list[list[tuple[int, TopicRouteData | None]]]]

    def _push(self, at: int, fn: Callable[[Any], None], arg: Any) -> None:
        raise NotImplementedError  # pragma: no cover - Simulation's

    def _ns_start(self, ns: NameServer) -> None:
        raise NotImplementedError  # pragma: no cover - Simulation's

    def _ns_stop(self, ns: NameServer) -> None:
        raise NotImplementedError  # pragma: no cover - Simulation's

    def _perform(self, proc: Proc, actions: tuple[Action, ...]) -> None:
        raise NotImplementedError  # pragma: no cover - Simulation's

    def _proc_start(self, proc: Proc) -> None:
        raise NotImplementedError  # pragma: no cover - Simulation's

    def _proc_stop(self, proc: Proc, mode: CrashMode) -> None:
        raise NotImplementedError  # pragma: no cover - Simulation's

    def _fault(self, fault: Fault) -> None:
        index = len(self._faults)
        now = self.clock.now_ms()
        all_ns = tuple(ns.id for ns in self._ns)
        base: dict[str, Any] = {"index": index, "fault": fault, "start_ms": now,
                                "end_ms": None}
        if isinstance(fault, NameServerRestart):
            if fault.nameserver >= len(self._ns) or not self._ns[fault.nameserver].up:
                self._faults.append(FaultRecord(**base, skipped="no such name server up"))
                return
            ns = self._ns[fault.nameserver]
            self._ns_stop(ns)
            self._push(now + fault.down_ms, self._ns_start, ns)
            self._faults.append(FaultRecord(
                **{**base, "end_ms": now + fault.down_ms}, nameservers=(ns.id,),
                topics=tuple(sorted(self._timeline))))
            return
        if fault.group >= len(self._groups):
            self._faults.append(FaultRecord(**base, skipped="no such group"))
            return
        group = self._groups[fault.group]
        topics = tuple(sorted(group.topics))
        if isinstance(fault, Crash | Partition | DegradedLink | Failover):
            base["group"] = group.name
        if isinstance(fault, Crash | Partition | DegradedLink):
            proc = group.member(fault.broker_id)
            if proc is None:
                self._faults.append(FaultRecord(
                    **base, skipped=f"no live broker id {fault.broker_id}"))
                return
            if isinstance(fault, Crash):
                self._proc_stop(proc, fault.mode)
                end = None
                if fault.restart_after_ms is not None:
                    end = now + fault.restart_after_ms
                    self._push(end, self._proc_start, proc)
                self._faults.append(FaultRecord(
                    **{**base, "end_ms": end}, target_addrs=(proc.addr,), nameservers=all_ns,
                    topics=topics))
            elif isinstance(fault, Partition):
                cut = tuple(i for i in fault.nameservers if i < len(self._ns))
                for i in cut:
                    key = (proc.addr, i)
                    self._partitions[key] = self._partitions.get(key, 0) + 1
                self._push(now + fault.duration_ms, self._heal, (proc.addr, cut))
                self._faults.append(FaultRecord(
                    **{**base, "end_ms": now + fault.duration_ms}, target_addrs=(proc.addr,),
                    nameservers=tuple(self._ns[i].id for i in cut), topics=topics))
            else:
                proc.degraded = (fault.loss_rate, fault.extra_latency_ms)
                self._push(now + fault.duration_ms, self._repair, proc)
                self._faults.append(FaultRecord(
                    **{**base, "end_ms": now + fault.duration_ms}, target_addrs=(proc.addr,),
                    nameservers=all_ns, topics=topics))
        elif isinstance(fault, Failover):
            self._failover(fault, group, base, all_ns, topics)
        elif isinstance(fault, TopicCreate):
            self._new_topics += 1
            name = fault.topic or f"New-{self._new_topics:04d}"
            self._topic_change(group, add=TopicConfig(
                topic_name=name, read_queue_nums=QUEUES_PER_TOPIC,
                write_queue_nums=QUEUES_PER_TOPIC))
            self._faults.append(FaultRecord(**{**base, "end_ms": now}, topics=(name,),
                                            nameservers=all_ns, note=name))
        else:
            self._topic_delete(fault, group, base, all_ns)

    def _failover(self, fault: Failover, group: Group, base: dict[str, Any],
                  all_ns: tuple[str, ...], topics: tuple[str, ...]) -> None:
        now = self.clock.now_ms()
        master = group.member(0)
        slaves = sorted((p for p in group.procs if p.alive and p.broker_id > 0),
                        key=lambda p: p.broker_id)
        if master is None or not slaves:
            self._faults.append(FaultRecord(**base, skipped="needs a live master and slave"))
            return
        slave = slaves[0]
        self._proc_stop(master, "halt")
        self._push(now + fault.promote_after_ms, self._promote, (master, slave))
        end = None
        if fault.restart_old_after_ms is not None:
            end = now + fault.restart_old_after_ms
            self._push(end, self._proc_start, master)
        self._faults.append(FaultRecord(
            **{**base, "end_ms": end}, target_addrs=(master.addr,), nameservers=all_ns,
            topics=topics, note=f"promotes {slave.addr} (id {slave.broker_id}) at "
                                f"+{fault.promote_after_ms / 1000:g} s"))

    def _promote(self, arg: tuple[Proc, Proc]) -> None:
        """The slave becomes id 0 with a new epoch; the old master will return as a slave."""
        master, slave = arg
        old = slave.hb
        if old is None or not slave.alive:
            return
        now = self.clock.now_ms()
        version = old.data_version
        master.broker_id, slave.broker_id = slave.broker_id, 0
        slave.poll_at = None
        slave.hb = BrokerHeartbeat(
            attrs.evolve(old.config, broker_id=0), clock=self.clock,
            topics=slave.group.topics.values(),
            data_version=version.next(now, state_version=version.state_version + 1))
        self._perform(slave, slave.hb.start(now))

    def _heal(self, arg: tuple[str, tuple[int, ...]]) -> None:
        addr, cut = arg
        for i in cut:
            key = (addr, i)
            left = self._partitions[key] - 1
            if left:
                self._partitions[key] = left
            else:
                del self._partitions[key]

    def _repair(self, proc: Proc) -> None:
        proc.degraded = None

    def _topic_change(self, group: Group, *, add: TopicConfig | None = None,
                      remove: str | None = None) -> None:
        """Change the group's table on every live member. The master sends a created topic
        as Java does (an incremental registration, `BrokerHeartbeat.update_topics`); for a
        deleted one, which Java sends nowhere, it registers its full table at once. Slaves
        copy the table without sending anything (Java's ``SlaveSynchronize``)."""
        now = self.clock.now_ms()
        if add is not None:
            group.topics[add.topic_name] = add
        if remove is not None:
            group.topics.pop(remove, None)
        for proc in group.procs:
            hb = proc.hb
            if hb is None or not proc.alive:
                continue
            if proc.broker_id != 0:
                hb.set_topics(group.topics.values(), now)
            elif add is not None:
                self._perform(proc, hb.update_topics([add], now))
            else:
                self._perform(proc, hb.delete_topics([remove] if remove else [], now))
                self._perform(proc, hb.register_now(now, force=True))

    def _topic_delete(self, fault: TopicDelete, group: Group, base: dict[str, Any],
                      all_ns: tuple[str, ...]) -> None:
        now = self.clock.now_ms()
        reserved = {self.config.cluster, group.name}
        choices = sorted(t for t in group.topics if t not in reserved)
        topic = fault.topic or (self._chaos.choice(choices) if choices else None)
        if topic is None:
            self._faults.append(FaultRecord(**base, skipped="the group has no topic to delete"))
            return
        for other in self._groups:
            if topic in other.topics:
                self._topic_change(other, remove=topic)
        self._push(now + fault.admin_delay_ms, self._admin_delete, topic)
        self._faults.append(FaultRecord(**{**base, "end_ms": now}, topics=(topic,),
                                        nameservers=all_ns, note=topic))

    def _admin_delete(self, topic: str) -> None:
        """The admin tool's DELETE_TOPIC_IN_NAMESRV to every name server (lossy, not cut by
        broker partitions)."""
        now = self.clock.now_ms()
        for ns in self._ns:
            if not ns.up:
                continue
            self._messages += 1
            if self.config.loss_rate and self._net.random() < self.config.loss_rate:
                self._lost += 1
                continue
            self._push(now + self._lat_min, self._admin_apply, (ns, ns.incarnation, topic))

    def _admin_apply(self, arg: tuple[NameServer, int, str]) -> None:
        ns, incarnation, topic = arg
        if ns.incarnation == incarnation and ns.up and ns.recorder is not None:
            ns.recorder.delete_topic(topic, self.config.cluster)
