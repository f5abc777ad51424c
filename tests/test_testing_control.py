"""The control API of ``routing fake`` (`FakeFleet` + `ControlServer`) over real HTTP, and
the command itself: every endpoint once, bad requests answered 4xx naming field and value
with nothing changed, loopback only unless allowed, and ``routing fake`` end to end."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from routing.testing import WireError
from routing.testing._control import ControlServer, start_control
from routing.testing._fleet import FakeFleet
from wire_helpers import WireClient, register


class Api:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None,
             raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def get(self, path: str) -> Any:
        status, document = self.call("GET", path)
        assert status == 200, document
        return document

    def post(self, path: str, body: Any = None, status: int = 200) -> Any:
        got, document = self.call("POST", path, body if body is not None else {})
        assert got == status, document
        return document


@pytest.fixture
def fleet() -> Iterator[FakeFleet]:
    fleet = FakeFleet(count=2)
    yield fleet
    fleet.close()


@pytest.fixture
def api(fleet: FakeFleet) -> Iterator[Api]:
    server, thread = start_control(fleet)
    yield Api(server.url)
    server.shutdown()
    server.server_close()
    thread.join()


def test_brokers_clock_and_events(api: Api, fleet: FakeFleet) -> None:
    assert api.get("/health") == {"ok": True, "now_ms": 0}
    made = api.post("/brokers", {"name": "broker-a", "addr": "127.0.0.1:10911",
                                 "topics": ["TopicTest"], "queues": 4}, status=201)
    assert made["broker"]["nameservers"] == ["namesrv-1", "namesrv-2"]
    route = api.get("/routes/TopicTest?nameserver=1")["route"]
    assert route["queueDatas"][0]["writeQueueNums"] == 4
    with WireClient(fleet.endpoints[1].address) as client:
        assert client.route_brokers("TopicTest") == ["broker-a"]
        api.post("/brokers/127.0.0.1:10911/quiet")
        assert api.post("/clock/advance", {"ms": 125_000}) == {"now_ms": 125_000}
        assert client.route_brokers("TopicTest") is None
    expired = api.get("/events?kind=expired")["events"]
    assert [(e["nameserver"], e["at_ms"]) for e in expired] == [(0, 125_000), (1, 125_000)]
    since = api.get("/events?nameserver=0&since=3")["events"]
    assert [e["seq"] for e in since] == list(range(3, 3 + len(since)))
    assert api.post("/clock/set", {"now_ms": 200_000}) == {"now_ms": 200_000}
    assert api.post("/brokers/127.0.0.1:10911/register")["broker"]["states"] == {
        "namesrv-1": "online", "namesrv-2": "online"}
    topic = api.post("/brokers/127.0.0.1:10911/topics", {"topic": "Other", "queues": 2},
                     status=201)
    assert topic["topic"]["readQueueNums"] == 2
    assert api.get("/routes/Other")["route"] is not None
    assert api.call("DELETE", "/brokers/127.0.0.1:10911/topics/Other")[0] == 200
    assert api.call("DELETE", "/topics/Other")[1]["removed"] == {"namesrv-1": True,
                                                                  "namesrv-2": True}
    assert api.get("/routes/Other")["route"] is None
    assert api.call("DELETE", "/brokers/127.0.0.1:10911")[0] == 200
    assert api.get("/brokers") == {"brokers": []}
    assert api.get("/routes/TopicTest")["route"] is None


def test_faults_name_servers_and_connections(api: Api, fleet: FakeFleet) -> None:
    api.post("/brokers", {"name": "broker-a", "topics": ["TopicTest"]}, status=201)
    added = api.post("/faults", {"action": "busy", "code": "GET_ROUTEINFO_BY_TOPIC",
                                 "count": 1}, status=201)["faults"]
    assert [f["nameserver"] for f in added] == [0, 1]
    with WireClient(fleet.endpoints[0].address) as client:
        assert client.route("TopicTest").code == 2
        assert client.route("TopicTest").code == 0
        [conn] = api.get("/nameservers/0")["nameserver"]["connections"]
        assert conn["requests"] == 2
        requests = api.get("/requests?nameserver=0&code=GET_ROUTEINFO_BY_TOPIC")["requests"]
        assert [r["fault"] for r in requests] == [1, None]
        assert api.post(f"/nameservers/0/connections/{conn['id']}/close") == {
            "closed": conn["id"]}
        assert client.closed_by_server()
    [left] = api.get("/faults")["faults"]
    assert left["nameserver"] == 1 and left["hits"] == 0
    assert api.call("DELETE", "/nameservers/1/faults/1") == (200, {"removed": 1, "hits": 0})
    api.post("/faults", {"action": "drop_reply", "nameserver": 1}, status=201)
    assert api.call("DELETE", "/faults")[1] == {"faults": []}
    assert api.get("/faults") == {"faults": []}
    # stop / start / freeze / thaw
    assert api.post("/nameservers/1/stop")["nameserver"]["running"] is False
    with pytest.raises(ConnectionRefusedError):
        WireClient(fleet.endpoints[1].address)
    assert api.post("/nameservers/1/start")["nameserver"]["running"] is True
    assert api.post("/nameservers/0/freeze")["nameserver"]["frozen"] is True
    api.post("/brokers/10.0.0.1:10911/shutdown")
    assert api.get("/routes/TopicTest?nameserver=0")["frozen"] is True
    assert api.get("/routes/TopicTest?nameserver=0")["route"] is not None  # the frozen view
    assert api.post("/nameservers/0/thaw")["nameserver"]["frozen"] is False
    assert api.get("/routes/TopicTest?nameserver=0")["route"] is None


def test_disconnect_drops_a_tcp_brokers_channel(api: Api, fleet: FakeFleet) -> None:
    with WireClient(fleet.endpoints[0].address) as broker:
        register(broker, "broker-t", "127.0.0.1:10911", "TopicT")
        assert api.post("/brokers/127.0.0.1:10911/disconnect") == {
            "addr": "127.0.0.1:10911", "dropped": 1}
        assert broker.closed_by_server()
    fleet.endpoints[0].wait_for(lambda: fleet.servers[0].events_of("channel_closed") != ())
    assert api.get("/routes/TopicT")["route"] is None


def test_reset_starts_over_on_the_same_ports(api: Api, fleet: FakeFleet) -> None:
    ports = [e.port for e in fleet.endpoints]
    api.post("/brokers", {"name": "broker-a", "topics": ["TopicTest"]}, status=201)
    api.post("/clock/advance", {"ms": 50_000})
    api.post("/faults", {"action": "close"}, status=201)
    client = WireClient(fleet.endpoints[0].address)
    answer = api.post("/reset")
    assert answer["now_ms"] == 0 and answer["nameservers"] == [
        f"127.0.0.1:{p}" for p in ports]
    assert client.closed_by_server()
    client.close()
    state = api.get("/state")
    assert state["resets"] == 1 and state["brokers"] == []
    assert all(ns["faults"] == [] and ns["topics"] == [] for ns in state["nameservers"])
    with WireClient(fleet.endpoints[0].address) as fresh:
        assert fresh.route("TopicTest").code == 17


BAD = [
    ("POST", "/clock/advance", {"ms": -1}, 400, "ms", -1),
    ("POST", "/clock/advance", {"ms": "5"}, 400, "ms", "5"),
    ("POST", "/clock/advance", {"ms": 5, "extra": 1}, 400, "extra", 1),
    ("POST", "/clock/set", {"now_ms": -3}, 400, "now_ms", -3),
    ("POST", "/brokers", {"name": "has space"}, 400, "name", "has space"),
    ("POST", "/brokers", {"name": "b", "addr": "nope"}, 400, "addr", "nope"),
    ("POST", "/brokers", {"name": "b", "topics": ["bad topic"]}, 400, "topics[0]",
     "bad topic"),
    ("POST", "/brokers", {"name": "b", "topics": {"T": {"perm": 9}}}, 400, "topics.T.perm", 9),
    ("POST", "/brokers", {"name": "b", "nameservers": [0, 7]}, 404, "nameservers", 7),
    ("POST", "/brokers", {"name": "b", "queues": 0}, 400, "queues", 0),
    ("POST", "/brokers", {"name": "b", "register": "yes"}, 400, "register", "yes"),
    ("POST", "/brokers", {"name": "b", "colour": "red"}, 400, "colour", "red"),
    ("POST", "/brokers/127.0.0.1:1/quiet", {}, 404, "addr", "127.0.0.1:1"),
    ("POST", "/brokers/127.0.0.1:1/topics", {"topic": "T"}, 404, "addr", "127.0.0.1:1"),
    ("POST", "/faults", {"action": "explode"}, 400, "action", "explode"),
    ("POST", "/faults", {"action": "delay"}, 400, "delay_ms", None),
    ("POST", "/faults", {"action": "busy", "nameserver": 9}, 404, "nameserver", 9),
    ("POST", "/nameservers/9/stop", {}, 404, "nameserver", 9),
    ("POST", "/nameservers/x/stop", {}, 400, "nameserver", "x"),
    ("POST", "/nameservers/0/connections/99/close", {}, 404, "connection", 99),
    ("DELETE", "/nameservers/0/faults/5", None, 404, "fault", 5),
    ("GET", "/events?since=2", None, 400, "since", "2"),
    ("GET", "/events?nameserver=0&since=-2", None, 400, "since", "-2"),
    ("GET", "/requests?code=NOPE", None, 400, "code", "NOPE"),
    ("GET", "/routes/T?colour=red", None, 400, "colour", "red"),
    ("PUT", "/state", None, 405, "method", "PUT"),
    ("GET", "/nothing/here", None, 404, "path", "/nothing/here"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "field", "value"), BAD)
def test_a_bad_request_is_4xx_naming_field_and_value_and_changes_nothing(
        api: Api, method: str, path: str, body: Any, status: int, field: str,
        value: Any) -> None:
    api.post("/brokers", {"name": "broker-a", "addr": "127.0.0.1:10911",
                          "topics": ["TopicTest"]}, status=201)
    before = api.get("/state")
    got, document = api.call(method, path, body)
    assert (got, document["field"], document["value"]) == (status, field, value), document
    assert document["error"]
    assert api.get("/state") == before


@pytest.mark.parametrize(("raw", "field"), [(b"{not json", "body"), (b"[1, 2]", "body")])
def test_a_body_that_is_not_a_json_object(api: Api, raw: bytes, field: str) -> None:
    status, document = api.call("POST", "/clock/advance", raw=raw)
    assert status == 400 and document["field"] == field
    assert api.get("/health")["now_ms"] == 0


def test_a_body_over_the_limit_is_refused_before_it_is_read(api: Api) -> None:
    url = urllib.parse.urlsplit(api.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.putrequest("POST", "/brokers")
    conn.putheader("Content-Length", str((1 << 20) + 1))
    conn.endheaders()               # the body never comes: the answer must not wait for it
    answer = conn.getresponse()
    document = json.loads(answer.read())
    conn.close()
    assert answer.status == 413 and document["field"] == "Content-Length"
    assert document["value"] == (1 << 20) + 1
    assert api.get("/brokers") == {"brokers": []}


def test_loopback_only_unless_allowed(fleet: FakeFleet) -> None:
    with pytest.raises(WireError) as bad:
        ControlServer(fleet, "0.0.0.0", 0)
    assert (bad.value.field, bad.value.value) == ("control", "0.0.0.0")
    with pytest.raises(WireError):
        FakeFleet(host="10.1.2.3")


# --------------------------------------------------------------------------- the command

ROOT = Path(__file__).resolve().parent.parent


def _routing(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, "-c", "from routing.cli import main; main()",
                             "fake", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_routing_fake_end_to_end() -> None:
    proc = _routing("--listen", "127.0.0.1:0", "--control", "127.0.0.1:0",
                    "--nameservers", "2", "--start-ms", "1000")
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready" and len(ready["nameservers"]) == 2
        assert ready["namesrv_addr"] == ";".join(ready["nameservers"])
        api = Api(ready["control"])
        assert api.get("/health")["now_ms"] == 1000
        api.post("/brokers", {"name": "broker-a", "addr": "127.0.0.1:10911",
                              "topics": ["TopicTest"]}, status=201)
        with WireClient(ready["nameservers"][1]) as client:
            assert client.route_brokers("TopicTest") == ["broker-a"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


@pytest.mark.parametrize(("args", "message"), [
    (["--listen", "0.0.0.0:0", "--control", "127.0.0.1:0"], "not a loopback address"),
    (["--listen", "127.0.0.1:0", "--control", "192.0.2.1:0"], "not a loopback address"),
    (["--listen", "127.0.0.1:9876", "--nameservers", "3", "--control", "127.0.0.1:9877"],
     "both a name server's and the control API's"),
])
def test_routing_fake_refuses(args: list[str], message: str) -> None:
    proc = _routing(*args)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and message in err, err
