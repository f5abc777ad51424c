"""Body codecs: both JSON dialects (golden strings), the registration body in JSON and in
the 4.x deflate form (golden parts built by hand), CRC32, and malformed input."""

from __future__ import annotations

import contextlib
import json
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.remoting import (
    V3_0_11,
    V5_0_0,
    RegisterBrokerBody,
    body_crc32,
    decode_broker_member_group,
    decode_cluster_info,
    decode_data_version,
    decode_kv_table,
    decode_route,
    decode_topic_list,
    dumps_legacy,
    dumps_standard,
    encode_broker_member_group,
    encode_cluster_info,
    encode_data_version,
    encode_kv_table,
    encode_route,
    encode_topic_list,
    loads,
)


def route() -> r.TopicRouteData:
    return r.TopicRouteData(
        queue_datas=[r.QueueData(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4)],
        broker_datas=[r.BrokerData(cluster="c1", broker_name="broker-a", broker_addrs={
            0: "1.2.3.4:10911", 10: "1.2.3.6:10911", 2: "1.2.3.5:10911"}, zone_name="zé")])


LEGACY = ('{"brokerDatas":[{"brokerAddrs":{0:"1.2.3.4:10911",2:"1.2.3.5:10911",'
          '10:"1.2.3.6:10911"},"brokerName":"broker-a","cluster":"c1","enableActingMaster":false,'
          '"zoneName":"zé"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
          '"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
STANDARD = ('{"brokerDatas":[{"brokerAddrs":{"0":"1.2.3.4:10911","2":"1.2.3.5:10911",'
            '"10":"1.2.3.6:10911"},"brokerName":"broker-a","cluster":"c1",'
            '"enableActingMaster":false,"zoneName":"z\\u00e9"}],"filterServerTable":{},'
            '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
            '"topicSysFlag":0,"writeQueueNums":4}]}')


def test_route_legacy_dialect_golden() -> None:
    assert encode_route(route(), standard=False).decode("utf-8") == LEGACY


def test_route_standard_dialect_golden() -> None:
    body = encode_route(route(), standard=True)
    assert body.decode("ascii") == STANDARD
    json.loads(body)  # standard JSON indeed


def test_legacy_is_not_json_but_loads_reads_both() -> None:
    with pytest.raises(json.JSONDecodeError, match="property name enclosed in double quotes"):
        json.loads(LEGACY)
    assert loads(LEGACY) == loads(STANDARD)
    assert decode_route(LEGACY.encode()) == route() == decode_route(STANDARD.encode())


def test_loads_leaves_strings_alone() -> None:
    assert loads('{"a":"{0:\\"x\\", 1:2}", 5 : {-1:[{7:"}"}]}}') == {
        "a": '{0:"x", 1:2}', "5": {"-1": [{"7": "}"}]}}


@pytest.mark.parametrize("bad", [b"\xff", b"{", b"[1,", b"{0:}", b"nope"])
def test_loads_rejects_garbage_with_invalid_request(bad: bytes) -> None:
    with pytest.raises(r.InvalidRequest):
        loads(bad)


def test_null_fields_are_left_out_and_order_conf_written_when_set() -> None:
    doc = json.loads(encode_route(route(), standard=True))
    assert "orderTopicConf" not in doc and "topicQueueMappingByBroker" not in doc
    import attrs
    with_conf = attrs.evolve(route(), order_topic_conf="broker-a:4")
    assert json.loads(encode_route(with_conf, standard=True))["orderTopicConf"] == "broker-a:4"


def test_static_topic_mapping_ids_are_integer_keys() -> None:
    info = r.TopicQueueMappingInfo(topic="T", bname="broker-a", total_queues=2,
                                   curr_id_map={0: 0, 1: 1})
    import attrs
    rt = attrs.evolve(route(), topic_queue_mapping_by_broker={"broker-a": info})
    assert b'"currIdMap":{0:0,1:1}' in encode_route(rt, standard=False)
    assert decode_route(encode_route(rt, standard=False)) == rt
    assert decode_route(encode_route(rt, standard=True)) == rt


def test_cluster_info_is_legacy_like_java() -> None:
    info = r.ClusterInfo(broker_addr_table={"broker-a": route().broker_datas[0]},
                         cluster_addr_table={"c1": frozenset({"broker-a"})})
    body = encode_cluster_info(info)
    assert body.startswith(b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"1.2.3.4:10911"')
    assert body.endswith(b'"clusterAddrTable":{"c1":["broker-a"]}}')
    assert decode_cluster_info(body) == info
    assert decode_cluster_info(encode_cluster_info(info, standard=True)) == info


def test_small_bodies_golden() -> None:
    version = r.DataVersion(state_version=2, timestamp=1700, counter=9)
    assert encode_data_version(version) == b'{"counter":9,"stateVersion":2,"timestamp":1700}'
    assert decode_data_version(b'{"counter":9,"stateVersion":2,"timestamp":1700}') == version
    assert decode_data_version(b'{"counter":9,"timestatmp":1700}') == r.DataVersion(
        timestamp=1700, counter=9)  # 4.x spelling
    assert encode_topic_list(("a", "b")) == b'{"topicList":["a","b"]}'
    listing = r.TopicList(topics=("c1",), broker_addr="1.2.3.4:10911")
    assert encode_topic_list(listing) == b'{"brokerAddr":"1.2.3.4:10911","topicList":["c1"]}'
    assert decode_topic_list(encode_topic_list(listing)) == listing
    assert encode_kv_table({"b": "2", "a": "1"}) == b'{"table":{"a":"1","b":"2"}}'
    assert decode_kv_table(b'{"table":{"a":"1"}}') == {"a": "1"}
    group = r.BrokerMemberGroup(cluster="c1", broker_name="b", broker_addrs={1: "1.1.1.1:1"})
    assert encode_broker_member_group(group) == (
        b'{"brokerMemberGroup":{"brokerAddrs":{1:"1.1.1.1:1"},"brokerName":"b","cluster":"c1"}}')
    assert decode_broker_member_group(encode_broker_member_group(group)) == group


def test_kv_table_rejects_non_strings() -> None:
    with pytest.raises(r.InvalidRequest, match="must be a string"):
        decode_kv_table(b'{"table":{"a":1}}')


# --------------------------------------------------------------------------- registration


def body() -> RegisterBrokerBody:
    return RegisterBrokerBody(
        data_version=r.DataVersion(timestamp=1700, counter=3),
        topics={"TopicTest": r.TopicConfig(topic_name="TopicTest", read_queue_nums=4,
                                           write_queue_nums=4, attributes={"+k": "v"})},
        filter_servers=("9.9.9.9:1",))


def test_register_body_json_golden() -> None:
    expected = ('{"filterServerList":["9.9.9.9:1"],"topicConfigSerializeWrapper":{'
                '"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700},'
                '"topicConfigTable":{"TopicTest":{"attributes":{"+k":"v"},"order":false,'
                '"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
                '"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}},'
                '"topicQueueMappingInfoMap":{}}}')
    assert body().encode().decode() == expected
    assert RegisterBrokerBody.decode(expected.encode()) == body()


def test_register_body_before_v3_0_11_is_the_bare_wrapper() -> None:
    data = body().encode(version=V3_0_11 - 1)
    assert json.loads(data).keys() == {"dataVersion", "topicConfigTable",
                                       "topicQueueMappingInfoMap"}
    decoded = RegisterBrokerBody.decode(data, version=V3_0_11 - 1)
    assert decoded.topics == body().topics and decoded.filter_servers == ()


def test_register_body_upserts_by_topic_name_not_key() -> None:
    doc = json.loads(body().encode())
    table = doc["topicConfigSerializeWrapper"]["topicConfigTable"]
    table["other-key"] = table.pop("TopicTest")
    assert set(RegisterBrokerBody.decode(json.dumps(doc).encode()).topics) == {"TopicTest"}


def _parts(*chunks: bytes) -> bytes:
    return b"".join(chunks)


def _sized(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_compressed_register_body_golden_parts() -> None:
    raw = _parts(
        _sized(b'{"counter":3,"stateVersion":0,"timestamp":1700}'),
        struct.pack(">i", 1), _sized(b'TopicTest 4 4 6 SINGLE_TAG {"+k":"v"}'),
        _sized(b'["9.9.9.9:1"]'),
        struct.pack(">i", 0))
    assert zlib.decompress(body().encode(compressed=True)) == raw
    assert RegisterBrokerBody.decode(zlib.compress(raw), compressed=True) == body()
    # 4.x brokers (before 5.0.0) write no mapping part
    old = raw[:-4]
    assert zlib.decompress(body().encode(compressed=True, version=V5_0_0 - 1)) == old
    assert RegisterBrokerBody.decode(zlib.compress(old), compressed=True,
                                     version=V5_0_0 - 1) == body()


def test_compressed_form_loses_sys_flag_like_java() -> None:
    unit = RegisterBrokerBody(topics={"U": r.TopicConfig(topic_name="U", topic_sys_flag=1,
                                                         order=True)})
    back = RegisterBrokerBody.decode(unit.encode(compressed=True), compressed=True)
    assert back.topics["U"].topic_sys_flag == 0 and back.topics["U"].order is False


def test_compressed_form_carries_mappings_from_5_0() -> None:
    info = r.TopicQueueMappingInfo(topic="T", bname="b", curr_id_map={0: 3})
    with_map = RegisterBrokerBody(topic_queue_mappings={"T": info})
    assert RegisterBrokerBody.decode(with_map.encode(compressed=True),
                                     compressed=True) == with_map


@pytest.mark.parametrize(("data", "message"), [
    (b"not deflate", "compressed RegisterBrokerBody"),
    (zlib.compress(b"\x00\x00"), "truncated at dataVersion"),
    (zlib.compress(_sized(b"{}") + struct.pack(">i", -1)), "negative topic count"),
    (zlib.compress(_sized(b"{}") + struct.pack(">i", 1) + struct.pack(">i", 99)),
     "truncated"),
    (zlib.compress(_sized(b"{}") + struct.pack(">i", 1) + _sized(b"T 1 2")),
     "fewer than 5 fields"),
    (zlib.compress(_sized(b"{}") + struct.pack(">i", 1) + _sized(b"T x 1 6 SINGLE_TAG")),
     "readQueueNums"),
])
def test_malformed_compressed_bodies(data: bytes, message: str) -> None:
    with pytest.raises(r.InvalidRequest, match=message):
        RegisterBrokerBody.decode(data, compressed=True)


def test_inflation_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    import routing.remoting.wire._bodies as bodies
    monkeypatch.setattr(bodies, "MAX_INFLATED_BYTES", 1000)
    with pytest.raises(r.InvalidRequest, match="inflates past 1000"):
        RegisterBrokerBody.decode(zlib.compress(b"\x00" * 5000), compressed=True)


@pytest.mark.parametrize("data", [
    b"[]", b'{"topicConfigSerializeWrapper":[]}', b'{"filterServerList":[1]}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":{"topicName":"bad name"}}}}',
    b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":"x"}}}',
])
def test_malformed_json_bodies(data: bytes) -> None:
    with pytest.raises(r.InvalidRequest):
        RegisterBrokerBody.decode(data)


def test_crc32_is_javas_masked_value() -> None:
    assert zlib.crc32(b"a") == 0xE8B7BE43
    assert body_crc32(b"a") == 0x68B7BE43  # UtilAll.crc32 masks with 0x7FFFFFFF
    assert body_crc32(b"") == 0


# --------------------------------------------------------------------------- properties

_names = st.from_regex(r"[a-zA-Z0-9_-]{1,12}", fullmatch=True)
_addrs = st.builds(lambda h, p: f"10.0.0.{h}:{p}", st.integers(0, 255), st.integers(1, 65535))


@st.composite
def routes(draw: st.DrawFn) -> r.TopicRouteData:
    names = draw(st.lists(_names, unique=True, max_size=4))
    return r.TopicRouteData(
        queue_datas=[r.QueueData(broker_name=n, read_queue_nums=draw(st.integers(0, 64)),
                                 write_queue_nums=draw(st.integers(0, 64)),
                                 perm=draw(st.integers(0, 15)),
                                 topic_sys_flag=draw(st.integers(0, 3))) for n in names],
        broker_datas=[r.BrokerData(cluster=draw(_names), broker_name=n,
                                   broker_addrs=draw(st.dictionaries(st.integers(0, 20), _addrs,
                                                                     max_size=3)),
                                   zone_name=draw(st.none() | st.text(min_size=1, max_size=5)),
                                   enable_acting_master=draw(st.booleans())) for n in names],
        filter_server_table=draw(st.dictionaries(_addrs, st.lists(_addrs, max_size=2).map(tuple),
                                                 max_size=2)),
        order_topic_conf=draw(st.none() | st.text(max_size=10)))


@settings(deadline=None)
@given(routes(), st.booleans())
def test_routes_round_trip_in_both_dialects(rt: r.TopicRouteData, standard: bool) -> None:
    data = encode_route(rt, standard=standard)
    assert decode_route(data) == rt
    assert loads(data) == json.loads(dumps_standard(loads(data)))


@settings(deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.integers() | st.text(max_size=5), inner, max_size=3),
                    max_leaves=8))
def test_legacy_and_standard_dumps_load_to_the_same_document(doc: object) -> None:
    assert loads(dumps_legacy(doc)) == loads(dumps_standard(doc))


@settings(deadline=None)
@given(st.binary(max_size=80), st.booleans())
def test_random_register_bodies_raise_only_invalid_request(data: bytes, compressed: bool) -> None:
    with contextlib.suppress(r.InvalidRequest):
        RegisterBrokerBody.decode(data, compressed=compressed)


def test_topic_memo_keeps_types_apart() -> None:
    from routing.remoting.processor._register_broker import TopicConfigMemo

    _topic_config = TopicConfigMemo()
    doc = {"topicName": "Memo", "order": True, "perm": 6}
    assert _topic_config(dict(doc)) is _topic_config(dict(doc))
    with pytest.raises(r.InvalidRequest, match="order"):
        _topic_config({**doc, "order": 1})  # 1 == True, but it is not a bool
    with pytest.raises(r.InvalidRequest):
        _topic_config({**doc, "attributes": {"k": ["unhashable"]}})
    assert _topic_config({**doc, "perm": 4}).perm == r.Perm.READ
