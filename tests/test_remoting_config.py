"""UPDATE_NAMESRV_CONFIG (318), GET_NAMESRV_CONFIG (319), Java properties, ``--config`` files."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest

import routing as r
from routing.journal import JournalRecorder
from routing.remoting import (
    ConfigError,
    NameServerProcessor,
    NamesrvConfig,
    RequestCode,
    ResponseCode,
    load_properties_file,
    parse_properties,
)
from test_remoting_processor import answer, make, register, route_of

BLACK = "Can not update config in black list."


@pytest.fixture
def clock() -> r.ManualClock:
    return r.ManualClock(start_ms=1_000)


def update(proc: NameServerProcessor, text: str) -> tuple[int, str | None]:
    response = answer(proc, RequestCode.UPDATE_NAMESRV_CONFIG, body=text.encode())
    return response.code, response.remark


def settings(proc: NameServerProcessor) -> dict[str, str]:
    response = answer(proc, RequestCode.GET_NAMESRV_CONFIG)
    assert response.code == ResponseCode.SUCCESS
    lines = response.body.decode().splitlines()
    assert lines == sorted(lines) and all(line.count("=") >= 1 for line in lines)
    return dict(line.split("=", 1) for line in lines)


# --------------------------------------------------------------------------- 319


def test_get_config_reports_every_setting_one_per_line(clock: r.ManualClock) -> None:
    got = settings(make(clock))
    # routing's live keys by their Java names, with Java's defaults
    assert got["scanNotActiveBrokerInterval"] == "5000"
    assert got["supportActingMaster"] == "false"
    assert got["needWaitForService"] == "false" and got["waitSecondsForService"] == "45"
    assert got["enableAllTopicList"] == got["enableTopicList"] == "true"
    assert got["returnOrderTopicConfigToBroker"] == "true"
    assert got["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    # Java keys routing does not use are reported with Java's defaults
    assert got["defaultThreadPoolQueueCapacity"] == "10000"
    assert got["serverChannelMaxIdleTimeSeconds"] == "120"
    assert got["listenPort"] == "9876"
    assert len(got) >= 35


# --------------------------------------------------------------------------- 318


@pytest.mark.parametrize("key", ["configStorePath", "kvConfigPath", "configBlackList",
                                 "rocketmqHome"])
def test_black_listed_key_is_refused_and_changes_nothing(clock: r.ManualClock, key: str) -> None:
    proc = make(clock)
    before = settings(proc)
    assert update(proc, f"enableAllTopicList=false\n{key}=/tmp/x\n") == (
        ResponseCode.NO_PERMISSION, BLACK)
    assert settings(proc) == before


def test_the_black_list_itself_is_configurable(clock: r.ManualClock) -> None:
    base, _ = NamesrvConfig().update([("configBlackList", "supportActingMaster;listenPort")])
    proc = NameServerProcessor(r.RouteInfoManager(clock=clock), settings=base)
    assert update(proc, "supportActingMaster=true") == (ResponseCode.NO_PERMISSION, BLACK)
    assert update(proc, "listenPort=1") == (ResponseCode.NO_PERMISSION, BLACK)
    assert update(proc, "kvConfigPath=x") == (ResponseCode.NO_PERMISSION, BLACK)  # always
    assert update(proc, "orderMessageEnable=true") == (ResponseCode.SUCCESS, None)


@pytest.mark.parametrize(("text", "key", "value"), [
    ("supportActingMaster=true\nscanNotActiveBrokerInterval=soon", "scanNotActiveBrokerInterval",
     "soon"),
    ("enableTopicList=false\nsupportActingMaster=yes", "supportActingMaster", "yes"),
    ("maxQueueNums=70000", "maxQueueNums", "70000"),
    ("defaultHeartbeatTimeoutMillis=0", "defaultHeartbeatTimeoutMillis", "0"),
    ("waitSecondsForService=-1", "waitSecondsForService", "-1"),
    ("serverWorkerThreads=many", "serverWorkerThreads", "many"),
    ("listenPort=99999999999", "listenPort", "99999999999"),
])
def test_a_value_that_does_not_parse_changes_nothing(clock: r.ManualClock, text: str, key: str,
                                                     value: str) -> None:
    proc = make(clock)
    before, config = settings(proc), proc.manager.config
    code, remark = update(proc, text)
    assert code == ResponseCode.SYSTEM_ERROR
    assert remark is not None and key in remark and value in remark
    assert settings(proc) == before and proc.manager.config is config


def test_live_keys_take_effect_at_once(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    proc.kv.put("ORDER_TOPIC_CONFIG", "T1", "broker-a:4")
    assert route_of(proc, "T1").order_topic_conf is None
    text = ("orderMessageEnable = true\n# a comment\nenableAllTopicList: false\n"
            "notifyMinBrokerIdChanged true\nscanNotActiveBrokerInterval=1000\n"
            "defaultHeartbeatTimeoutMillis=30000\nreturnOrderTopicConfigToBroker=FALSE\n")
    assert update(proc, text) == (ResponseCode.SUCCESS, None)
    assert route_of(proc, "T1").order_topic_conf == "broker-a:4"
    response = answer(proc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "disable")
    cfg = proc.manager.config
    assert cfg.notify_min_broker_id_changed and cfg.scan_interval_ms == 1000
    assert cfg.default_heartbeat_timeout_ms == 30_000
    out = register(proc)
    assert out.response is not None and out.response.body == b""
    got = settings(proc)
    assert got["orderMessageEnable"] == "true" and got["enableAllTopicList"] == "false"
    assert got["returnOrderTopicConfigToBroker"] == "false"


def test_readiness_gate_follows_need_wait_for_service(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    clock.advance(5_000)
    assert update(proc, "needWaitForService=true\nwaitSecondsForService=10") == (
        ResponseCode.SUCCESS, None)
    response = answer(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1")
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR,
                                                 "name server not ready")
    clock.advance(5_000)  # 10 s after start: open (Java counts from start-up)
    assert route_of(proc, "T1").queue_datas
    assert update(proc, "waitSecondsForService=60") == (ResponseCode.SUCCESS, None)
    assert answer(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1").code == \
        ResponseCode.SYSTEM_ERROR
    assert update(proc, "needWaitForService=false") == (ResponseCode.SUCCESS, None)
    assert route_of(proc, "T1").queue_datas
    assert settings(proc)["waitSecondsForService"] == "60"


def test_support_acting_master_rebuilds_routes(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc, broker_id=0, enableActingMaster="true")
    register(proc, broker_id=1, addr="10.0.0.2:10911", enableActingMaster="true")
    answer(proc, RequestCode.UNREGISTER_BROKER, brokerName="broker-a", brokerAddr="10.0.0.1:10911",
           clusterName="c1", brokerId="0")
    assert dict(route_of(proc, "T1").broker_datas[0].broker_addrs) == {1: "10.0.0.2:10911"}
    assert update(proc, "supportActingMaster=true") == (ResponseCode.SUCCESS, None)
    assert dict(route_of(proc, "T1").broker_datas[0].broker_addrs) == {0: "10.0.0.2:10911"}
    proc.manager.check_invariants()  # type: ignore[attr-defined]


def test_java_only_keys_are_kept_and_unknown_keys_ignored(clock: r.ManualClock) -> None:
    proc = make(clock)
    assert update(proc, "serverWorkerThreads=32\nnoSuchKey=1\nclusterTest=TRUE") == (
        ResponseCode.SUCCESS, None)
    got = settings(proc)
    assert got["serverWorkerThreads"] == "32" and got["clusterTest"] == "true"
    assert "noSuchKey" not in got
    assert proc.update_config([("noSuchKey", "1"), ("enableTopicList", "false")]) == (
        "noSuchKey",)


def test_empty_body_and_malformed_properties(clock: r.ManualClock) -> None:
    proc = make(clock)
    assert update(proc, "") == (ResponseCode.SUCCESS, None)
    assert update(proc, "key=\\u12") == (ResponseCode.SYSTEM_ERROR, "string2Properties error")


def test_routing_keys_are_refused_while_journaling(clock: r.ManualClock) -> None:
    recorder = JournalRecorder(r.RouteInfoManager(clock=clock), io.StringIO(),
                               nameserver_id="ns")
    proc = NameServerProcessor(recorder)
    code, remark = update(proc, "supportActingMaster=true")
    assert code == ResponseCode.SYSTEM_ERROR and remark is not None and "journal" in remark
    assert update(proc, "enableTopicList=false") == (ResponseCode.SUCCESS, None)
    assert proc.enable_topic_list is False


# --------------------------------------------------------------------------- properties


def test_parse_properties_follows_java() -> None:
    text = ("# comment\n! also a comment\n\n  spaced = value with spaces  \n"
            "colon:1\nblank\nmulti = one \\\n    two\nesc=a\\tb\\u0041\\\\\n"
            "key\\=with\\:seps=v\nspaced=again\n")
    assert parse_properties(text) == [
        (4, "spaced", "value with spaces  "), (5, "colon", "1"), (6, "blank", ""),
        (7, "multi", "one two"), (9, "esc", "a\tbA\\"), (10, "key=with:seps", "v"),
        (11, "spaced", "again")]
    with pytest.raises(ConfigError, match=r"f\.properties:2: malformed \\uxxxx"):
        parse_properties("ok=1\nbad=\\uZZZZ\n", source="f.properties")


def test_config_file_bad_value_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text("# namesrv\nsupportActingMaster=true\n\nscanNotActiveBrokerInterval=fast\n")
    with pytest.raises(ConfigError) as err:
        load_properties_file(path)
    message = str(err.value)
    assert f"{path}:4:" in message and "scanNotActiveBrokerInterval" in message
    assert "fast" in message
    assert (err.value.key, err.value.value, err.value.line) == (
        "scanNotActiveBrokerInterval", "fast", 4)


def test_config_file_sets_keys_keeps_unknown_ones_and_records_its_path(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text("supportActingMaster=true\nneedWaitForService=true\n"
                    "waitSecondsForService=3\nmyOwnKey=x\nkvConfigPath=/data/kv.json\n")
    loaded, unknown = load_properties_file(path)
    assert unknown == ("myOwnKey",)
    assert loaded.routing.support_acting_master
    assert loaded.routing.wait_for_service_ms == 3_000
    props = loaded.as_properties()
    assert props["myOwnKey"] == "x" and props["configStorePath"] == str(path)
    assert props["kvConfigPath"] == "/data/kv.json"
    # a key the file brought in can then be updated by 318 (Java registers the file)
    updated, ignored = loaded.update([("myOwnKey", "y")])
    assert ignored == () and updated.get("myOwnKey") == "y"


def test_config_file_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_properties_file(tmp_path / "missing.properties")


# --------------------------------------------------------------------------- routing serve


def invoke_cli(args: list[str]) -> Any:
    """Run the command in this process, restoring the ``routing`` logger it configures."""
    from click.testing import CliRunner

    from routing.cli import main
    logger = logging.getLogger("routing")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        return CliRunner().invoke(main, args)
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def test_serve_help_lists_the_keys() -> None:
    out = invoke_cli(["serve", "--help"]).output
    for key in ("--config", "--kv-config", "scanNotActiveBrokerInterval", "supportActingMaster",
                "waitSecondsForService", "configBlackList", "serverWorkerThreads"):
        assert key in out


def test_serve_with_a_bad_config_file_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text("orderMessageEnable=true\nnotifyMinBrokerIdChanged=maybe\n")
    result = invoke_cli(["serve", "--listen", "127.0.0.1:0", "--config", str(path)])
    assert result.exit_code == 1
    assert f"{path}:2:" in result.output and "notifyMinBrokerIdChanged" in result.output
    assert "maybe" in result.output
