"""`NameServerProcessor`: every request code, Java's response codes and remarks, bad
headers and bodies, oneway requests, effects (closes, notifications)."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    V3_0_11,
    V4_9_4,
    ZONE_MODE,
    ZONE_NAME,
    FrameDecoder,
    NameServerProcessor,
    Outcome,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    body_crc32,
    decode_broker_member_group,
    decode_cluster_info,
    decode_data_version,
    decode_kv_table,
    decode_route,
    decode_topic_list,
    encode,
    encode_data_version,
    encode_route,
    loads,
)

A0, A1, B0 = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


@pytest.fixture
def clock() -> r.ManualClock:
    return r.ManualClock(start_ms=1_000)


def make(clock: r.ManualClock, **config: object) -> NameServerProcessor:
    return NameServerProcessor(r.RouteInfoManager(clock=clock, config=r.RoutingConfig(**config)))


def send(proc: NameServerProcessor, code: int, *, body: bytes = b"", channel: object = "ch",
         version: int = CURRENT_VERSION, flag: int = 0, kind: SerializeType = SerializeType.JSON,
         **ext: str) -> Outcome:
    """Send a request through the wire codec, as a host would."""
    request = RemotingCommand(code=code, version=version, opaque=77, flag=flag, ext_fields=ext,
                              body=body, serialize_type=kind)
    [decoded] = FrameDecoder().feed(encode(request))
    return proc.process(decoded, channel)


def answer(proc: NameServerProcessor, code: int, **kwargs: object) -> RemotingCommand:
    out = send(proc, code, **kwargs)  # type: ignore[arg-type]
    assert out.response is not None
    assert out.response.opaque == 77 and out.response.flag == FLAG_RESPONSE
    return out.response


def topics(*names: str, **kwargs: object) -> dict[str, r.TopicConfig]:
    return {n: r.TopicConfig(topic_name=n, read_queue_nums=4, write_queue_nums=4, **kwargs)
            for n in names}


def register(proc: NameServerProcessor, *, name: str = "broker-a", broker_id: int = 0,
             addr: str = A0, cluster: str = "c1", table: dict[str, r.TopicConfig] | None = None,
             version: r.DataVersion | None = None, channel: object = "ch",
             compressed: bool = False, **ext: str) -> Outcome:
    data = RegisterBrokerBody(data_version=version or r.DataVersion(timestamp=5, counter=1),
                              topics=table if table is not None else topics("T1", "T2")
                              ).encode(compressed=compressed)
    fields = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
              "haServerAddr": addr.replace("10911", "10912"), "brokerId": str(broker_id),
              "bodyCrc32": str(body_crc32(data)), "compressed": str(compressed).lower(), **ext}
    return send(proc, RequestCode.REGISTER_BROKER, body=data, channel=channel, **fields)


def route_of(proc: NameServerProcessor, topic: str, **kwargs: object) -> r.TopicRouteData:
    response = answer(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic, **kwargs)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return decode_route(response.body)


# --------------------------------------------------------------------------- REGISTER_BROKER


def test_register_then_route(clock: r.ManualClock) -> None:
    proc = make(clock)
    out = register(proc)
    assert out.response is not None and out.response.code == ResponseCode.SUCCESS
    assert out.response.remark is None and out.response.body == b""
    rt = route_of(proc, "T1")
    assert [b.broker_addrs[0] for b in rt.broker_datas] == [A0]
    assert [(q.broker_name, q.write_queue_nums) for q in rt.queue_datas] == [("broker-a", 4)]


@pytest.mark.parametrize("kind", list(SerializeType))
def test_register_in_both_header_forms_and_compressed(clock: r.ManualClock,
                                                     kind: SerializeType) -> None:
    proc = make(clock)
    data = RegisterBrokerBody(topics=topics("T1", "T2")).encode(compressed=True)
    out = send(proc, RequestCode.REGISTER_BROKER, body=data, kind=kind, brokerName="broker-a",
               brokerAddr=A0, clusterName="c1", haServerAddr="10.0.0.1:10912", brokerId="0",
               compressed="true", enableActingMaster="false")
    assert out.response is not None and out.response.code == ResponseCode.SUCCESS
    assert out.response.serialize_type is kind
    assert route_of(proc, "T1").queue_datas[0].write_queue_nums == 4


def test_slave_gets_master_addresses_and_zone_is_read(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc, **{ZONE_NAME: "zone-1"})
    out = register(proc, broker_id=1, addr=A1, **{ZONE_NAME: "zone-1"})
    assert out.response is not None
    assert dict(out.response.ext_fields) == {"masterAddr": A0,
                                             "haServerAddr": "10.0.0.1:10912"}
    assert route_of(proc, "T1").broker_datas[0].zone_name == "zone-1"


def test_register_crc_mismatch(clock: r.ManualClock) -> None:
    proc = make(clock)
    out = register(proc, bodyCrc32="12345")
    assert out.response is not None
    assert (out.response.code, out.response.remark) == (ResponseCode.SYSTEM_ERROR,
                                                        "crc32 not match")
    assert proc.manager.all_topics() == ()


def test_register_without_body_and_old_version(clock: r.ManualClock) -> None:
    proc = make(clock)
    response = answer(proc, RequestCode.REGISTER_BROKER, brokerName="broker-a", brokerAddr=A0,
                      clusterName="c1", haServerAddr="", brokerId="0")
    assert response.code == ResponseCode.SUCCESS
    live = proc.manager.live_brokers()
    assert [v.data_version for v in live.values()] == [r.DataVersion()]
    old = RegisterBrokerBody(topics=topics("OLD", "OLD2")).encode(version=V3_0_11 - 1)
    response = answer(proc, RequestCode.REGISTER_BROKER, body=old, version=V3_0_11 - 1,
                      brokerName="broker-b", brokerAddr=B0, clusterName="c1",
                      haServerAddr=B0, brokerId="0")
    assert response.code == ResponseCode.SUCCESS
    assert route_of(proc, "OLD").broker_datas[0].broker_name == "broker-b"


def test_single_topic_first_registration_is_refused(clock: r.ManualClock) -> None:
    proc = make(clock)
    out = register(proc, table=topics("ONLY"))
    assert out.response is not None and out.response.code == ResponseCode.SYSTEM_ERROR
    assert out.response.remark is not None
    assert out.response.remark.startswith("register broker failed")
    assert proc.manager.live_brokers() == {}


def test_stale_epoch_gets_an_empty_success_and_changes_nothing(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc, version=r.DataVersion(state_version=5, counter=1))
    before = proc.manager.cluster_info()
    out = register(proc, addr=A1, version=r.DataVersion(state_version=3, counter=9))
    assert out.response is not None and out.response.code == ResponseCode.SUCCESS
    assert dict(out.response.ext_fields) == {}
    assert proc.manager.cluster_info() == before


def test_register_answers_the_order_topic_kv_list(clock: r.ManualClock) -> None:
    proc = make(clock)
    proc.kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "T1", "broker-a:4")
    out = register(proc)
    assert out.response is not None
    assert decode_kv_table(out.response.body) == {"T1": "broker-a:4"}
    proc.return_order_topic_config_to_broker = False
    out = register(proc)
    assert out.response is not None and out.response.body == b""


def test_min_broker_id_change_becomes_notifications(clock: r.ManualClock) -> None:
    proc = make(clock, notify_min_broker_id_changed=True)
    register(proc, broker_id=1, addr=A1, enableActingMaster="true")
    out = register(proc, broker_id=0, addr=A0, enableActingMaster="true")
    assert [n.addr for n in out.notifications] == [A1]
    note = out.notifications[0].command
    assert note.code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE and note.flag == FLAG_ONEWAY
    assert note.ext_fields["minBrokerId"] == "0" and note.ext_fields["minBrokerAddr"] == A0


@pytest.mark.parametrize(("ext", "field"), [
    ({"brokerName": "b", "brokerAddr": A0, "clusterName": "c", "haServerAddr": A0}, "brokerId"),
    ({"brokerAddr": A0, "clusterName": "c", "haServerAddr": A0, "brokerId": "0"}, "brokerName"),
    ({"brokerName": "b", "brokerAddr": A0, "clusterName": "c", "haServerAddr": A0,
      "brokerId": "zero"}, "brokerId"),
    ({"brokerName": "b", "brokerAddr": A0, "clusterName": "c", "haServerAddr": A0,
      "brokerId": "99999999999999999999"}, "brokerId"),
    ({"brokerName": "b", "brokerAddr": "nowhere", "clusterName": "c", "haServerAddr": A0,
      "brokerId": "0"}, "broker_addr"),
    ({"brokerName": "b", "brokerAddr": A0, "clusterName": "c", "haServerAddr": A0,
      "brokerId": "-1"}, "broker_id"),
])
def test_register_bad_headers_answer_system_error(clock: r.ManualClock, ext: dict[str, str],
                                                  field: str) -> None:
    response = answer(make(clock), RequestCode.REGISTER_BROKER, **ext)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and field in response.remark


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"topicConfigSerializeWrapper":5}'])
def test_register_bad_body_answers_system_error(clock: r.ManualClock, body: bytes) -> None:
    response = answer(make(clock), RequestCode.REGISTER_BROKER, body=body, brokerName="b",
                      brokerAddr=A0, clusterName="c", haServerAddr=A0, brokerId="0")
    assert response.code == ResponseCode.SYSTEM_ERROR and response.remark


# --------------------------------------------------------------------------- liveness


def test_unregister_removes_routes(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    ids = {"brokerName": "broker-a", "brokerAddr": A0, "clusterName": "c1"}
    for bad in ({}, {"brokerId": "x"}):  # Java answers SUCCESS and its worker drops it
        ignored = answer(proc, RequestCode.UNREGISTER_BROKER, **ids, **bad)
        assert ignored.code == ResponseCode.SUCCESS
        assert ignored.remark is not None and ignored.remark.startswith("nothing done")
        assert "brokerId" in ignored.remark
        assert route_of(proc, "T1").broker_datas[0].broker_name == "broker-a"
    response = answer(proc, RequestCode.UNREGISTER_BROKER, **ids, brokerId="0")
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    assert answer(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                  topic="T1").code == ResponseCode.TOPIC_NOT_EXIST


def test_query_data_version(clock: r.ManualClock) -> None:
    proc = make(clock)
    stored = r.DataVersion(timestamp=5, counter=1)
    register(proc, version=stored)
    ext = {"brokerName": "broker-a", "brokerAddr": A0, "clusterName": "c1", "brokerId": "0"}
    clock.advance(60_000)
    same = answer(proc, RequestCode.QUERY_DATA_VERSION, body=encode_data_version(stored), **ext)
    assert same.ext_fields["changed"] == "false"
    assert decode_data_version(same.body) == stored
    [live] = proc.manager.live_brokers().values()
    assert live.last_update_timestamp == 61_000  # liveness refreshed (5.x)
    other = answer(proc, RequestCode.QUERY_DATA_VERSION,
                   body=encode_data_version(stored.next(9)), **ext)
    assert other.ext_fields["changed"] == "true"
    empty = answer(proc, RequestCode.QUERY_DATA_VERSION, **ext)
    assert empty.ext_fields["changed"] == "true"
    unknown = answer(proc, RequestCode.QUERY_DATA_VERSION, body=encode_data_version(stored),
                     **{**ext, "brokerAddr": B0})
    assert (unknown.code, unknown.ext_fields["changed"], unknown.body) == (0, "true", b"")
    bad = answer(proc, RequestCode.QUERY_DATA_VERSION, body=b"{oops", **ext)
    assert bad.code == ResponseCode.SYSTEM_ERROR
    clock.advance(1_000)
    for scalar in (b"5", b'"s"'):  # Java's fastjson: "syntax error, expect {"
        assert answer(proc, RequestCode.QUERY_DATA_VERSION, body=scalar,
                      **ext).code == ResponseCode.SYSTEM_ERROR
    for not_an_object in (b"[]", b"null"):  # Java's fastjson: no version
        read_as_none = answer(proc, RequestCode.QUERY_DATA_VERSION, body=not_an_object, **ext)
        assert (read_as_none.code, read_as_none.ext_fields["changed"]) == (0, "true")
        assert decode_data_version(read_as_none.body) == stored
    [live] = proc.manager.live_brokers().values()
    assert live.last_update_timestamp == 62_000  # refreshed, as a heartbeat would


def test_heartbeat_refreshes_and_always_succeeds(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    clock.advance(100_000)
    ext = {"brokerName": "broker-a", "brokerAddr": A0, "clusterName": "c1"}
    assert answer(proc, RequestCode.BROKER_HEARTBEAT, **ext).code == ResponseCode.SUCCESS
    clock.advance(100_000)
    assert proc.scan().removed == ()
    assert answer(proc, RequestCode.BROKER_HEARTBEAT,
                  **{**ext, "brokerAddr": B0}).code == ResponseCode.SUCCESS
    assert answer(proc, RequestCode.BROKER_HEARTBEAT,
                  brokerAddr=A0).code == ResponseCode.SYSTEM_ERROR


def test_oneway_requests_apply_without_a_response(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    clock.advance(100_000)
    out = send(proc, RequestCode.BROKER_HEARTBEAT, flag=FLAG_ONEWAY, brokerName="broker-a",
               brokerAddr=A0, clusterName="c1")
    assert out.response is None
    [live] = proc.manager.live_brokers().values()
    assert live.last_update_timestamp == 101_000


def test_incoming_responses_are_ignored(clock: r.ManualClock) -> None:
    assert send(make(clock), RequestCode.BROKER_HEARTBEAT, flag=FLAG_RESPONSE) == Outcome()


def test_scan_closes_expired_channels_and_channel_close_removes(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc, channel="chan-a")
    register(proc, name="broker-b", addr=B0, channel="chan-b")
    clock.advance(120_001)
    send(proc, RequestCode.BROKER_HEARTBEAT, brokerName="broker-b", brokerAddr=B0,
         clusterName="c1")
    out = proc.scan()
    assert out.close == ("chan-a",)
    assert [e.broker_addr for e in out.removed] == [A0]
    gone = proc.channel_closed("chan-b")
    assert [e.broker_addr for e in gone.removed] == [B0]
    assert proc.manager.all_topics() == ()


# --------------------------------------------------------------------------- routes


def test_route_not_found_remark(clock: r.ManualClock) -> None:
    response = answer(make(clock), RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="Nope")
    assert response.code == ResponseCode.TOPIC_NOT_EXIST == 17
    assert response.remark is not None
    assert response.remark.startswith("No topic route info in name server for the topic: Nope")


@pytest.mark.parametrize(("version", "ext", "standard"), [
    (V4_9_4 - 1, {}, False), (V4_9_4, {}, True), (0, {"acceptStandardJsonOnly": "true"}, True),
    (0, {"acceptStandardJsonOnly": "false"}, False),
])
def test_route_dialect_follows_client(clock: r.ManualClock, version: int, ext: dict[str, str],
                                      standard: bool) -> None:
    proc = make(clock)
    register(proc)
    for _ in range(2):  # the second answer comes from the cache
        body = answer(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1", version=version,
                      **ext).body
        assert (b'{"0":' in body) is standard and (b"{0:" in body) is (not standard)
        if standard:
            json.loads(body)


def test_route_cache_follows_route_changes(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    assert len(route_of(proc, "T1").broker_datas) == 1
    register(proc, name="broker-b", addr=B0)
    assert [b.broker_name for b in route_of(proc, "T1").broker_datas] == ["broker-a", "broker-b"]


def test_route_not_ready(clock: r.ManualClock) -> None:
    proc = make(clock, wait_for_service_ms=45_000)
    register(proc)
    response = answer(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1")
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR,
                                                "name server not ready")
    clock.advance(45_000)
    assert route_of(proc, "T1").queue_datas


def test_route_order_topic_conf(clock: r.ManualClock) -> None:
    proc = make(clock, order_message_enable=True)
    register(proc)
    proc.kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "T1", "broker-a:4")
    assert route_of(proc, "T1").order_topic_conf == "broker-a:4"
    assert route_of(proc, "T2").order_topic_conf is None


def test_route_zone_filter(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc, **{ZONE_NAME: "z1"})
    register(proc, name="broker-b", addr=B0, **{ZONE_NAME: "z2"})
    register(proc, name="broker-c", broker_id=1, addr="10.0.0.9:10911", enableActingMaster="false",
             **{ZONE_NAME: "z2"})  # a prime slave: writes rows, has no master
    zone = {ZONE_MODE: "true", ZONE_NAME: "Z1"}
    rt = route_of(proc, "T1", **zone)
    # z1's group stays, z2's master-led group goes, a master-less group stays
    assert [b.broker_name for b in rt.broker_datas] == ["broker-a", "broker-c"]
    assert [q.broker_name for q in rt.queue_datas] == ["broker-a", "broker-c"]
    assert len(route_of(proc, "T1", **{ZONE_MODE: "false", ZONE_NAME: "z1"}).broker_datas) == 3


def test_cluster_info_and_member_group(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    register(proc, broker_id=1, addr=A1)
    response = answer(proc, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in response.body
    assert decode_cluster_info(response.body).cluster_addr_table == {"c1": {"broker-a"}}
    group = decode_broker_member_group(answer(proc, RequestCode.GET_BROKER_MEMBER_GROUP,
                                              clusterName="c1", brokerName="broker-a").body)
    assert group.broker_addrs == {0: A0, 1: A1}
    unknown = decode_broker_member_group(answer(proc, RequestCode.GET_BROKER_MEMBER_GROUP,
                                                clusterName="c1", brokerName="zz").body)
    assert unknown.broker_addrs == {}
    for names, missing in (({"brokerName": "broker-a"}, "clusterName"),
                           ({"clusterName": "c1"}, "brokerName")):
        # Java: the empty group of the names given; here the missing one is named too
        nameless = answer(proc, RequestCode.GET_BROKER_MEMBER_GROUP, **names)
        assert (nameless.code, nameless.remark) == (ResponseCode.SUCCESS,
                                                    f"the custom field <{missing}> is null")
        assert loads(nameless.body) == {"brokerMemberGroup": {
            "brokerAddrs": {}, **{("cluster" if k == "clusterName" else k): v
                                  for k, v in names.items()}}}


def test_write_perm_wipe_and_add(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    wiped = answer(proc, RequestCode.WIPE_WRITE_PERM_OF_BROKER, brokerName="broker-a")
    assert wiped.ext_fields["wipeTopicCount"] == "2"
    assert route_of(proc, "T1").queue_datas[0].perm == r.Perm.READ
    added = answer(proc, RequestCode.ADD_WRITE_PERM_OF_BROKER, brokerName="broker-a")
    assert added.ext_fields["addTopicCount"] == "2"
    assert route_of(proc, "T1").queue_datas[0].perm == r.Perm.READ | r.Perm.WRITE
    assert answer(proc, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                  brokerName="nobody").ext_fields["wipeTopicCount"] == "0"
    wiped_nothing = answer(proc, RequestCode.WIPE_WRITE_PERM_OF_BROKER)  # Java: SUCCESS, 0
    assert (wiped_nothing.code, dict(wiped_nothing.ext_fields)) == (ResponseCode.SUCCESS,
                                                                    {"wipeTopicCount": "0"})
    assert wiped_nothing.remark == "nothing done: the custom field <brokerName> is null"
    added_nothing = answer(proc, RequestCode.ADD_WRITE_PERM_OF_BROKER)
    assert dict(added_nothing.ext_fields) == {"addTopicCount": "0"}
    assert route_of(proc, "T1").queue_datas[0].perm == r.Perm.READ | r.Perm.WRITE


def test_topic_listings(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc, table={**topics("T1"), **topics("U1", topic_sys_flag=1),
                          **topics("S1", topic_sys_flag=2), **topics("US", topic_sys_flag=3)})
    register(proc, name="broker-b", addr=B0, cluster="c2", table=topics("T9", "T8"))

    def listing(code: int, **ext: str) -> tuple[str, ...]:
        return decode_topic_list(answer(proc, code, **ext).body).topics

    assert listing(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == (
        "S1", "T1", "T8", "T9", "U1", "US")
    assert listing(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="c2") == ("T8", "T9")
    assert listing(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="none") == ()
    assert listing(RequestCode.GET_UNIT_TOPIC_LIST) == ("U1", "US")
    assert listing(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST) == ("S1", "US")
    assert listing(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST) == ("S1",)
    system = decode_topic_list(answer(proc, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS).body)
    assert system.topics == ("broker-a", "broker-b", "c1", "c2") and system.broker_addr == A0
    no_cluster = answer(proc, RequestCode.GET_TOPICS_BY_CLUSTER)  # Java: an empty list
    assert (no_cluster.code, no_cluster.remark) == (ResponseCode.SUCCESS,
                                                    "the custom field <cluster> is null")
    assert decode_topic_list(no_cluster.body).topics == ()


def test_listing_switches(clock: r.ManualClock) -> None:
    proc = make(clock)
    proc.enable_all_topic_list = proc.enable_topic_list = False
    for code in (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.GET_UNIT_TOPIC_LIST,
                 RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
                 RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST):
        response = answer(proc, code)
        assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "disable")
    assert answer(proc, RequestCode.GET_TOPICS_BY_CLUSTER, cluster="c").remark == "disable"
    assert answer(proc, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS).code == ResponseCode.SUCCESS


def test_delete_and_register_topic(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    register(proc, name="broker-b", addr=B0, cluster="c2")
    assert answer(proc, RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="T1",
                  clusterName="c2").code == ResponseCode.SUCCESS
    assert [b.broker_name for b in route_of(proc, "T1").broker_datas] == ["broker-a"]
    assert answer(proc, RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="T2",
                  clusterName="").code == ResponseCode.SUCCESS
    assert answer(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                  topic="T2").code == ResponseCode.TOPIC_NOT_EXIST
    rows = r.TopicRouteData(queue_datas=[r.QueueData(broker_name="broker-b", read_queue_nums=2,
                                                     write_queue_nums=2)])
    for standard in (False, True):
        assert answer(proc, RequestCode.REGISTER_TOPIC_IN_NAMESRV, topic="NEW",
                      body=encode_route(rows, standard=standard)).code == ResponseCode.SUCCESS
    assert route_of(proc, "NEW").queue_datas[0].write_queue_nums == 2
    ghost = r.TopicRouteData(queue_datas=[r.QueueData(broker_name="ghost")])
    refused = answer(proc, RequestCode.REGISTER_TOPIC_IN_NAMESRV, topic="G",
                     body=encode_route(ghost, standard=True))
    assert refused.code == ResponseCode.SYSTEM_ERROR and "ghost" in (refused.remark or "")
    assert answer(proc, RequestCode.REGISTER_TOPIC_IN_NAMESRV,
                  topic="E").code == ResponseCode.SUCCESS
    before = proc.manager.all_topics()
    no_topic = answer(proc, RequestCode.DELETE_TOPIC_IN_NAMESRV, clusterName="c1")
    assert (no_topic.code, no_topic.remark) == (ResponseCode.SUCCESS,
                                                "nothing done: the custom field <topic> is null")
    assert proc.manager.all_topics() == before


def test_kv_codes(clock: r.ManualClock) -> None:
    proc = make(clock)
    ns = {"namespace": "ns"}
    missing = answer(proc, RequestCode.GET_KV_CONFIG, key="k", **ns)
    assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                              "No config item, Namespace: ns Key: k")
    listed = answer(proc, RequestCode.GET_KVLIST_BY_NAMESPACE, **ns)
    assert (listed.code, listed.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                            "No config item, Namespace: ns")
    assert answer(proc, RequestCode.PUT_KV_CONFIG, key="k", value="v",
                  **ns).code == ResponseCode.SUCCESS
    assert answer(proc, RequestCode.GET_KV_CONFIG, key="k", **ns).ext_fields["value"] == "v"
    assert decode_kv_table(answer(proc, RequestCode.GET_KVLIST_BY_NAMESPACE,
                                  **ns).body) == {"k": "v"}
    assert answer(proc, RequestCode.DELETE_KV_CONFIG, key="k", **ns).code == ResponseCode.SUCCESS
    assert answer(proc, RequestCode.GET_KV_CONFIG, key="k", **ns).code == 22
    assert loads(answer(proc, RequestCode.GET_KVLIST_BY_NAMESPACE, **ns).body) == {"table": {}}
    assert answer(proc, RequestCode.PUT_KV_CONFIG, key="k",
                  **ns).remark == "the custom field <value> is null"
    # a missing name finds nothing and deletes nothing, as in Java; the field is named
    assert answer(proc, RequestCode.PUT_KV_CONFIG, key="k", value="v",
                  **ns).code == ResponseCode.SUCCESS
    no_key = answer(proc, RequestCode.GET_KV_CONFIG, **ns)
    assert (no_key.code, no_key.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "No config item, Namespace: ns Key: null (the custom field <key> is null)")
    no_ns = answer(proc, RequestCode.GET_KVLIST_BY_NAMESPACE)
    assert (no_ns.code, no_ns.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "No config item, Namespace: null (the custom field <namespace> is null)")
    for missing in ({"key": "k"}, ns):
        kept = answer(proc, RequestCode.DELETE_KV_CONFIG, **missing)
        assert kept.code == ResponseCode.SUCCESS
        assert kept.remark is not None and kept.remark.startswith("nothing done")
    assert proc.kv.get("ns", "k") == "v"


# --------------------------------------------------------------------------- robustness


def test_unsupported_code(clock: r.ManualClock) -> None:
    response = answer(make(clock), 12345)
    assert (response.code, response.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                " request type 12345 not supported")


def test_unexpected_exceptions_become_system_error(clock: r.ManualClock) -> None:
    proc = make(clock)

    def boom() -> None:
        raise RuntimeError("disk on fire")

    proc.manager.cluster_info = boom  # type: ignore[method-assign]
    out = send(proc, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert out.response is not None and out.response.code == ResponseCode.SYSTEM_ERROR
    assert out.response.remark == "RuntimeError: disk on fire"
    assert isinstance(out.error, RuntimeError)


_CODES = [int(c) for c in RequestCode if c != RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE]
_FIELDS = ["topic", "brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId",
           "cluster", "namespace", "key", "value", "compressed", "bodyCrc32",
           "heartbeatTimeoutMillis", "enableActingMaster", "acceptStandardJsonOnly", ZONE_NAME,
           ZONE_MODE]
_values = st.sampled_from(["", "0", "-1", "1", "true", "x y", A0, "T1", "broker-a", "c1",
                           "99999999999999999999"]) | st.text(max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_CODES), st.dictionaries(st.sampled_from(_FIELDS), _values),
       st.binary(max_size=40) | st.sampled_from([b"{}", b"[]", b'{"topicList":[]}']),
       st.integers(0, 500))
def test_any_header_and_body_gets_an_answer(code: int, ext: dict[str, str], body: bytes,
                                            version: int) -> None:
    proc = make(r.ManualClock(start_ms=0))
    register(proc)
    out = send(proc, code, body=body, version=version, **ext)
    assert out.error is None, out.error
    assert out.response is not None
    assert out.response.code in {c.value for c in ResponseCode}
    if out.response.code == ResponseCode.SYSTEM_ERROR:
        assert out.response.remark


def test_processor_keeps_state_consistent_under_random_requests(clock: r.ManualClock) -> None:
    proc = make(clock)
    register(proc)
    register(proc, broker_id=1, addr=A1)
    for code in _CODES:
        send(proc, code, topic="T1", brokerName="broker-a", brokerAddr=A1, clusterName="c1",
             brokerId="1", namespace="n", key="k", value="v", cluster="c1")
    proc.manager.check_invariants()
    assert attrs.asdict(proc.scan())["close"] == ()


class ManagerSpy:
    """A manager wrapper recording each ``register``/``renew`` it is handed: ``seen`` the
    registrations, ``calls`` which answered (``"renew-miss"``: a ``renew`` that returned
    None, the caller then registers)."""

    def __init__(self, manager: r.RouteInfoManager) -> None:
        self.manager = manager
        self.seen: list[r.Registration] = []
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.manager, name)

    def register(self, registration: r.Registration) -> r.RegisterResult:
        self.seen.append(registration)
        self.calls.append("register")
        return self.manager.register(registration)

    def renew(self, registration: r.Registration) -> int | None:
        generation = self.manager.renew(registration)
        self.seen.append(registration)
        self.calls.append("renew" if generation is not None else "renew-miss")
        return generation


@pytest.fixture
def spied(clock: r.ManualClock, monkeypatch: pytest.MonkeyPatch
          ) -> tuple[NameServerProcessor, ManagerSpy, list[int]]:
    """A processor over a spy, and the list of body sizes whose CRC it computed."""
    from routing.remoting.processor import _register_broker

    crcs: list[int] = []

    def counting_crc(data: bytes) -> int:
        crcs.append(len(data))
        return body_crc32(data)

    monkeypatch.setattr(_register_broker, "body_crc32", counting_crc)
    spy = ManagerSpy(r.RouteInfoManager(clock=clock))
    return NameServerProcessor(spy), spy, crcs  # type: ignore[arg-type]


def test_an_identical_re_registration_reuses_the_registration_without_a_second_crc(spied):
    proc, spy, crcs = spied
    for _ in range(3):  # each send decodes a fresh frame: new bytes objects every time
        assert register(proc).response.code == ResponseCode.SUCCESS
    first, second, third = spy.seen
    assert second is first and third is first
    assert len(crcs) == 1  # equal bytes were checked once
    assert proc.manager.pickup_route("T1") is not None


def test_the_same_body_under_a_changed_header_is_not_decoded_again(spied):
    proc, spy, crcs = spied
    register(proc)
    register(proc, heartbeatTimeoutMillis="5000")
    first, second = spy.seen
    assert second is not first and second.heartbeat_timeout_ms == 5000
    assert second.topics is first.topics  # the body was not decoded again
    assert len(crcs) == 1
    register(proc, channel="another")  # a reconnect: the channel is part of the registration
    assert spy.seen[-1].channel == "another" and spy.seen[-1].topics is first.topics


def test_a_changed_body_is_decoded_and_its_crc_checked(spied):
    proc, spy, crcs = spied
    register(proc)
    register(proc, table=topics("T1", "T3"))
    assert set(spy.seen[-1].topics) == {"T1", "T3"}
    assert spy.seen[-1].topics is not spy.seen[0].topics
    assert len(crcs) == 2
    assert proc.manager.pickup_route("T3") is not None


def test_a_changed_body_claiming_the_previous_crc_is_refused(spied):
    proc, spy, _ = spied
    register(proc)
    good = RegisterBrokerBody(data_version=r.DataVersion(timestamp=5, counter=1),
                              topics=topics("T1", "T2")).encode()
    bad = good.replace(b'"T2"', b'"T9"')
    assert bad != good and len(bad) == len(good)
    out = send(proc, RequestCode.REGISTER_BROKER, body=bad, brokerName="broker-a",
               brokerAddr=A0, clusterName="c1", haServerAddr=A0.replace("10911", "10912"),
               brokerId="0", bodyCrc32=str(body_crc32(good)), compressed="false")
    assert out.response.code == ResponseCode.SYSTEM_ERROR
    assert out.response.remark == "crc32 not match"
    assert len(spy.seen) == 1 and proc.manager.pickup_route("T9") is None


def test_another_dialect_of_the_same_bytes_is_decoded_again(spied):
    proc, spy, _ = spied
    data = RegisterBrokerBody(topics=topics("T1", "T2")).encode(version=V3_0_11 - 1)
    fields = {"brokerName": "broker-a", "brokerAddr": A0, "clusterName": "c1",
              "haServerAddr": A0, "brokerId": "0"}
    send(proc, RequestCode.REGISTER_BROKER, body=data, version=V3_0_11 - 1, **fields)
    send(proc, RequestCode.REGISTER_BROKER, body=data, version=CURRENT_VERSION, **fields)
    old, new = spy.seen
    assert set(old.topics) == {"T1", "T2"} and new is not old
    assert old.filter_servers is None


def test_registration_memos_are_bounded_and_can_be_turned_off(clock: r.ManualClock) -> None:
    spy = ManagerSpy(r.RouteInfoManager(clock=clock))
    off = NameServerProcessor(spy, body_cache_entries=0)  # type: ignore[arg-type]
    register(off)
    register(off)
    assert spy.seen[0] is not spy.seen[1] and spy.seen[0] == spy.seen[1]
    small = NameServerProcessor(r.RouteInfoManager(clock=clock), body_cache_entries=2)
    for i in range(5):
        register(small, name=f"b{i}", addr=f"10.0.1.{i}:10911")
    assert len(small._registrations) == 2
    assert small._registrations.bytes == sum(
        m.size for m in small._registrations._memos.values())


def test_topic_configs_are_memoised_per_processor_not_per_process(
        clock: r.ManualClock) -> None:
    import routing.remoting.wire._bodies as bodies

    one, two = make(clock), make(clock)
    register(one)
    assert len(one._registrations.topic_configs) == 2  # T1, T2
    assert len(two._registrations.topic_configs) == 0  # nothing leaks between processors
    register(two)
    first, second = (p.manager.pickup_route("T1") for p in (one, two))
    assert first is not None and second is not None
    assert not any(isinstance(v, dict) and k.isupper() for k, v in vars(bodies).items())


def test_outcome_says_what_a_registration_was_until_the_broker_is_removed(
        clock: r.ManualClock) -> None:
    proc = make(clock)
    assert register(proc).registered == "first"
    assert register(proc).registered == "unchanged"
    assert register(proc, table=topics("T1", "T3")).registered == "changed"
    assert register(proc, name="broker-b", addr=B0).registered == "first"
    unregister = send(proc, RequestCode.UNREGISTER_BROKER, brokerName="broker-a",
                      brokerAddr=A0, clusterName="c1", brokerId="0")
    assert unregister.response is not None and unregister.registered is None
    assert register(proc, table=topics("T1", "T3")).registered == "first"
    proc.channel_closed("ch")  # both brokers were on it
    assert register(proc, name="broker-b", addr=B0).registered == "first"
    clock.advance(200_000)
    assert [e.broker_addr for e in proc.scan().removed] == [B0]
    assert register(proc, name="broker-b", addr=B0).registered == "first"
    crc_failure = register(proc, bodyCrc32="1")
    assert crc_failure.response is not None and crc_failure.registered is None
    assert crc_failure.response.code == ResponseCode.SYSTEM_ERROR
