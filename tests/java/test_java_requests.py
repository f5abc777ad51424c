"""Every request code ``routing serve`` answers, sent to Java's name server and to ours in the
same order; the answers compared field by field (wire_diff.py).

Three request shapes: a JSON header with a 5.x version (standard JSON bodies), a JSON header
with version 0 (fastjson's legacy dialect; a registration body without the filter-server
wrapper), and the ROCKETMQ binary header. The differences that remain are deliberate and each
is pinned here by name (docs/java-parity.md, "On the wire").
"""

from __future__ import annotations

import pytest
from wire import eventually
from wire_diff import Pair, body_doc, dialect, header_forms
from wire_requests import Broker, cmd, register_topic, route

from routing.remoting import (
    CURRENT_VERSION,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    RequestCode,
    ResponseCode,
    SerializeType,
    decode_cluster_info,
    decode_topic_list,
)

FORMS = {f"{kind.name}-v{version}": (kind, version) for kind, version in header_forms()}


def _cluster(pair: Pair, client: str) -> object:
    conn = pair.java if client == "java" else pair.ours
    return body_doc(RequestCode.GET_BROKER_CLUSTER_INFO,
                    conn.call(cmd(RequestCode.GET_BROKER_CLUSTER_INFO)).body)


def _converged(pair: Pair) -> None:
    """Wait until Java's queued unregisters are applied: its cluster view equals ours."""
    ours = _cluster(pair, "ours")
    java = eventually(lambda: _cluster(pair, "java"), lambda got: got == ours)
    assert java == ours


@pytest.mark.parametrize("form", list(FORMS))
def test_every_request_code_answers_the_same(pair: Pair, form: str) -> None:
    kind, version = FORMS[form]
    # Java answers every request in its own header form (JSON): the one difference of the
    # binary form, pinned by test_binary_requests_get_a_json_header_from_java
    same = {"header_form": kind is SerializeType.JSON}

    def req(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> None:
        pair.same(cmd(code, ext, body, version=version, kind=kind), **same)

    a0 = Broker("ba", 10911, 0)
    a1 = Broker("ba", 10921, 1)
    b0 = Broker("bb", 10931, 0, cluster="c2", zone="z1", acting_master=True)
    pair.same(a0.register(["T1", "T2", "%RETRY%g1"], filter_servers=["127.0.0.1:9999"],
                          version=version, kind=kind), **same)
    pair.same(a1.register(["T1", "T2"], version=version, kind=kind), **same)
    pair.same(b0.register(["T1", "T3"], version=version, kind=kind), **same)
    pair.same(a0.register(["T1", "T2", "%RETRY%g1"], bump=False,
                          filter_servers=["127.0.0.1:9999"], version=version, kind=kind),
              **same)
    for topic in ("T1", "T2", "T3", "%RETRY%g1", "nope"):
        pair.same(route(topic, version=version, kind=kind), **same)
    req(RequestCode.GET_BROKER_CLUSTER_INFO)
    req(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    for cluster in ("c1", "c2", "no-such-cluster"):
        req(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
    req(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    req(RequestCode.GET_UNIT_TOPIC_LIST)
    req(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)
    req(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)
    for broker, counter in ((a0, None), (a0, 99), (Broker("ba", 1, 0), None)):
        query = broker.query_version(counter)
        req(query.code, dict(query.ext_fields), query.body)
    req(RequestCode.QUERY_DATA_VERSION, a1.ids)  # no body
    for broker in (a0, b0, Broker("zz", 2, 0)):
        req(RequestCode.BROKER_HEARTBEAT, broker.ids)
        req(RequestCode.GET_BROKER_MEMBER_GROUP,
            {"clusterName": broker.cluster, "brokerName": broker.name})
    req(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "ba"})
    req(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "nobody"})
    pair.same(route("T1", version=version, kind=kind), **same)
    req(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "ba"})
    pair.same(route("T1", version=version, kind=kind), **same)
    topic = register_topic("NT", [("ba", 6), ("bb", 4)])
    req(topic.code, dict(topic.ext_fields), topic.body)
    pair.same(route("NT", version=version, kind=kind), **same)
    req(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T3", "clusterName": "c2"})
    req(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T2"})
    for topic_name in ("T2", "T3", "NT"):
        pair.same(route(topic_name, version=version, kind=kind), **same)
    kv = {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": "T1"}
    req(RequestCode.PUT_KV_CONFIG, {**kv, "value": "ba:4;bb:4"})
    req(RequestCode.GET_KV_CONFIG, kv)
    req(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG})
    pair.same(a0.register(["T1"], version=version, kind=kind), **same)  # answer: the KV
    req(RequestCode.DELETE_KV_CONFIG, kv)
    req(RequestCode.GET_KV_CONFIG, kv)
    req(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG})
    req(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "never-used"})
    req(4321)  # unknown request code
    pair.same(a1.unregister(), **same)
    _converged(pair)
    pair.same(route("T1", version=version, kind=kind), **same)
    pair.same(a0.unregister(), **same)
    pair.same(b0.unregister(), **same)
    _converged(pair)
    req(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert len(pair.log) > 50


def test_route_reads_are_byte_identical_in_both_dialects(pair: Pair) -> None:
    """With one group the order question does not arise: the bytes are the same."""
    pair.same(Broker("ba", 10911).register(["T1", "T9"], filter_servers=["127.0.0.1:9"]))
    for version in (CURRENT_VERSION, 0):
        java, ours = pair.same(route("T1", version=version))
        assert java.body == ours.body
        assert dialect(ours.body) == ("standard" if version else "legacy")
    java, ours = pair.same(route("T1", version=0, acceptStandardJsonOnly="true"))
    assert java.body == ours.body and dialect(ours.body) == "standard"


def test_binary_requests_get_a_json_header_from_java(pair: Pair) -> None:
    """Java answers in its own header form (``rocketmq.serialize.type``, JSON by default)
    whatever the request's; ours answers in the request's form. Clients read each frame's
    form from its header word, so both work; the rest of the answer is the same."""
    pair.same(Broker("ba", 10911).register(["T1", "T9"], kind=SerializeType.ROCKETMQ),
              header_form=False)
    java, ours = pair.same(route("T1", kind=SerializeType.ROCKETMQ), header_form=False)
    assert java.serialize_type is SerializeType.JSON
    assert ours.serialize_type is SerializeType.ROCKETMQ
    assert java.body == ours.body


def test_zone_filtered_routes_keep_the_clients_dialect_here(pair: Pair) -> None:
    """Java's ZoneRouteRPCHook re-encodes a filtered route in fastjson's legacy dialect even
    for a client that reads standard JSON; ours keeps the client's dialect. Same content."""
    pair.same(Broker("ba", 10911, zone="z1").register(["T1", "T9"]))
    pair.same(Broker("bb", 10921, zone="z2").register(["T1", "T9"]))
    zone = {"__ZONE_NAME": "z1", "__ZONE_MODE": "true"}
    java, ours = pair.same(route("T1", **zone), allow=lambda d: d.startswith("JSON dialect"))
    assert (dialect(java.body), dialect(ours.body)) == ("legacy", "standard")
    assert [b["brokerName"] for b in body_doc(105, ours.body)["brokerDatas"]] == ["ba"]
    java, ours = pair.same(route("T1", version=0, **zone))  # a legacy client: the same bytes
    assert java.body == ours.body
    pair.same(route("T1", __ZONE_NAME="z2", __ZONE_MODE="false"))  # mode off: no filter


def test_acting_master_rewrites_the_route_when_the_master_goes(pair: Pair) -> None:
    """supportActingMaster is off in both (Java's default); the slaves' flags and the
    route of a group without a master answer the same."""
    m = Broker("ba", 10911, 0, acting_master=True)
    s = Broker("ba", 10921, 1, acting_master=True)
    pair.same(m.register(["T1", "rmq_sys_SYNC_BROKER_MEMBER_ba"]))
    pair.same(s.register(["T1", "rmq_sys_SYNC_BROKER_MEMBER_ba"]))
    pair.same(m.unregister())
    _converged(pair)
    pair.same(route("T1"))
    pair.same(route("rmq_sys_SYNC_BROKER_MEMBER_ba"))
    pair.same(s.member_group())
    pair.same(s.register(["T1", "T9"], enableActingMaster="false"))
    pair.same(route("T1"))


def test_a_failed_first_single_topic_registration_leaves_no_empty_group_here(
        pair: Pair) -> None:
    """Java's single-topic guard (spec D3, step 7) answers "register broker failed" after
    it created the group: an empty group stays in its cluster view. Ours refuses before any
    write and says why after Java's remark."""
    slave = Broker("bc", 10941, 1)
    java, ours = pair.same(slave.register(["T4"]), remark=False)
    assert java.code == ours.code == ResponseCode.SYSTEM_ERROR
    assert java.remark == "register broker failed"
    assert ours.remark is not None and ours.remark.startswith("register broker failed: ")
    java_view = decode_cluster_info(pair.java.call(cmd(106)).body)
    ours_view = decode_cluster_info(pair.ours.call(cmd(106)).body)
    assert dict(java_view.broker_addr_table["bc"].broker_addrs) == {}
    assert "bc" not in ours_view.broker_addr_table
    systems = [decode_topic_list(c.call(cmd(304)).body).topics for c in (pair.java, pair.ours)]
    assert set(systems[0]) - set(systems[1]) == {"bc", "c1"}  # the group and its cluster
