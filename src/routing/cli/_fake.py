"""``routing fake``: fake name servers on the wire, driven over HTTP by a test in any language.

Serves ``--nameservers`` `routing.testing.FakeNameServer` s sharing one manual clock, each
on its own port (``--listen``'s port, then the next ones; port 0 picks free ones), and the
control API (`routing.testing._control`) on ``--control``. One JSON line on stdout says
where everything listens once ready. Loaded lazily by ``routing.cli``.
"""

from __future__ import annotations

import json
import signal
import sys
import threading

import click

from .. import RoutingError
from ._hosting import configure_logging, split_listen

__all__ = ["fake_command"]


@click.command("fake")
@click.option("--listen", default="127.0.0.1:9876", show_default=True, metavar="HOST:PORT",
              help="The first name server's address; the others take the next ports "
                   "(port 0: free ones).")
@click.option("--nameservers", "count", type=click.IntRange(1, 64), default=1,
              show_default=True, help="How many name servers, sharing one clock.")
@click.option("--control", default="127.0.0.1:9875", show_default=True, metavar="HOST:PORT",
              help="The HTTP control API's address (port 0: a free one).")
@click.option("--allow-remote", is_flag=True,
              help="Allow non-loopback addresses for --listen and --control. The control "
                   "API can stop name servers and has no authentication.")
@click.option("--start-ms", type=click.IntRange(min=0), default=0, show_default=True,
              help="The manual clock's start (and its value after a reset).")
@click.option("--heartbeat-timeout-ms", type=click.IntRange(min=1), default=120_000,
              show_default=True, help="Broker timeout when a registration names none.")
@click.option("--scan-interval-ms", type=click.IntRange(min=1), default=5_000,
              show_default=True, help="Expiry scans, at every multiple of it in manual time.")
@click.option("--register-interval-ms", type=click.IntRange(min=0), default=30_000,
              show_default=True,
              help="Fake brokers re-register this often in manual time (0: never).")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              default="WARNING", show_default=True)
@click.option("--log-json", is_flag=True, help="Log one JSON object per line.")
def fake_command(listen: str, count: int, control: str, allow_remote: bool, start_ms: int,
                 heartbeat_timeout_ms: int, scan_interval_ms: int, register_interval_ms: int,
                 log_level: str, log_json: bool) -> None:
    """Serve fake name servers whose clock, brokers and faults a test drives over HTTP.

    Point clients and brokers at the name servers; drive them through the control API
    (GET /state, POST /clock/advance, POST /brokers, POST /faults, POST /reset, ...:
    docs/testing-clients.md). Stops on SIGINT or SIGTERM.
    """
    host, port = split_listen(listen)
    control_host, control_port = split_listen(control)
    ports = [port + i if port else 0 for i in range(count)]
    if max(ports) > 65_535:
        raise click.BadParameter(f"{count} name servers from port {port} pass 65535",
                                 param_hint="--nameservers")
    if control_port and control_port in ports and control_host == host:
        raise click.BadParameter(f"port {control_port} is both a name server's and the "
                                 f"control API's; pick another --control",
                                 param_hint="--control")
    configure_logging(log_level, as_json=log_json)
    from .. import RoutingConfig
    from ..testing import FakeFleet

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        fleet = FakeFleet(
            count=count, host=host, ports=ports, start_ms=start_ms, allow_remote=allow_remote,
            config=RoutingConfig(default_heartbeat_timeout_ms=heartbeat_timeout_ms,
                                 scan_interval_ms=scan_interval_ms),
            register_interval_ms=register_interval_ms or None)
    except (RoutingError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    try:  # the name servers listen already; the control API's imports come after
        from ..testing import start_control

        server, thread = start_control(fleet, control_host, control_port,
                                       allow_remote=allow_remote)
    except (RoutingError, OSError) as exc:
        fleet.close()
        raise click.ClickException(str(exc)) from exc
    sys.stdout.write(json.dumps({"event": "ready",
                                 "nameservers": [e.address for e in fleet.endpoints],
                                 "namesrv_addr": ";".join(e.address for e in fleet.endpoints),
                                 "control": server.url}) + "\n")
    sys.stdout.flush()
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        fleet.close()
