"""``routing serve``: run a name server speaking RocketMQ's remoting protocol.

Loaded lazily by ``routing.cli`` (needs the ``cli`` extra). Logs go to stderr, as text or,
with ``--log-json``, one JSON object per line (``event`` plus the structured fields).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import click

from .._errors import RoutingError
from .._messages import RoutingConfig
from ..remoting._server import run_server

__all__ = ["serve_command"]

_STANDARD_FIELDS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts_ms": int(record.created * 1000), "level": record.levelname,
                               "logger": record.name}
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD_FIELDS}
        if "event" not in extra:
            doc["message"] = record.getMessage()
        doc.update(extra)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, separators=(",", ":"))


def _split_listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65_535:
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


@click.command("serve")
@click.option("--listen", default="127.0.0.1:9876", show_default=True, metavar="HOST:PORT",
              help="Address to listen on (port 0 picks a free one).")
@click.option("--scan-interval-ms", type=click.IntRange(min=1), default=5_000,
              show_default=True, help="How often silent brokers are expired (Java: 5000).")
@click.option("--wait-for-service-ms", type=click.IntRange(min=0), default=None,
              help="Readiness wait: answer routes with 'name server not ready' for this long "
                   "after start (Java needWaitForService: 45000). Off by default.")
@click.option("--heartbeat-timeout-ms", type=click.IntRange(min=1), default=120_000,
              show_default=True, help="Broker timeout when its registration names none.")
@click.option("--support-acting-master", is_flag=True, help="Java supportActingMaster.")
@click.option("--notify-min-broker-id-changed", is_flag=True,
              help="Send NOTIFY_MIN_BROKER_ID_CHANGE to brokers (Java notifyMinBrokerIdChanged).")
@click.option("--order-message-enable", is_flag=True,
              help="Fill orderTopicConf in routes from the ORDER_TOPIC_CONFIG KV namespace.")
@click.option("--delete-topic-with-broker-registration", is_flag=True,
              help="Java deleteTopicWithBrokerRegistration.")
@click.option("--journal", "journal_dir", type=click.Path(file_okay=False), default=None,
              help="Write every routing write call to a journal file in this directory.")
@click.option("--nameserver-id", default=None,
              help="Name of this server in the journal (default: the --listen address).")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              default="INFO", show_default=True)
@click.option("--log-json", is_flag=True, help="Log one JSON object per line.")
def serve_command(listen: str, scan_interval_ms: int, wait_for_service_ms: int | None,
                  heartbeat_timeout_ms: int, support_acting_master: bool,
                  notify_min_broker_id_changed: bool, order_message_enable: bool,
                  delete_topic_with_broker_registration: bool, journal_dir: str | None,
                  nameserver_id: str | None, log_level: str, log_json: bool) -> None:
    """Serve RocketMQ's remoting protocol: point brokers and clients at --listen.

    Stops cleanly on SIGINT or SIGTERM.
    """
    host, port = _split_listen(listen)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if log_json else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("routing")
    logger.handlers[:] = [handler]
    logger.setLevel(log_level)
    logger.propagate = False
    config = RoutingConfig(
        default_heartbeat_timeout_ms=heartbeat_timeout_ms,
        support_acting_master=support_acting_master,
        delete_topic_with_broker_registration=delete_topic_with_broker_registration,
        notify_min_broker_id_changed=notify_min_broker_id_changed,
        wait_for_service_ms=wait_for_service_ms, order_message_enable=order_message_enable,
        scan_interval_ms=scan_interval_ms)
    try:
        run_server(host, port, config=config, scan_interval_ms=scan_interval_ms,
                   journal_dir=journal_dir, nameserver_id=nameserver_id or listen)
    except (RoutingError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
