"""``routing demo``: the README's first command.

By default it runs the whole chain (simulate → journals → PySpark analysis → summary and
timeline picture; see ``routing.pipeline``). ``--scripted`` runs a short, Spark-free
scenario on a `ManualClock` that shows registration, heartbeats, expiry and route lookups.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

import routing as r

__all__ = ["demo_command", "scripted_scenario"]


def scripted_scenario(console: Console) -> r.RouteInfoManager:
    """Two broker groups, one master crash, one clean shutdown; prints each step."""
    clock = r.ManualClock(start_ms=0)
    log: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, listener=log.append)

    def topics(*names: str) -> dict[str, r.TopicConfig]:
        return {n: r.TopicConfig(topic_name=n, read_queue_nums=4, write_queue_nums=4)
                for n in names}

    def show(title: str) -> None:
        table = Table(title=f"t={clock.now_ms():>7} ms  {title}", title_justify="left")
        for column in ("topic", "groups (id→address)", "writable queues", "route version"):
            table.add_column(column)
        for topic in mgr.all_topics():
            route = mgr.pickup_route(topic)
            assert route is not None
            groups = "; ".join(f"{b.broker_name} {dict(b.broker_addrs)}"
                               for b in route.broker_datas)
            table.add_row(topic, groups, str(route.writable_queue_count),
                          str(mgr.route_version(topic)))
        console.print(table)

    version = r.DataVersion(timestamp=0, counter=1)
    a_master = r.Registration(cluster="DefaultCluster", broker_name="broker-a", broker_id=0,
                              broker_addr="10.0.0.1:10911", ha_server_addr="10.0.0.1:10912",
                              data_version=version, topics=topics("orders", "broker-a"),
                              channel="conn-a0")
    a_slave = r.Registration(cluster="DefaultCluster", broker_name="broker-a", broker_id=1,
                             broker_addr="10.0.0.2:10911", data_version=version,
                             topics=topics("orders", "broker-a"), channel="conn-a1")
    b_master = r.Registration(cluster="DefaultCluster", broker_name="broker-b", broker_id=0,
                              broker_addr="10.0.1.1:10911", data_version=version,
                              topics=topics("orders", "payments", "broker-b"),
                              channel="conn-b0")
    for registration in (a_master, a_slave, b_master):
        result = mgr.register(registration)
        console.print(f"register {registration.broker_name}#{registration.broker_id} "
                      f"{registration.broker_addr}: accepted={result.accepted} "
                      f"master={result.master_addr}")
    show("three brokers registered")

    console.print("\n[bold]Brokers re-register every 30 s and the name server scans every "
                  "5 s; broker-a's master goes silent after t=30 000 ms.[/bold]")
    for t in range(5_000, 180_001, 5_000):
        clock.set(t)
        if t % 30_000 == 0:
            mgr.register(a_slave)
            mgr.register(b_master)
            if t == 30_000:
                mgr.register(a_master)
        for gone in mgr.scan_expired():
            console.print(f"t={t} ms: expired {gone.broker_name}#{gone.broker_id} "
                          f"{gone.broker_addr} (last heartbeat {gone.last_update_ms} ms, "
                          f"timeout {gone.timeout_ms} ms)")
    show("after broker-a's master expired (rows stay; only the slave is left)")

    console.print("\n[bold]broker-b shuts down cleanly (UNREGISTER_BROKER).[/bold]")
    mgr.unregister(cluster="DefaultCluster", broker_addr="10.0.1.1:10911",
                   broker_name="broker-b", broker_id=0)
    show("after broker-b unregistered: 'payments' is gone")
    console.print(f"\nroute-change events seen by the listener: {len(log)}; "
                  f"check_invariants(): ", end="")
    mgr.check_invariants()
    console.print("[green]ok[/green]")
    return mgr


@click.command("demo")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("demo-out"),
              show_default=True, help="Where journals, tables and the timeline go.")
@click.option("--master", default=None, envvar="SPARK_MASTER",
              help="Spark master URL (default: embedded local Spark).")
@click.option("--scripted", is_flag=True,
              help="Run the short Spark-free scenario on a manual clock instead.")
@click.option("--live/--no-live", default=True, show_default=True,
              help="Then watch a live simulation for about 25 s (routing simulate --live "
                   "and routing watch on OUT/live), printing its incidents.")
def demo_command(out_dir: Path, master: str | None, scripted: bool, live: bool) -> None:
    """Simulate a cluster, analyze its journals on Spark, print a summary, draw a timeline."""
    console = Console()
    if scripted:
        scripted_scenario(console)
        return
    try:
        from ._demo_run import run_demo
    except ImportError as exc:
        raise click.ClickException(
            f"the full demo needs the spark extra ({exc}); try `routing demo --scripted`"
        ) from exc
    run_demo(out_dir, master=master, live=live)
