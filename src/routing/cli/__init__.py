"""The ``routing`` command line (needs the ``cli`` extra: click, rich, matplotlib).

Subcommands are imported only when run, so ``routing --help`` never starts Spark:

- ``routing demo``: simulate a cluster, analyze its journals on Spark, print and draw it.
- ``routing simulate``: the deterministic cluster simulator (writes journals).
- ``routing analyze``: the PySpark pipeline over journals.
- ``routing watch``: the same analysis live, on Spark Structured Streaming.
- ``routing serve``: a name server speaking RocketMQ's remoting protocol.
- ``routing broker``: a broker's registration and heartbeat against name servers.
- ``routing route``: a topic's route as name servers answer it.
- ``routing fake``: fake name servers on the wire, driven over HTTP (clock, brokers, faults).
"""

from __future__ import annotations

import importlib
from typing import Any

try:
    import click
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit(
        "the routing command line needs its extra: pip install 'rocketmq-routing[cli]'") from exc

from .. import __version__

__all__ = ["main"]

#: command name -> (module, attribute, one-line help)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("routing.cli._demo", "demo_command",
             "Simulate, analyze on Spark, print a summary and draw a timeline."),
    "simulate": ("routing.cli._simulate", "simulate_command",
                 "Run the deterministic cluster simulator and write journals."),
    "analyze": ("routing.cli._analyze", "analyze_command",
                "Analyze name-server journals with PySpark."),
    "watch": ("routing.cli._watch", "watch_command",
              "Watch a folder of rotated journals live: incidents, metrics, tables."),
    "serve": ("routing.cli._serve", "serve_command",
              "Serve RocketMQ's remoting protocol (a name server for tests)."),
    "broker": ("routing.cli._broker", "broker_command",
               "Run a broker's registration and heartbeat against name servers."),
    "route": ("routing.cli._route", "route_command",
              "Ask name servers for a topic's route (GET_ROUTEINFO_BY_TOPIC)."),
    "fake": ("routing.cli._fake", "fake_command",
             "Fake name servers for client tests: time, brokers and faults over HTTP."),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attribute, _help = entry
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, _COMMANDS[name][2]) for name in sorted(_COMMANDS)])


@click.group(cls=_LazyGroup)
@click.version_option(version=__version__, package_name="rocketmq-routing")
def main(**_: Any) -> None:
    """routing: the routing brain of a RocketMQ-style name server."""
