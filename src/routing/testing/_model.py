"""`RouteModel`: a slow, simple, independent re-implementation of the routing rules.

It exists to be compared with `RouteInfoManager` (and wrappers around it) operation by
operation. It keeps plain dictionaries and recomputes everything by scanning them: no
indexes, no snapshots, no cleverness. Each rule cites the Java step it models.

Modelled: registrations of masters and slaves (pre-5.0 and 5.x brokers, acting-master
groups), the two rejection rules (D3), the slave-to-master address switch, topic rows
written only by the master or the prime slave and only on first registration, on a data
version change, or for a missing row; delete-by-omission when configured (D12); liveness
from registrations, heartbeats and version queries; strict expiry (D1); unregister with
generation fencing (D2); channel close (D6); group removal with its rows when its last
member goes; delete topic (whole or per cluster); wipe/add write perm (D5);
register_topic (D11); routes with the acting-master rewrite (D4).

Not modelled (the strategies never generate them): filter servers, static-topic mappings,
the readiness window (D10), min-broker-id notifications, and a queue-number cap below
65 535.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import attrs

from .._errors import InvalidType
from .._messages import ClusterInfo, Registration, RoutingConfig
from .._values import (
    BrokerAddr,
    BrokerData,
    BrokerLiveInfo,
    DataVersion,
    Perm,
    QueueData,
    TopicRouteData,
)
from . import _ops as ops
from ._ops import Operation, Outcome

__all__ = ["RouteModel"]

_SYNC_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


@attrs.define
class _Group:
    cluster: str
    addrs: dict[int, str] = attrs.Factory(dict)
    zone_name: str | None = None
    acting: bool = False


@attrs.define
class _Live:
    broker_name: str
    broker_id: int
    last_update: int
    timeout: int
    version: DataVersion
    channel: Hashable | None
    ha_server_addr: str | None
    generation: int


class RouteModel:
    """The routing rules over plain dicts; ``apply(op)`` returns the same outcomes as
    `apply_operation` on a correct `RouteInfoManager`.

    Time is the model's own: it starts at ``start_ms`` and moves only with `AdvanceOp`.
    Every query is O(size of the whole model).
    """

    def __init__(self, *, config: RoutingConfig | None = None, start_ms: int = 0) -> None:
        self.config = config if config is not None else RoutingConfig()
        self.now_ms = start_ms
        self.groups: dict[str, _Group] = {}
        self.clusters: dict[str, set[str]] = {}
        self.live: dict[tuple[str, str], _Live] = {}
        self.rows: dict[str, dict[str, QueueData]] = {}
        self.generation = 0

    # ------------------------------------------------------------------ operations

    def apply(self, op: Operation) -> Outcome:
        """Perform ``op`` and return its normalized outcome (see `apply_operation`)."""
        match op:
            case ops.RegisterOp(registration=reg):
                return self._register(reg)
            case ops.HeartbeatOp(cluster=cluster, broker_addr=addr):
                live = self.live.get((cluster, addr))
                if live is None:
                    return False
                live.last_update = self.now_ms
                return True
            case ops.QueryDataVersionOp(cluster=cluster, broker_addr=addr, data_version=dv):
                live = self.live.get((cluster, addr))
                if live is None:
                    return (True, None)
                live.last_update = self.now_ms
                return (live.version != dv, live.version)
            case ops.AdvanceOp(ms=ms):
                self.now_ms += ms
                return self.now_ms
            case ops.ScanOp():
                due = sorted(k for k, v in self.live.items()
                             if v.last_update + v.timeout < self.now_ms)
                return self._drop_all(due)
            case ops.UnregisterOp(request=q):
                return self._unregister(q.cluster, q.broker_addr, q.broker_name, q.generation)
            case ops.CloseChannelOp(channel=channel):
                if channel is None:
                    return ()
                keys = sorted(k for k, v in self.live.items() if v.channel == channel)
                return self._drop_all(keys)
            case ops.DeleteTopicOp(topic=topic, cluster=cluster):
                return self._delete_topic(topic, cluster)
            case ops.WipeWritePermOp(broker_name=name):
                return self._set_write(name, False)
            case ops.AddWritePermOp(broker_name=name):
                return self._set_write(name, True)
            case ops.RegisterTopicOp(topic=topic, queue_datas=rows):
                for i, row in enumerate(rows):
                    if row.broker_name not in self.groups:
                        return ("invalid", f"queue_datas[{i}].broker_name")
                for row in rows:
                    self.rows.setdefault(topic, {})[row.broker_name] = row
                return None
        raise InvalidType(f"not an operation: {op!r:.80}", field="operation", value=op)

    def _register(self, reg: Registration) -> Outcome:
        name, bid, addr, key = reg.broker_name, reg.broker_id, reg.broker_addr, (
            reg.cluster, reg.broker_addr)
        group = self.groups.get(name)
        members = dict(group.addrs) if group is not None else {}
        # Step 5: an address registering under a new id leaves its other ids.
        after_switch = {i: a for i, a in members.items() if not (a == addr and i != bid)}
        # Step 6: a lower state_version may not take an id another live address holds.
        holder = after_switch.get(bid)
        if holder is not None and holder != addr:
            holder_live = self.live.get((reg.cluster, holder))
            if (holder_live is not None
                    and holder_live.version.state_version > reg.data_version.state_version):
                return ("rejected", "stale_state_version")
        # Step 7: a single-topic registration cannot be a newcomer's first.
        if bid not in after_switch and len(reg.topics) == 1:
            return ("rejected", "single_topic")

        new_group = group is None
        if group is None:
            group = self.groups[name] = _Group(cluster=reg.cluster)
        self.clusters.setdefault(reg.cluster, set()).add(name)
        pre_5 = reg.enable_acting_master is None
        acting = not pre_5 and bool(reg.enable_acting_master)
        group.acting, group.zone_name = acting, reg.zone_name
        group.addrs = after_switch
        held = group.addrs.get(bid)
        first_in_group = new_group or held is None
        if held != addr:
            group.addrs = {i: a for i, a in group.addrs.items() if a != held}
            group.addrs[bid] = addr

        # Steps 9-10: only the master or the prime slave (5.x, smallest id) writes rows.
        old = self.live.get(key)
        version_changed = old is None or old.version != reg.data_version
        prime_slave = not pre_5 and bid != 0 and bid == min(group.addrs)
        if bid == 0 or prime_slave:
            if (self.config.delete_topic_with_broker_registration and not reg.partial
                    and not reg.topic_queue_mappings):
                for topic in [t for t, r in self.rows.items()
                              if name in r and t not in reg.topics]:
                    self._drop_row(topic, name)
            for topic, cfg in reg.topics.items():
                rows = self.rows.get(topic, {})
                if first_in_group or version_changed or name not in rows:
                    perm = int(cfg.perm)
                    if prime_slave and acting:
                        perm &= ~int(Perm.WRITE)
                    self.rows.setdefault(topic, {})[name] = QueueData(
                        broker_name=name, read_queue_nums=cfg.read_queue_nums,
                        write_queue_nums=cfg.write_queue_nums, perm=perm,
                        topic_sys_flag=cfg.topic_sys_flag)

        self.generation += 1
        self.live[key] = _Live(
            broker_name=name, broker_id=bid, last_update=self.now_ms,
            timeout=reg.heartbeat_timeout_ms or self.config.default_heartbeat_timeout_ms,
            version=reg.data_version, channel=reg.channel, ha_server_addr=reg.ha_server_addr,
            generation=self.generation)
        master_addr = ha = None
        if bid != 0:
            candidate = group.addrs.get(0)
            master = self.live.get((reg.cluster, candidate)) if candidate else None
            if master is not None:
                master_addr, ha = candidate, master.ha_server_addr
        return ("accepted", master_addr, ha, self.generation)

    def _unregister(self, cluster: str, addr: str, broker_name: str,
                    generation: int | None) -> bool:
        live = self.live.get((cluster, addr))
        if generation is not None and (live is None or live.generation != generation):
            return False
        changed = False
        if live is not None:
            del self.live[(cluster, addr)]
            changed = True
        group = self.groups.get(broker_name)
        if group is not None:
            changed = self._remove_member(broker_name, addr) or changed
        return changed

    def _drop_all(self, keys: list[tuple[str, str]]) -> Outcome:
        gone = []
        for key in keys:
            live = self.live.pop(key)
            cluster, addr = key
            names = {n for n, g in self.groups.items()
                     if g.cluster == cluster and addr in g.addrs.values()}
            own = self.groups.get(live.broker_name)
            if own is not None and addr in own.addrs.values():
                names.add(live.broker_name)
            for name in sorted(names):
                self._remove_member(name, addr)
            gone.append((cluster, addr, live.broker_name, live.broker_id, live.generation))
        return tuple(sorted(gone))

    def _remove_member(self, name: str, addr: str) -> bool:
        group = self.groups[name]
        remaining = {i: a for i, a in group.addrs.items() if a != addr}
        if len(remaining) == len(group.addrs):
            return False
        group.addrs = remaining
        if not remaining:  # the last member went: the group and its rows go
            del self.groups[name]
            for topic in [t for t, r in self.rows.items() if name in r]:
                self._drop_row(topic, name)
            for cluster in list(self.clusters):
                self.clusters[cluster].discard(name)
                if not self.clusters[cluster]:
                    del self.clusters[cluster]
        elif group.acting and 0 not in remaining:  # master-less acting group: read-only
            self._set_write(name, False)
        return True

    def _drop_row(self, topic: str, name: str) -> bool:
        rows = self.rows.get(topic)
        if rows is None or name not in rows:
            return False
        del rows[name]
        if not rows:
            del self.rows[topic]
        return True

    def _delete_topic(self, topic: str, cluster: str | None) -> bool:
        if cluster is None:
            return self.rows.pop(topic, None) is not None
        removed = False
        for name in sorted(self.clusters.get(cluster, set())):
            removed = self._drop_row(topic, name) or removed
        return removed

    def _set_write(self, name: str, writable: bool) -> int:
        count = 0
        for rows in self.rows.values():
            row = rows.get(name)
            if row is None:
                continue
            count += 1
            perm = int(row.perm) | int(Perm.WRITE) if writable else int(row.perm) & ~int(
                Perm.WRITE)
            rows[name] = attrs.evolve(row, perm=perm)
        return count

    # ------------------------------------------------------------------ queries

    def topics(self) -> tuple[str, ...]:
        """Every topic with a row, sorted."""
        return tuple(sorted(self.rows))

    def route(self, topic: str) -> TopicRouteData | None:
        """What `RouteInfoManager.pickup_route` must answer for ``topic``."""
        rows = self.rows.get(topic, {})
        queue_datas, broker_datas = [], []
        for name in sorted(rows):
            group = self.groups.get(name)
            if group is None or not group.addrs:
                continue
            addrs = dict(sorted(group.addrs.items()))
            row = rows[name]
            if (self.config.support_acting_master and not topic.startswith(_SYNC_PREFIX)
                    and group.acting and 0 not in addrs and not row.perm & Perm.WRITE):
                smallest = min(addrs)
                addrs = dict(sorted({0 if i == smallest else i: a
                                     for i, a in addrs.items()}.items()))
            queue_datas.append(row)
            broker_datas.append(BrokerData(
                cluster=group.cluster, broker_name=name, broker_addrs=addrs,
                zone_name=group.zone_name, enable_acting_master=group.acting))
        if not queue_datas:
            return None
        return TopicRouteData(queue_datas=queue_datas, broker_datas=broker_datas)

    def live_brokers(self) -> Mapping[BrokerAddr, BrokerLiveInfo]:
        """What `RouteInfoManager.live_brokers` must answer."""
        return {BrokerAddr(cluster=c, addr=a): BrokerLiveInfo(
                    last_update_timestamp=v.last_update, heartbeat_timeout_ms=v.timeout,
                    data_version=v.version, channel=v.channel,
                    ha_server_addr=v.ha_server_addr, generation=v.generation)
                for (c, a), v in sorted(self.live.items())}

    def cluster_info(self) -> ClusterInfo:
        """What `RouteInfoManager.cluster_info` must answer."""
        return ClusterInfo(
            broker_addr_table={n: BrokerData(
                cluster=g.cluster, broker_name=n, broker_addrs=dict(sorted(g.addrs.items())),
                zone_name=g.zone_name, enable_acting_master=g.acting)
                for n, g in sorted(self.groups.items())},
            cluster_addr_table={c: frozenset(v) for c, v in sorted(self.clusters.items())})

    def generations(self) -> tuple[int, ...]:
        """The generations of the live entries, sorted."""
        return tuple(sorted(v.generation for v in self.live.values()))

    def channels(self) -> tuple[Any, ...]:
        """The channels of the live entries (without None), in key order."""
        return tuple(v.channel for _, v in sorted(self.live.items()) if v.channel is not None)

    def deadlines(self) -> tuple[int, ...]:
        """Each live entry's last instant alive (``last_update + timeout``), sorted."""
        return tuple(sorted(v.last_update + v.timeout for v in self.live.values()))
