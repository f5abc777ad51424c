"""Requests as brokers, clients and operators send them, built with the codec: the vocabulary
of the differential tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    V3_0_11,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    SerializeType,
    body_crc32,
    encode_data_version,
    encode_route,
)

__all__ = ["Broker", "cmd", "register_topic", "route"]


def cmd(code: int, ext: Mapping[str, str] | None = None, body: bytes = b"", *,
        version: int = CURRENT_VERSION, kind: SerializeType = SerializeType.JSON,
        flag: int = 0) -> RemotingCommand:
    return RemotingCommand(code=code, version=version, ext_fields=dict(ext or {}), body=body,
                           serialize_type=kind, flag=flag)


def route(topic: str, *, version: int = CURRENT_VERSION,
          kind: SerializeType = SerializeType.JSON, **ext: str) -> RemotingCommand:
    return cmd(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **ext}, version=version,
               kind=kind)


def register_topic(topic: str, rows: Iterable[tuple[str, int]]) -> RemotingCommand:
    """REGISTER_TOPIC_IN_NAMESRV with queue rows ``(broker name, perm)`` (8/8 queues)."""
    body = encode_route(r.TopicRouteData(queue_datas=tuple(
        r.QueueData(broker_name=name, read_queue_nums=8, write_queue_nums=8, perm=perm)
        for name, perm in rows)), standard=True)
    return cmd(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": topic}, body)


class Broker:
    """One broker's identity; methods build its requests."""

    def __init__(self, name: str, port: int, broker_id: int = 0, *, cluster: str = "c1",
                 zone: str | None = None, acting_master: bool | None = None,
                 timeout_ms: int | None = None) -> None:
        self.name, self.broker_id, self.cluster = name, broker_id, cluster
        self.addr = f"127.0.0.1:{port}"
        self.ha = f"127.0.0.1:{port + 1}"
        self.zone, self.acting_master, self.timeout_ms = zone, acting_master, timeout_ms
        self.counter = 0

    @property
    def ids(self) -> dict[str, str]:
        return {"brokerName": self.name, "brokerAddr": self.addr, "clusterName": self.cluster,
                "brokerId": str(self.broker_id)}

    def body(self, topics: Iterable[str], *, counter: int | None = None,
             filter_servers: Iterable[str] = (), version: int = CURRENT_VERSION,
             perm: int = 6, unit: bool = False) -> bytes:
        configs = {t: r.TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4,
                                    perm=perm, topic_sys_flag=1 if unit else 0)
                   for t in topics}
        return RegisterBrokerBody(
            data_version=r.DataVersion(counter=self.counter if counter is None else counter,
                                       timestamp=1_700_000_000_000),
            topics=configs, filter_servers=tuple(filter_servers)).encode(version=version)

    def register(self, topics: Iterable[str] = (), *, bump: bool = True,
                 filter_servers: Iterable[str] = (), version: int = CURRENT_VERSION,
                 kind: SerializeType = SerializeType.JSON, crc: bool = True,
                 body: bytes | None = None, **extra: str) -> RemotingCommand:
        """REGISTER_BROKER; ``bump`` moves the data version on (a topic change)."""
        if bump:
            self.counter += 1
        if body is None:
            body = self.body(topics, filter_servers=filter_servers,
                             version=version if version < V3_0_11 else CURRENT_VERSION)
        ext = {**self.ids, "haServerAddr": self.ha}
        if crc:
            ext["bodyCrc32"] = str(body_crc32(body))
        if self.timeout_ms is not None:
            ext["heartbeatTimeoutMillis"] = str(self.timeout_ms)
        if self.acting_master is not None:
            ext["enableActingMaster"] = "true" if self.acting_master else "false"
        if self.zone is not None:
            ext["__ZONE_NAME"] = self.zone
        return cmd(RequestCode.REGISTER_BROKER, {**ext, **extra}, body, version=version,
                   kind=kind)

    def unregister(self) -> RemotingCommand:
        return cmd(RequestCode.UNREGISTER_BROKER, self.ids)

    def heartbeat(self, **extra: str) -> RemotingCommand:
        return cmd(RequestCode.BROKER_HEARTBEAT, {**self.ids, **extra})

    def query_version(self, counter: int | None = None) -> RemotingCommand:
        version = r.DataVersion(counter=self.counter if counter is None else counter,
                                timestamp=1_700_000_000_000)
        return cmd(RequestCode.QUERY_DATA_VERSION, self.ids, encode_data_version(version))

    def member_group(self) -> RemotingCommand:
        return cmd(RequestCode.GET_BROKER_MEMBER_GROUP,
                   {"clusterName": self.cluster, "brokerName": self.name})
