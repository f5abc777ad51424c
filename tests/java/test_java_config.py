"""GET_NAMESRV_CONFIG (319) and UPDATE_NAMESRV_CONFIG (318) against Java's name server.

Both servers start from the same ``namesrv.properties`` keys (run.sh's: listenPort,
bindAddress, rocketmqHome, kvConfigPath, plus the short scan interval), each with its own
paths and port. Every setting Java reports, ours reports with the same value, except the
address and paths each actually uses; ours adds its two own keys.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from wire import RoutingServer, WireClient
from wire_diff import Pair, properties
from wire_requests import Broker, cmd

from routing.remoting import RequestCode, ResponseCode

#: routing's own settings (no Java counterpart), reported so that 318 changes read back
ROUTING_ONLY = {"defaultHeartbeatTimeoutMillis", "maxQueueNums"}
PATHS = ("configStorePath", "kvConfigPath", "rocketmqHome")


def _config(client: WireClient) -> dict[str, str]:
    answer = client.call(cmd(RequestCode.GET_NAMESRV_CONFIG))
    assert answer.code == ResponseCode.SUCCESS
    return properties(answer.body)


def test_get_config_answers_as_java_for_the_address_actually_served(
        pair: Pair, ours: RoutingServer, tmp_path: Path) -> None:
    java, mine = _config(pair.java), _config(pair.ours)
    assert set(mine) - set(java) == ROUTING_ONLY
    assert set(java) <= set(mine)
    assert (java["bindAddress"], java["listenPort"]) == (pair.java.address[0],
                                                         str(pair.java.address[1]))
    assert (mine["bindAddress"], mine["listenPort"]) == (ours.address[0], str(ours.address[1]))
    own = tmp_path / "ours"
    assert {k: mine[k] for k in PATHS} == {
        "configStorePath": str(own / "namesrv.properties"),
        "kvConfigPath": str(own / "namesrv" / "kvConfig.json"), "rocketmqHome": str(own)}
    served = {"bindAddress", "listenPort", *PATHS}
    assert {k: v for k, v in java.items() if k not in served} == {
        k: v for k, v in mine.items() if k not in served | ROUTING_ONLY}


def test_get_config_without_a_file_reports_the_served_address(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Bare ``routing serve``: no file, the KV in memory. The address is the one bound, and
    a setting with no value is left out (Java leaves out a null setting too; Java's defaults
    name files under ~/namesrv that it writes, ours writes none unless asked);
    ``rocketmqHome`` comes from ``$ROCKETMQ_HOME`` as in Java."""
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    with RoutingServer() as server, WireClient(server.address) as client:
        got = _config(client)
    assert (got["bindAddress"], got["listenPort"]) == (server.address[0],
                                                       str(server.address[1]))
    assert got["rocketmqHome"] == str(tmp_path)
    assert "configStorePath" not in got and "kvConfigPath" not in got


def _update(pair: Pair, text: str) -> tuple[int, int]:
    java, ours = pair.call(cmd(RequestCode.UPDATE_NAMESRV_CONFIG, None, text.encode()))
    return java.code, ours.code


def test_update_config_answers_the_same_and_takes_effect_in_both(pair: Pair) -> None:
    pair.same(Broker("ba", 10911).register(["T1", "T2"]))
    by_cluster = cmd(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c1"})
    pair.same(cmd(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"enableTopicList=false\n"))
    java, _ = pair.same(by_cluster)
    assert (java.code, java.remark) == (ResponseCode.SYSTEM_ERROR, "disable")
    assert _config(pair.java)["enableTopicList"] == _config(pair.ours)["enableTopicList"] \
        == "false"
    pair.same(cmd(RequestCode.UPDATE_NAMESRV_CONFIG, None,
                  b"enableTopicList=true\nnoSuchKey=1\n"))  # unknown keys are ignored
    assert "noSuchKey" not in _config(pair.java) and "noSuchKey" not in _config(pair.ours)
    pair.same(by_cluster)
    for black in ("kvConfigPath=/tmp/x", "configStorePath=/tmp/x", "rocketmqHome=/tmp",
                  "configBlackList=x"):
        java, _ = pair.same(cmd(RequestCode.UPDATE_NAMESRV_CONFIG, None, black.encode()))
        assert java.code == ResponseCode.NO_PERMISSION
    pair.same(cmd(RequestCode.UPDATE_NAMESRV_CONFIG))  # no body: nothing to do


def test_update_config_values_that_do_not_parse_are_refused_here(pair: Pair) -> None:
    """Java ignores a number that does not parse and reads any boolean but ``true`` as
    false, answering SUCCESS; ours answers SYSTEM_ERROR naming key and value and changes
    nothing (docs/java-parity.md)."""
    assert _update(pair, "scanNotActiveBrokerInterval=abc") == (ResponseCode.SUCCESS,
                                                                ResponseCode.SYSTEM_ERROR)
    assert _config(pair.java)["scanNotActiveBrokerInterval"] == \
        _config(pair.ours)["scanNotActiveBrokerInterval"]
    assert _update(pair, "enableTopicList=maybe") == (ResponseCode.SUCCESS,
                                                      ResponseCode.SYSTEM_ERROR)
    assert (_config(pair.java)["enableTopicList"], _config(pair.ours)["enableTopicList"]) \
        == ("false", "true")
    pair.same(cmd(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"enableTopicList=true"))
    assert _config(pair.java)["enableTopicList"] == "true"
