"""Values: validation (D7), Java equality/ordering, JSON in RocketMQ field names."""

from __future__ import annotations

import contextlib
import json
import random

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import routing as r
from routing.testing import strategies as rs

# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("build", "field", "value"),
    [
        (lambda: r.TopicConfig(topic_name="has space"), "TopicConfig.topic_name", "has space"),
        (lambda: r.TopicConfig(topic_name="x" * 128), "TopicConfig.topic_name", "x" * 128),
        (lambda: r.TopicConfig(topic_name="T", read_queue_nums=-1),
         "TopicConfig.read_queue_nums", -1),
        (lambda: r.TopicConfig(topic_name="T", write_queue_nums=65_536),
         "TopicConfig.write_queue_nums", 65_536),
        (lambda: r.QueueData(broker_name="", read_queue_nums=1), "QueueData.broker_name", ""),
        (lambda: r.BrokerAddr(cluster="c", addr="nohost"), "BrokerAddr.addr", "nohost"),
        (lambda: r.BrokerAddr(cluster="c", addr="h:0"), "BrokerAddr.addr", "h:0"),
        (lambda: r.BrokerAddr(cluster="c", addr="h:65536"), "BrokerAddr.addr", "h:65536"),
        (lambda: r.Registration(cluster="c", broker_name="b", broker_id=-1,
                                broker_addr="h:1"), "Registration.broker_id", -1),
        (lambda: r.Registration(cluster="c", broker_name="b", broker_id=0, broker_addr="h:1",
                                heartbeat_timeout_ms=0),
         "Registration.heartbeat_timeout_ms", 0),
        (lambda: r.RoutingConfig(default_heartbeat_timeout_ms=0),
         "RoutingConfig.default_heartbeat_timeout_ms", 0),
    ],
)
def test_invalid_values_name_field_and_value(build, field, value):
    with pytest.raises(r.InvalidRequest) as info:
        build()
    assert info.value.field == field
    assert info.value.value == value
    assert field in str(info.value)
    assert repr(value)[:20] in str(info.value)


def test_invalid_request_is_a_value_error_and_routing_error():
    assert issubclass(r.InvalidRequest, ValueError)
    assert issubclass(r.InvalidRequest, r.RoutingError)
    assert issubclass(r.NotReady, r.RoutingError)
    assert issubclass(r.InvariantViolation, r.RoutingError)


def test_perm_range_and_bool_rejected():
    with pytest.raises(r.InvalidRequest, match="perm"):
        r.TopicConfig(topic_name="T", perm=16)
    with pytest.raises(r.InvalidRequest, match="read_queue_nums"):
        r.TopicConfig(topic_name="T", read_queue_nums=True)


def test_registration_topic_key_must_match_topic_name():
    with pytest.raises(r.InvalidRequest, match="differs from its topic_name"):
        r.Registration(cluster="c", broker_name="b", broker_id=0, broker_addr="h:1",
                       topics={"A": r.TopicConfig(topic_name="B")})


def test_ipv6_address_accepted():
    assert r.BrokerAddr(cluster="c", addr="[::1]:9876").addr == "[::1]:9876"


def test_values_are_frozen_slotted_and_keyword_only():
    config = r.TopicConfig(topic_name="T")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.perm = r.Perm.READ  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.TopicConfig("T")  # type: ignore[misc]
    assert not hasattr(config, "__dict__")


def test_java_defaults():
    config = r.TopicConfig(topic_name="T")
    assert (config.read_queue_nums, config.write_queue_nums) == (16, 16)
    assert config.perm == r.Perm.READ | r.Perm.WRITE == 6
    assert r.RoutingConfig().default_heartbeat_timeout_ms == 120_000


def test_frozen_map_is_immutable_and_hashable():
    m = r.FrozenMap({1: "a"})
    with pytest.raises(AttributeError):
        m._data = {}  # type: ignore[misc]
    assert hash(m) == hash(r.FrozenMap({1: "a"}))
    assert m == {1: "a"}
    assert m != r.FrozenMap({1: "b"})


def test_caller_dict_is_copied():
    addrs = {0: "h:1"}
    data = r.BrokerData(cluster="c", broker_name="b", broker_addrs=addrs)
    addrs[1] = "h:2"
    assert dict(data.broker_addrs) == {0: "h:1"}


# ----------------------------------------------------------------------------- DataVersion


def test_data_version_equality_uses_all_three_fields():
    base = r.DataVersion(state_version=1, timestamp=10, counter=2)
    assert base == r.DataVersion(state_version=1, timestamp=10, counter=2)
    assert base != r.DataVersion(state_version=0, timestamp=10, counter=2)
    assert base != r.DataVersion(state_version=1, timestamp=11, counter=2)
    assert base != r.DataVersion(state_version=1, timestamp=10, counter=3)


def test_data_version_ordering_is_state_version_then_counter_then_timestamp():
    a = r.DataVersion(state_version=0, timestamp=999, counter=9)
    b = r.DataVersion(state_version=1, timestamp=0, counter=0)
    c = r.DataVersion(state_version=1, timestamp=0, counter=1)
    d = r.DataVersion(state_version=1, timestamp=5, counter=1)
    assert a < b < c < d
    assert sorted([d, c, b, a]) == [a, b, c, d]
    assert (a.compare(b), b.compare(a), c.compare(c)) == (-1, 1, 0)


def test_data_version_next_resets_state_version_like_java():
    v = r.DataVersion(state_version=3, timestamp=1, counter=4)
    assert v.next(50) == r.DataVersion(state_version=0, timestamp=50, counter=5)
    assert v.next(60, state_version=7) == r.DataVersion(state_version=7, timestamp=60, counter=5)


@given(st.integers(-2**40, 2**40), st.integers(0, 2**45), st.integers(0, 2**40))
def test_data_version_json_round_trip(sv, ts, counter):
    v = r.DataVersion(state_version=sv, timestamp=ts, counter=counter)
    assert r.DataVersion.from_json(json.dumps(v.to_json())) == v


def test_data_version_reads_4x_misspelling():
    v = r.DataVersion.from_json('{"timestatmp": 1700000000000, "counter": 3}')
    assert v == r.DataVersion(state_version=0, timestamp=1_700_000_000_000, counter=3)


# ----------------------------------------------------------------------------- routes


def test_select_broker_addr_prefers_master_then_random_member():
    master = r.BrokerData(cluster="c", broker_name="b", broker_addrs={0: "h:1", 1: "h:2"})
    assert master.select_broker_addr() == "h:1"
    slaves = r.BrokerData(cluster="c", broker_name="b", broker_addrs={1: "h:2", 2: "h:3"})
    picks = {slaves.select_broker_addr(random.Random(seed)) for seed in range(20)}
    assert picks == {"h:2", "h:3"}


def test_select_broker_addr_on_empty_group_is_a_clear_error():
    empty = r.BrokerData(cluster="c", broker_name="b")
    with pytest.raises(r.InvalidRequest, match="'b' has no broker address"):
        empty.select_broker_addr()


def _route(*groups: tuple[str, dict[int, str]], zone: str | None = None) -> r.TopicRouteData:
    return r.TopicRouteData(
        queue_datas=[r.QueueData(broker_name=n) for n, _ in groups],
        broker_datas=[r.BrokerData(cluster="c", broker_name=n, broker_addrs=a, zone_name=zone)
                      for n, a in groups])


def test_changed_from_matches_java_topic_route_data_changed():
    a = _route(("a", {0: "h:1"}), ("b", {0: "h:2"}))
    assert a.changed_from(None)
    # order does not matter: Java sorts copies before comparing
    assert not _route(("b", {0: "h:2"}), ("a", {0: "h:1"})).changed_from(a)
    # Java's BrokerData.equals ignores the zone
    assert not _route(("a", {0: "h:1"}), ("b", {0: "h:2"}), zone="z").changed_from(a)
    assert _route(("a", {0: "h:1"}), ("b", {0: "h:3"})).changed_from(a)
    assert _route(("a", {0: "h:1"})).changed_from(a)


def test_perm_to_string():
    assert r.Perm.to_string(6) == "RW-"
    assert r.Perm.to_string(r.Perm.READ | r.Perm.INHERIT) == "R-X"


# ----------------------------------------------------------------------------- JSON


def _samples() -> list[object]:
    dv = r.DataVersion(state_version=1, timestamp=2, counter=3)
    qd = r.QueueData(broker_name="b", read_queue_nums=2, write_queue_nums=3, perm=4,
                     topic_sys_flag=1)
    bd = r.BrokerData(cluster="c", broker_name="b", broker_addrs={0: "h:1", 2: "h:3"},
                      zone_name="z", enable_acting_master=True)
    info = r.TopicQueueMappingInfo(topic="T", bname="b", total_queues=2, epoch=5,
                                   curr_id_map={0: 1})
    return [
        dv, qd, bd, info,
        r.TopicConfig(topic_name="T", perm=2, attributes={"+k": "v"}, order=True),
        r.BrokerAddr(cluster="c", addr="h:1"),
        r.BrokerLiveInfo(last_update_timestamp=5, heartbeat_timeout_ms=10, data_version=dv,
                         ha_server_addr="h:9", generation=3),
        r.TopicRouteData(queue_datas=[qd], broker_datas=[bd], filter_server_table={"h:1": ["f:1"]},
                         topic_queue_mapping_by_broker={"b": info}, order_topic_conf="b:4"),
        r.ClusterInfo(broker_addr_table={"b": bd}, cluster_addr_table={"c": frozenset({"b"})}),
        r.BrokerMemberGroup(cluster="c", broker_name="b", broker_addrs={1: "h:2"}),
        r.TopicList(topics=("A", "B"), broker_addr="h:1"),
        r.Registration(cluster="c", broker_name="b", broker_id=1, broker_addr="h:1",
                       ha_server_addr="h:2", zone_name="z", heartbeat_timeout_ms=10_000,
                       enable_acting_master=False, data_version=dv,
                       topics={"T": r.TopicConfig(topic_name="T")},
                       topic_queue_mappings={"T": info}, filter_servers=["f:1"], partial=True),
    ]


@pytest.mark.parametrize("value", _samples(), ids=lambda v: type(v).__name__)
def test_json_round_trip_through_text(value):
    text = json.dumps(value.to_json())  # type: ignore[attr-defined]
    assert type(value).from_json(text) == value  # type: ignore[attr-defined]
    assert type(value).from_json(text.encode()) == value  # type: ignore[attr-defined]


def test_route_json_uses_rocketmq_field_names():
    doc = _samples()[7].to_json()  # type: ignore[attr-defined]
    assert set(doc) == {"orderTopicConf", "queueDatas", "brokerDatas", "filterServerTable",
                        "topicQueueMappingByBroker"}
    assert doc["brokerDatas"][0]["brokerAddrs"] == {"0": "h:1", "2": "h:3"}
    assert doc["queueDatas"][0] == {"brokerName": "b", "readQueueNums": 2, "writeQueueNums": 3,
                                    "perm": 4, "topicSysFlag": 1}


def test_loads_a_dump_from_a_real_name_server():
    # Shape of a GET_ROUTEINFO_BY_TOPIC body from RocketMQ 5.x (standard JSON dialect).
    dump = """{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.7:10911"},"brokerName":"broker-a",
      "cluster":"DefaultCluster","enableActingMaster":false,"zoneName":null}],
      "filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,
      "readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"""
    route = r.TopicRouteData.from_json(dump)
    assert route.broker_datas[0].select_broker_addr() == "192.168.0.7:10911"
    assert route.writable_queue_count == 4
    assert route.producer_writable_queue_count == 4


def test_a_producer_writes_only_to_writable_rows_of_groups_with_a_master():
    route = r.TopicRouteData(
        queue_datas=[r.QueueData(broker_name="a", write_queue_nums=4),  # master: counts
                     r.QueueData(broker_name="b", write_queue_nums=8),  # only a slave left
                     r.QueueData(broker_name="c", write_queue_nums=2, perm=r.Perm.READ),
                     r.QueueData(broker_name="d", write_queue_nums=1)],  # no group at all
        broker_datas=[r.BrokerData(cluster="c1", broker_name="a",
                                   broker_addrs={0: "h:1", 1: "h:2"}),
                      r.BrokerData(cluster="c1", broker_name="b", broker_addrs={1: "h:3"}),
                      r.BrokerData(cluster="c1", broker_name="c", broker_addrs={0: "h:4"})])
    assert (route.writable_queue_count, route.producer_writable_queue_count) == (13, 4)


def _java_publish_queues(route: r.TopicRouteData) -> list[tuple[str, int]]:
    """The message queues Java's ``topicRouteData2TopicPublishInfo`` lists for a route
    without an order-topic conf or a static mapping, built as it builds them: rows in
    broker-name order, each with the write bit whose group (the first of that name) has
    an id-0 address adds one queue per write queue."""
    queues = []
    for row in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not row.perm & r.Perm.WRITE:
            continue
        group = next((b for b in route.broker_datas if b.broker_name == row.broker_name), None)
        if group is None or 0 not in group.broker_addrs:
            continue
        queues.extend((row.broker_name, i) for i in range(row.write_queue_nums))
    return queues


@given(rs.topic_route_datas(max_groups=5))
def test_producer_writable_queues_are_the_java_producers_queue_list(route):
    assert route.producer_writable_queue_count == len(_java_publish_queues(route))
    assert route.producer_writable_queue_count <= route.writable_queue_count
    if all(0 in b.broker_addrs for b in route.broker_datas):
        assert route.producer_writable_queue_count == route.writable_queue_count


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=5),
    max_leaves=20)
KEYS = st.sampled_from(["topicName", "brokerName", "cluster", "brokerAddrs", "perm",
                        "readQueueNums", "queueDatas", "brokerDatas", "dataVersion",
                        "counter", "timestamp", "clusterName", "brokerAddr", "brokerId",
                        "topicConfigSerializeWrapper", "topicConfigTable", "topicList",
                        "brokerAddrTable", "clusterAddrTable", "lastUpdateTimestamp"])
DOCS = st.dictionaries(KEYS, JSON, max_size=6) | JSON


@pytest.mark.parametrize("kind", [type(v) for v in _samples()], ids=lambda k: k.__name__)
@given(data=DOCS | st.binary(max_size=30) | st.text(max_size=30))
def test_from_json_raises_only_invalid_request(kind, data):
    with contextlib.suppress(r.InvalidRequest):
        kind.from_json(data)
