"""`FakeFleet`: the name servers ``routing fake`` serves, as one object the control API
drives: ``count`` fakes on one `FakeClock`, each on its own port, brokers known by address
across them, and `reset` (fresh fakes, clock back at ``start_ms``, the same ports).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._messages import RoutingConfig
from .._validate import check_addr, check_int, check_name, check_topic
from .._values import Perm, TopicConfig
from ._fake import DEFAULT_REGISTER_INTERVAL_MS, FakeBroker, FakeClock, FakeNameServer
from ._wire import Wire, WireEndpoint, WireError

__all__ = ["FakeFleet", "FleetError"]

_BROKER_KEYS = ("name", "cluster", "broker_id", "addr", "topics", "queues", "nameservers",
                "heartbeat_timeout_ms", "register", "auto_register", "zone_name")
_TOPIC_KEYS = ("topic", "queues", "read_queue_nums", "write_queue_nums", "perm")


class FleetError(WireError):
    """A control request that cannot be done; ``status`` is the HTTP status to answer
    (400 a bad field, 404 nothing by that name, 409 a conflict). Nothing changed."""

    def __init__(self, message: str, *, field: str | None = None, value: object = None,
                 status: int = 400) -> None:
        super().__init__(message, field=field, value=value)
        self.status = status


class FakeFleet:
    """``count`` fake name servers sharing one clock, served on ``ports`` (0: a free one;
    default all free). ``host`` must be loopback unless ``allow_remote``. Every method is
    safe from any thread; the control API calls them holding `lock` for atomicity."""

    def __init__(self, *, count: int = 1, host: str = "127.0.0.1",
                 ports: Sequence[int] | None = None, config: RoutingConfig | None = None,
                 start_ms: int = 0, scan_interval_ms: int | None = None,
                 register_interval_ms: int | None = DEFAULT_REGISTER_INTERVAL_MS,
                 allow_remote: bool = False) -> None:
        check_int("count", count, low=1, high=64)
        self.ports = list(ports) if ports is not None else [0] * count
        if len(self.ports) != count:
            raise FleetError(f"{count} name server(s) but {len(self.ports)} port(s)",
                             field="ports", value=self.ports)
        self.host, self.allow_remote = host, allow_remote
        self.config = config if config is not None else RoutingConfig()
        self.start_ms = start_ms
        self.scan_interval_ms = scan_interval_ms
        self.register_interval_ms = register_interval_ms
        self.resets = 0
        self._build()

    def _build(self) -> None:
        self.clock = FakeClock(self.start_ms)
        self.servers = tuple(
            FakeNameServer(clock=self.clock, config=self.config, name=f"namesrv-{i + 1}",
                           scan_interval_ms=self.scan_interval_ms,
                           register_interval_ms=self.register_interval_ms)
            for i in range(len(self.ports)))
        self.brokers: dict[str, list[FakeBroker]] = {}
        self._hosts = 0
        self.wire = Wire(host=self.host, allow_remote=self.allow_remote)
        try:
            for i, (ns, port) in enumerate(zip(self.servers, self.ports, strict=True)):
                self.ports[i] = self.wire.serve(ns, port).port
        except BaseException:
            self.wire.close()
            raise

    @property
    def lock(self) -> Any:
        """The clock's lock: hold it to make several calls one step."""
        return self.clock.lock

    @property
    def endpoints(self) -> tuple[WireEndpoint, ...]:
        return tuple(self.wire)

    def close(self) -> None:
        self.wire.close()

    def reset(self) -> None:
        """Everything back to the start: every connection dropped, fresh fakes (no brokers,
        no faults, no events), the clock at ``start_ms``, the same ports."""
        self.wire.close()
        self.resets += 1
        self._build()

    # ------------------------------------------------------------------ lookups

    def server(self, index: object, field: str = "nameserver") -> FakeNameServer:
        """The name server at ``index`` (0-based), or `FleetError` 404."""
        if isinstance(index, str) and index.isdigit():
            index = int(index)
        if isinstance(index, bool) or not isinstance(index, int):
            raise FleetError(f"{field} must be a name server index, got {index!r}",
                             field=field, value=index)
        if not 0 <= index < len(self.servers):
            raise FleetError(f"no name server {index}: there are {len(self.servers)} (0.."
                             f"{len(self.servers) - 1})", field=field, value=index, status=404)
        return self.servers[index]

    def servers_of(self, value: object, field: str = "nameservers") -> list[FakeNameServer]:
        """The name servers a request names (an index or a list of them; None: all)."""
        if value is None:
            return list(self.servers)
        items = value if isinstance(value, list) else [value]
        if not items:
            raise FleetError(f"{field} must name at least one name server", field=field,
                             value=value)
        return list(dict.fromkeys(self.server(i, field) for i in items))

    def handles(self, addr: str) -> list[FakeBroker]:
        """The fake broker at ``addr`` (one handle per name server), or `FleetError` 404."""
        found = self.brokers.get(addr)
        if not found:
            raise FleetError(f"no fake broker at {addr!r}", field="addr", value=addr,
                             status=404)
        return found

    # ------------------------------------------------------------------ brokers

    def add_broker(self, spec: Mapping[str, Any]) -> list[FakeBroker]:
        """A fake broker on the name servers ``spec['nameservers']`` names (default all),
        from the control API's JSON object (see docs/testing-clients.md). All fields are
        checked first: a bad one is a `FleetError` naming it, and nothing is added."""
        _known(spec, _BROKER_KEYS)
        name = check_name("name", spec.get("name"))
        cluster = check_name("cluster", spec.get("cluster", "DefaultCluster"))
        broker_id = check_int("broker_id", spec.get("broker_id", 0), low=0)
        addr = spec.get("addr")
        if addr is None:
            self._hosts += 1
            addr = f"10.0.0.{self._hosts}:10911"
        check_addr("addr", addr)
        if addr in self.brokers:
            raise FleetError(f"a fake broker at {addr!r} exists already", field="addr",
                             value=addr, status=409)
        queues = check_int("queues", spec.get("queues", 16), low=1, high=65_535)
        topics = _topic_table(spec.get("topics", []), queues)
        timeout = spec.get("heartbeat_timeout_ms")
        if timeout is not None:
            check_int("heartbeat_timeout_ms", timeout, low=1)
        zone = spec.get("zone_name")
        if zone is not None:
            check_name("zone_name", zone)
        register, auto = spec.get("register", True), spec.get("auto_register", True)
        for key, flag in (("register", register), ("auto_register", auto)):
            if not isinstance(flag, bool):
                raise FleetError(f"{key} must be true or false, got {flag!r}", field=key,
                                 value=flag)
        servers = self.servers_of(spec.get("nameservers"))
        handles = []
        for ns in servers:
            handles.append(ns.broker(cluster=cluster, name=name, broker_id=broker_id,
                                     addr=addr, topics=topics, zone_name=zone,
                                     heartbeat_timeout_ms=timeout, auto_register=auto,
                                     register=register and ns.running))
        self.brokers[addr] = handles
        return handles

    def remove_broker(self, addr: str) -> None:
        """Shut the broker down (UNREGISTER on each running name server) and forget it."""
        for handle in self.handles(addr):
            if handle.server.running:
                handle.shutdown()
            else:
                handle.disconnect()
        del self.brokers[addr]

    def create_topic(self, addr: str, spec: Mapping[str, Any]) -> TopicConfig:
        _known(spec, _TOPIC_KEYS)
        topic = check_topic("topic", spec.get("topic"))
        queues = check_int("queues", spec.get("queues", 16), low=1, high=65_535)
        read = check_int("read_queue_nums", spec.get("read_queue_nums", queues), low=0,
                         high=65_535)
        write = check_int("write_queue_nums", spec.get("write_queue_nums", queues), low=0,
                          high=65_535)
        perm = check_int("perm", spec.get("perm", Perm.READ | Perm.WRITE), low=0, high=7)
        config = TopicConfig(topic_name=topic, read_queue_nums=read, write_queue_nums=write,
                             perm=perm)
        for handle in self.handles(addr):
            handle.create_topic(topic, read_queue_nums=read, write_queue_nums=write, perm=perm)
        return config

    def delete_topic(self, addr: str, topic: str) -> None:
        handles = self.handles(addr)
        if topic not in handles[0].topics:
            raise FleetError(f"broker {addr} has no topic {topic!r}", field="topic",
                             value=topic, status=404)
        for handle in handles:
            handle.delete_topic(topic)

    def disconnect(self, addr: str) -> int:
        """Drop the broker's channel: a fake broker's handles disconnect, and every TCP
        connection that spoke for ``addr`` is closed. Returns connections dropped."""
        dropped = 0
        for handle in self.brokers.get(addr, ()):
            dropped += handle.channel is not None
            handle.disconnect()
        for ns in self.servers:
            if ns.wire is not None and ns.running:
                dropped += ns.wire.disconnect(addr)
        if addr not in self.brokers and not dropped:
            raise FleetError(f"no broker at {addr!r} (fake or connected)", field="addr",
                             value=addr, status=404)
        return dropped


def _known(spec: Mapping[str, Any], keys: Iterable[str]) -> None:
    if not isinstance(spec, Mapping):
        raise FleetError(f"expected a JSON object, got {spec!r:.60}", field="body", value=spec)
    unknown = sorted(set(spec) - set(keys))
    if unknown:
        raise FleetError(f"unknown field {unknown[0]!r}; expected some of {sorted(keys)}",
                         field=unknown[0], value=spec[unknown[0]])


def _topic_table(topics: object, queues: int) -> dict[str, TopicConfig]:
    """``["A", "B"]`` (each with ``queues``) or ``{"A": {"read_queue_nums": 4, ...}}``."""
    table: dict[str, TopicConfig] = {}
    if isinstance(topics, list):
        for i, name in enumerate(topics):
            check_topic(f"topics[{i}]", name)
            table[name] = TopicConfig(topic_name=name, read_queue_nums=queues,
                                      write_queue_nums=queues)
        return table
    if not isinstance(topics, dict):
        raise FleetError(f"topics must be a list of names or an object, got {topics!r:.60}",
                         field="topics", value=topics)
    for name, spec in topics.items():
        check_topic("topics", name)
        if not isinstance(spec, dict):
            raise FleetError(f"topics.{name} must be an object, got {spec!r:.60}",
                             field=f"topics.{name}", value=spec)
        _known(spec, ("read_queue_nums", "write_queue_nums", "perm"))
        read = check_int(f"topics.{name}.read_queue_nums", spec.get("read_queue_nums", queues),
                         low=0, high=65_535)
        write = check_int(f"topics.{name}.write_queue_nums",
                          spec.get("write_queue_nums", queues), low=0, high=65_535)
        perm = check_int(f"topics.{name}.perm", spec.get("perm", 6), low=0, high=7)
        table[name] = TopicConfig(topic_name=name, read_queue_nums=read, write_queue_nums=write,
                                  perm=perm)
    return table
