"""A blocking RocketMQ remoting client for the tests of fakes served on the wire.

Each `WireClient` is one TCP connection. ``send`` writes a request and returns its opaque;
``recv`` returns the next frame that arrives. Waits are bounded by ``timeout_s`` (a
safety net against a hung test, never a pause: a test that expects nothing to arrive
sends a second request and checks which answer comes first).
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Mapping

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    FrameDecoder,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    body_crc32,
    decode_route,
    encode,
)

_opaques = itertools.count(1)


class WireClient:
    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
        self.decoder = FrameDecoder()
        self.inbox: list[RemotingCommand] = []

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, code: int, ext: Mapping[str, str] | None = None, body: bytes = b"",
             *, version: int = CURRENT_VERSION) -> int:
        opaque = next(_opaques)
        self.sock.sendall(encode(RemotingCommand(code=code, opaque=opaque, version=version,
                                                 ext_fields=dict(ext or {}), body=body)))
        return opaque

    def recv(self) -> RemotingCommand:
        """The next frame; `ConnectionError` if the server closed the connection."""
        while not self.inbox:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("closed by the server")
            self.inbox.extend(self.decoder.feed(data))
        return self.inbox.pop(0)

    def closed_by_server(self) -> bool:
        """True once the server closes (reads until EOF; frames meanwhile are dropped)."""
        try:
            while True:
                self.recv()
        except (ConnectionError, OSError):
            return True

    def ask(self, code: int, ext: Mapping[str, str] | None = None,
            body: bytes = b"") -> RemotingCommand:
        opaque = self.send(code, ext, body)
        answer = self.recv()
        assert answer.opaque == opaque, (answer, opaque)
        return answer

    def route(self, topic: str) -> RemotingCommand:
        return self.ask(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})

    def route_brokers(self, topic: str) -> list[str] | None:
        """The broker names of ``topic``'s route as a client reads it, or None."""
        answer = self.route(topic)
        if answer.code != 0:
            return None
        return sorted(q.broker_name for q in decode_route(answer.body).queue_datas)


def register_fields(name: str, addr: str, body: bytes, broker_id: int = 0) -> dict[str, str]:
    return {"brokerName": name, "brokerAddr": addr, "clusterName": "DefaultCluster",
            "haServerAddr": addr, "brokerId": str(broker_id), "enableActingMaster": "false",
            "bodyCrc32": str(body_crc32(body))}


def registration_body(*topics: str, counter: int = 1, queues: int = 4) -> bytes:
    table = {t: r.TopicConfig(topic_name=t, read_queue_nums=queues, write_queue_nums=queues)
             for t in (*topics, "DefaultCluster")}
    return RegisterBrokerBody(data_version=r.DataVersion(timestamp=1, counter=counter),
                              topics=table).encode()


def register(client: WireClient, name: str, addr: str, *topics: str,
             counter: int = 1) -> RemotingCommand:
    body = registration_body(*topics, counter=counter)
    return client.ask(RequestCode.REGISTER_BROKER, register_fields(name, addr, body), body)
