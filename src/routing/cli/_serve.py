"""``routing serve``: run a name server speaking RocketMQ's remoting protocol.

Loaded lazily by ``routing.cli`` (needs the ``cli`` extra). Logs go to stderr, as text or,
with ``--log-json``, one JSON object per line (``event`` plus the structured fields).
"""

from __future__ import annotations

from typing import Any

import attrs
import click

from .. import RoutingError
from ..remoting import (
    NamesrvConfig,
    help_text,
    load_properties_file,
    parse_properties,
    run_server,
)
from ._hosting import configure_logging, split_listen
from ._simulate import DEFAULT_SNAPSHOT_EVERY, _period, _size, snapshot_every

__all__ = ["serve_command"]


def listen_from_file(config_file: str, host: str, port: int) -> tuple[str, int]:
    """``bindAddress`` and ``listenPort`` of a ``--config`` file (Java's
    ``NettyServerConfig`` keys), each where the file sets it, else ``host``/``port``. A port
    outside 0..65535 is a click error naming the key and the file. (The file was read and
    its values checked by `load_properties_file` already.)"""
    with open(config_file, encoding="utf-8") as handle:
        entries = {key: value for _line, key, value in
                   parse_properties(handle.read(), source=config_file)}
    if "bindAddress" in entries:
        host = entries["bindAddress"].strip()
    if "listenPort" in entries:
        text = entries["listenPort"].strip()
        if not text.isdigit() or not 0 <= int(text) <= 65_535:
            raise click.BadParameter(f"listenPort={text} in {config_file}: expected a port "
                                     "from 0 to 65535", param_hint="--config")
        port = int(text)
    return host, port


def _epilog() -> str:
    lines = help_text().splitlines()
    return "\b\n" + "\n".join(lines)


@click.command("serve", epilog=_epilog())
@click.option("--listen", default="127.0.0.1:9876", show_default=True, metavar="HOST:PORT",
              help="Address to listen on (port 0 picks a free one). Without it, "
                   "bindAddress and listenPort from --config, where set.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              metavar="FILE",
              help="namesrv.properties (Java's -c): the keys below, key=value per line. "
                   "Options given on the command line win over the file.")
@click.option("--kv-config", type=click.Path(dir_okay=False), default=None, metavar="PATH",
              help="KV config file (Java's kvConfig.json layout), loaded at start and "
                   "written atomically on every change. Default: kvConfigPath from --config, "
                   "else in memory.")
@click.option("--scan-interval-ms", type=click.IntRange(min=1), default=None,
              help="How often silent brokers are expired (Java: 5000).  [default: 5000]")
@click.option("--wait-for-service-ms", type=click.IntRange(min=0), default=None,
              help="Readiness wait: answer routes with 'name server not ready' for this long "
                   "after start (Java needWaitForService: 45000). Off by default.")
@click.option("--heartbeat-timeout-ms", type=click.IntRange(min=1), default=None,
              help="Broker timeout when its registration names none.  [default: 120000]")
@click.option("--support-acting-master", is_flag=True, default=None,
              help="Java supportActingMaster.")
@click.option("--notify-min-broker-id-changed", is_flag=True, default=None,
              help="Send NOTIFY_MIN_BROKER_ID_CHANGE to brokers (Java notifyMinBrokerIdChanged).")
@click.option("--order-message-enable", is_flag=True, default=None,
              help="Fill orderTopicConf in routes from the ORDER_TOPIC_CONFIG KV namespace.")
@click.option("--delete-topic-with-broker-registration", is_flag=True, default=None,
              help="Java deleteTopicWithBrokerRegistration.")
@click.option("--journal", "journal_dir", type=click.Path(file_okay=False), default=None,
              help="Write every routing write call to a journal file in this directory.")
@click.option("--journal-snapshot-every", "journal_snapshot_every",
              default=DEFAULT_SNAPSHOT_EVERY, callback=snapshot_every, show_default=True,
              metavar="DURATION|off",
              help="With --journal: write a snapshot of the tables into the journal this "
                   "often (e.g. 10m), so that a replay can be split there; off: none.")
@click.option("--journal-rotate-every", "journal_rotate_every", default="10s",
              show_default=True, callback=_period, metavar="DURATION",
              help="With --journal: close the journal file and start a new one this often "
                   "(each appears complete, docs/journal.md \"Rotation\"); 0: never.")
@click.option("--journal-rotate-bytes", "journal_rotate_bytes", default="64MB",
              show_default=True, callback=_size, metavar="SIZE",
              help="With --journal: also start a new file once one holds this much; 0: never.")
@click.option("--nameserver-id", default=None,
              help="Name of this server in the journal (default: the --listen address).")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              default="INFO", show_default=True)
@click.option("--log-json", is_flag=True, help="Log one JSON object per line.")
@click.option("--metrics", "metrics_listen", default=None, metavar="HOST:PORT",
              help="Serve Prometheus text at http://HOST:PORT/metrics (the metrics extra).")
@click.option("--shadow", is_flag=True,
              help="Answer brokers, refuse clients' route reads (SYSTEM_ERROR): a journaling "
                   "shadow beside Java name servers (docs/shadow.md).")
@click.option("--loop", type=click.Choice(["auto", "asyncio", "uvloop"]), default="auto",
              show_default=True,
              help="Event loop: auto is uvloop when the uvloop extra is installed, else "
                   "asyncio (docs/performance.md).")
def serve_command(listen: str, config_file: str | None, kv_config: str | None,
                  scan_interval_ms: int | None, wait_for_service_ms: int | None,
                  heartbeat_timeout_ms: int | None, support_acting_master: bool | None,
                  notify_min_broker_id_changed: bool | None, order_message_enable: bool | None,
                  delete_topic_with_broker_registration: bool | None, journal_dir: str | None,
                  journal_snapshot_every: int | None, journal_rotate_every: int,
                  journal_rotate_bytes: int, nameserver_id: str | None,
                  log_level: str, log_json: bool, metrics_listen: str | None, shadow: bool,
                  loop: str) -> None:
    """Serve RocketMQ's remoting protocol: point brokers and clients at --listen.

    Stops cleanly on SIGINT or SIGTERM. Settings can also be changed at run time with
    UPDATE_NAMESRV_CONFIG (mqadmin updateNamesrvConfig) and read with GET_NAMESRV_CONFIG.
    """
    host, port = split_listen(listen)
    metrics = split_listen(metrics_listen, "--metrics") if metrics_listen is not None else None
    logger = configure_logging(log_level, as_json=log_json)
    try:
        settings = NamesrvConfig()
        if config_file is not None:
            settings, unknown = load_properties_file(config_file)
            if click.get_current_context().get_parameter_source("listen") is not \
                    click.core.ParameterSource.COMMANDLINE:  # the command line wins
                host, port = listen_from_file(config_file, host, port)
                listen = f"{host}:{port}"
            for key in unknown:
                logger.warning("config_key_unknown file=%s key=%s (kept and reported, as Java "
                               "does; no effect)", config_file, key,
                               extra={"event": "config_key_unknown", "file": config_file,
                                      "key": key})
        overrides = {"scan_interval_ms": scan_interval_ms,
                     "default_heartbeat_timeout_ms": heartbeat_timeout_ms,
                     "support_acting_master": support_acting_master,
                     "notify_min_broker_id_changed": notify_min_broker_id_changed,
                     "order_message_enable": order_message_enable,
                     "delete_topic_with_broker_registration":
                         delete_topic_with_broker_registration}
        given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
        if wait_for_service_ms is not None:
            given["wait_for_service_ms"] = wait_for_service_ms
        settings = attrs.evolve(settings, routing=attrs.evolve(settings.routing, **given))
        kv_path = kv_config if kv_config is not None else settings.get("kvConfigPath")
        if kv_path is not None:
            kept = dict(settings.kept)
            kept["kvConfigPath"] = kv_path
            settings = attrs.evolve(settings, kept=kept)
        run_server(host, port, settings=settings, journal_dir=journal_dir,
                   journal_snapshot_every_ms=journal_snapshot_every,
                   journal_rotate_every_ms=journal_rotate_every,
                   journal_rotate_bytes=journal_rotate_bytes,
                   nameserver_id=nameserver_id or listen, kv_config=kv_path, loop=loop,
                   metrics=metrics, shadow=shadow)
    except (RoutingError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
