"""Small builders shared by the core's tests (not part of the shipped test kit)."""

from __future__ import annotations

from typing import Any

import routing as r


def topics(*names: str, queues: int = 4, perm: int = 6, sys_flag: int = 0
           ) -> dict[str, r.TopicConfig]:
    return {n: r.TopicConfig(topic_name=n, read_queue_nums=queues, write_queue_nums=queues,
                             perm=perm, topic_sys_flag=sys_flag) for n in names}


def reg(name: str = "broker-a", broker_id: int = 0, addr: str | None = None, *,
        cluster: str = "c1", topic_names: tuple[str, ...] = ("T1", "T2"),
        version: r.DataVersion | None = None, **kwargs: Any) -> r.Registration:
    """A registration; the address defaults to one derived from name and id."""
    if addr is None:
        addr = f"10.0.{abs(hash(name)) % 200}.{broker_id + 1}:10911"
    kwargs.setdefault("topics", topics(*topic_names))
    return r.Registration(cluster=cluster, broker_name=name, broker_id=broker_id,
                          broker_addr=addr, data_version=version or r.DataVersion(counter=1),
                          **kwargs)


def observable(mgr: r.RouteInfoManager) -> dict[str, Any]:
    """Everything a caller can see, to prove that a call changed nothing."""
    topics_ = mgr.all_topics()
    return {
        "cluster_info": mgr.cluster_info(),
        "topics": topics_,
        "routes": {t: mgr.pickup_route(t) for t in topics_},
        "versions": {t: mgr.route_version(t) for t in topics_},
        "live": {k: (v.last_update_timestamp, v.heartbeat_timeout_ms, v.data_version,
                     v.generation, v.channel) for k, v in mgr.live_brokers().items()},
        "units": (mgr.unit_topics(), mgr.has_unit_sub_topics(),
                  mgr.has_unit_sub_non_unit_topics()),
        "system": mgr.system_topics(),
    }


def route_brokers(mgr: r.RouteInfoManager, topic: str) -> dict[str, dict[int, str]]:
    route = mgr.pickup_route(topic)
    if route is None:
        return {}
    return {b.broker_name: dict(b.broker_addrs) for b in route.broker_datas}
