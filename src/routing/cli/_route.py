"""``routing route TOPIC --namesrv HOST:PORT``: ask name servers where a topic lives.

Loaded lazily by ``routing.cli`` (needs the ``cli`` extra). One GET_ROUTEINFO_BY_TOPIC per
name server through `routing.remoting.query_route`; the route is printed as rich tables
(groups with their addresses, queues with their permissions) or, with ``--json``, as the
JSON document a RocketMQ client receives.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .. import Perm, TopicRouteData
from ..remoting import RouteQueryError, encode_route, query_route
from ._hosting import split_listen

__all__ = ["route_command"]


def route_json(route: TopicRouteData) -> Any:
    """The route as RocketMQ's standard JSON (what a client at V4_9_4+ receives)."""
    return json.loads(encode_route(route, standard=True))


def _render(console: Console, topic: str, address: str, route: TopicRouteData) -> None:
    # the heading on its own line (a table's title wraps to the table's width)
    console.print(f"{topic} on {address}: {len(route.broker_datas)} group(s), "
                  f"{route.writable_queue_count} writable queue(s)", highlight=False,
                  soft_wrap=True)
    groups = Table()
    for column in ("group", "cluster", "id", "address", "zone"):
        groups.add_column(column, justify="right" if column == "id" else "left")
    for bd in route.broker_datas:
        for broker_id, addr in sorted(bd.broker_addrs.items()):
            groups.add_row(bd.broker_name, bd.cluster, str(broker_id), addr, bd.zone_name or "")
    queues = Table()
    for column in ("group", "read", "write", "perm"):
        queues.add_column(column, justify="left" if column in ("group", "perm") else "right")
    for qd in route.queue_datas:
        queues.add_row(qd.broker_name, str(qd.read_queue_nums), str(qd.write_queue_nums),
                       Perm.to_string(int(qd.perm)))
    console.print(groups)
    console.print(queues)
    if route.order_topic_conf:
        console.print(f"order topic config: {route.order_topic_conf}", highlight=False)


@click.command("route")
@click.argument("topic")
@click.option("--namesrv", required=True, metavar="'HOST:PORT;HOST:PORT'",
              help="Name servers to ask, separated by ';': the first that answers is used.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the route as JSON (RocketMQ's document) instead of tables.")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=3_000, show_default=True,
              help="Per name server: connect and answer within this many ms.")
def route_command(topic: str, namesrv: str, as_json: bool, timeout_ms: int) -> None:
    """Print TOPIC's route as a name server answers it (GET_ROUTEINFO_BY_TOPIC).

    Exit code 0 with a route, 1 when the name server has none or no name server answered.
    """
    servers = [s.strip() for s in namesrv.replace(",", ";").split(";") if s.strip()]
    if not servers:
        raise click.BadParameter(f"expected 'HOST:PORT;HOST:PORT', got {namesrv!r}",
                                 param_hint="--namesrv")
    addresses = [split_listen(s, "--namesrv") for s in servers]
    failures: list[str] = []
    for host, port in addresses:
        try:
            route = query_route(host, port, topic, timeout_ms=timeout_ms)
        except RouteQueryError as exc:
            failures.append(str(exc))
            continue
        address = f"{host}:{port}"
        if route is None:
            raise click.ClickException(f"no route for topic {topic!r} on {address}")
        if as_json:
            sys.stdout.write(json.dumps(route_json(route), indent=1) + "\n")
        else:
            console = Console()
            _render(console if console.is_terminal else Console(width=200), topic, address,
                    route)
        return
    raise click.ClickException("; ".join(failures))
