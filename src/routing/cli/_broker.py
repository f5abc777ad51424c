"""``routing broker``: a broker's registration and heartbeat over RocketMQ's remoting protocol.

A fake broker in front of a real name server (RocketMQ's or ``routing serve``): it
registers its topics, keeps the heartbeat, follows topic changes typed on stdin (see
``routing.remoting.serve_broker``), reconnects with backoff and unregisters on SIGTERM.
Loaded lazily by ``routing.cli``.
"""

from __future__ import annotations

import click

from .. import RoutingError, TopicConfig
from ..heartbeat import BrokerConfig
from ..remoting import run_broker
from ._hosting import configure_logging, split_listen

__all__ = ["broker_command"]

_SYNC_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


def system_topics(cluster: str, broker_name: str) -> list[TopicConfig]:
    """The routing-relevant topics Java's ``TopicConfigManager`` always creates: the cluster's
    and the broker's own topics (``clusterTopicEnable``/``brokerTopicEnable`` on, perm 7) and
    ``rmq_sys_SYNC_BROKER_MEMBER_<name>`` (1 queue, INHERIT), which the member-group sync's
    compatible form asks the route of. With them the table never holds a single topic, which
    the name server's single-topic guard would refuse as a first registration."""
    return [TopicConfig(topic_name=cluster, perm=7),
            TopicConfig(topic_name=broker_name, read_queue_nums=1, write_queue_nums=1, perm=7),
            TopicConfig(topic_name=_SYNC_PREFIX + broker_name, read_queue_nums=1,
                        write_queue_nums=1, perm=1)]


def _name_servers(value: str) -> tuple[str, ...]:
    servers = tuple(s.strip() for s in value.replace(",", ";").split(";") if s.strip())
    if not servers:
        raise click.BadParameter(f"expected 'HOST:PORT;HOST:PORT', got {value!r}",
                                 param_hint="--namesrv")
    for server in servers:
        split_listen(server, "--namesrv")
    return servers


@click.command("broker")
@click.option("--namesrv", required=True, metavar="'HOST:PORT;HOST:PORT'",
              help="Name servers, separated by ';' (Java's namesrvAddr).")
@click.option("--cluster", default="DefaultCluster", show_default=True)
@click.option("--name", "broker_name", required=True, help="Broker name (the group).")
@click.option("--id", "broker_id", type=click.IntRange(min=0), default=0, show_default=True,
              help="Broker id: 0 is the master.")
@click.option("--addr", required=True, metavar="HOST:PORT",
              help="The broker's address as registered; NOTIFY_MIN_BROKER_ID_CHANGE pushes "
                   "are accepted there unless --no-listen.")
@click.option("--ha-addr", default=None, metavar="HOST:PORT", help="HA server address.")
@click.option("--topics", default="", help="Comma-separated topics to register.")
@click.option("--queues", type=click.IntRange(min=1), default=8, show_default=True,
              help="Read and write queues per topic.")
@click.option("--acting-master", is_flag=True,
              help="enableSlaveActingMaster: heartbeats every second, member-group sync.")
@click.option("--not-active-timeout-ms", type=click.IntRange(min=1), default=10_000,
              show_default=True,
              help="brokerNotActiveTimeoutMillis: the heartbeat timeout sent with each "
                   "registration in acting-master mode.")
@click.option("--single-topic-register", is_flag=True,
              help="enableSingleTopicRegister: send topic changes as REGISTER_TOPIC_IN_NAMESRV.")
@click.option("--register-period-ms", type=click.IntRange(min=1), default=30_000,
              show_default=True, help="Full registration period (clamped to 10 s .. 60 s).")
@click.option("--connect-timeout-ms", type=click.IntRange(min=1), default=3_000,
              show_default=True, help="Connect timeout and name-server scan period.")
@click.option("--compressed-register", is_flag=True,
              help="Deflate registration bodies, with a truthful 'compressed' header "
                   "(Java 5.x's is broken, see docs/java-parity.md).")
@click.option("--no-listen", is_flag=True, help="Do not listen on --addr.")
@click.option("--journal", "journal_dir", type=click.Path(file_okay=False), default=None,
              help="Write every action and outcome as JSON Lines to a file in this directory.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              default="INFO", show_default=True)
@click.option("--log-json", is_flag=True, help="Log one JSON object per line.")
def broker_command(namesrv: str, cluster: str, broker_name: str, broker_id: int, addr: str,
                   ha_addr: str | None, topics: str, queues: int, acting_master: bool,
                   not_active_timeout_ms: int, single_topic_register: bool, register_period_ms: int,
                   connect_timeout_ms: int, compressed_register: bool, no_listen: bool,
                   journal_dir: str | None, log_level: str, log_json: bool) -> None:
    """Run a broker's registration and heartbeat against --namesrv.

    Admin commands on stdin, one per line (answers as JSON on stdout): create TOPIC
    [QUEUES [PERM]], delete TOPIC, register, perm N, status. Stops on SIGINT or SIGTERM,
    after unregistering from every name server.
    """
    configure_logging(log_level, as_json=log_json)
    listen = split_listen(addr, "--addr")
    names = [t.strip() for t in topics.split(",") if t.strip()]
    try:
        config = BrokerConfig(
            cluster=cluster, broker_name=broker_name, broker_id=broker_id, broker_addr=addr,
            ha_server_addr=ha_addr, name_servers=_name_servers(namesrv),
            enable_slave_acting_master=acting_master,
            broker_not_active_timeout_ms=not_active_timeout_ms,
            enable_single_topic_register=single_topic_register,
            register_period_ms=register_period_ms, connect_timeout_ms=connect_timeout_ms,
            scan_available_name_servers=True)
        table = system_topics(cluster, broker_name) + [
            TopicConfig(topic_name=n, read_queue_nums=queues, write_queue_nums=queues)
            for n in names]
        run_broker(config, table, listen=None if no_listen else listen,
                   journal_dir=journal_dir, compressed_register=compressed_register)
    except (RoutingError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
