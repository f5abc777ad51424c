"""Eight threads, mixed operations, bounded count: invariants hold and live brokers stay routed."""

from __future__ import annotations

import random
import threading

import routing as r
from core_helpers import reg

OPS_PER_THREAD = 400


def test_concurrent_mixed_operations_keep_invariants_and_routes():
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    steady = [reg(f"steady-{i}", 0, f"10.1.0.{i}:10911", topic_names=(f"S{i}", "SHARED"))
              for i in range(4)]
    for registration in steady:
        mgr.register(registration)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def heartbeater(index: int) -> None:
        barrier.wait()
        registration = steady[index]
        for _ in range(OPS_PER_THREAD):
            assert mgr.register(registration).accepted
            assert mgr.pickup_route(f"S{index}") is not None

    def churner(index: int) -> None:
        rng = random.Random(index)
        barrier.wait()
        for n in range(OPS_PER_THREAD):
            name = f"churn-{index}-{rng.randrange(3)}"
            addr = f"10.2.{index}.{rng.randrange(3)}:10911"
            op = rng.randrange(6)
            if op == 0:
                mgr.register(reg(name, 0, addr, topic_names=(f"C{n % 5}", "SHARED"),
                                 version=r.DataVersion(counter=n)))
            elif op == 1:
                mgr.unregister(cluster="c1", broker_addr=addr, broker_name=name, broker_id=0)
            elif op == 2:
                mgr.wipe_write_perm(name)
            elif op == 3:
                mgr.add_write_perm(name)
            elif op == 4:
                mgr.delete_topic(f"C{n % 5}")
            else:
                route = mgr.pickup_route("SHARED")
                assert route is not None
                names = [q.broker_name for q in route.queue_datas]
                assert names == sorted(names)
                assert names == [b.broker_name for b in route.broker_datas]

    def guard(target, index):
        def run() -> None:
            try:
                target(index)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
        return run

    threads = [threading.Thread(target=guard(heartbeater, i)) for i in range(4)]
    threads += [threading.Thread(target=guard(churner, i)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    mgr.check_invariants()
    for i in range(4):
        route = mgr.pickup_route(f"S{i}")
        assert route is not None and route.broker_datas[0].broker_addrs[0] == f"10.1.0.{i}:10911"
    shared = {b.broker_name for b in mgr.pickup_route("SHARED").broker_datas}
    assert {f"steady-{i}" for i in range(4)} <= shared
