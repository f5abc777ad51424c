"""Bad requests to both servers: unknown codes, missing, null or mistyped header fields,
malformed or oversized bodies and frames. Neither server crashes (the same connection, or a
new one after a frame error, still answers), broken frames close the connection in both, and
each answer is pinned: where Java's differs, the table says how (docs/java-parity.md, "Bad
requests").

Java decodes a request header leniently (``decodeCommandCustomHeader``: a missing or
unparsable field becomes null, and whatever follows decides: SUCCESS, a "not found" code, or
SYSTEM_ERROR from a NullPointerException). Ours answers the same class where Java's null
finds nothing or changes nothing (the field named in the remark), and refuses a write with a
missing, mistyped or out-of-range value with SYSTEM_ERROR naming the field, before any write
(spec D7). Ours writes nothing for any case.
"""

from __future__ import annotations

import struct

import pytest
from wire import WireClient
from wire_diff import Pair, differences
from wire_requests import Broker, cmd, register_topic, route

from routing.remoting import RemotingCommand, RequestCode, ResponseCode

SUCCESS, SYSTEM_ERROR = ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR
NOT_SUPPORTED, QUERY_NOT_FOUND = ResponseCode.REQUEST_CODE_NOT_SUPPORTED, 22
TOPIC_NOT_EXIST = ResponseCode.TOPIC_NOT_EXIST

A = Broker("ba", 10911)


def _register(**fields: str | None) -> RemotingCommand:
    """A's registration with header fields replaced (None: removed); body checksum off."""
    base = A.register(["T1", "T2"], crc=False)
    ext = {**base.ext_fields, **{k: v for k, v in fields.items() if v is not None}}
    for key in (k for k, v in fields.items() if v is None):
        ext.pop(key, None)
    return cmd(RequestCode.REGISTER_BROKER, ext, base.body)


def _register_body(body: bytes) -> RemotingCommand:
    return cmd(RequestCode.REGISTER_BROKER, {**A.ids, "haServerAddr": A.ha}, body)


_NEGATIVE_QUEUES = (b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
                    b'"topicConfigTable":{"T1":{"topicName":"T1","readQueueNums":-1,'
                    b'"writeQueueNums":-1,"perm":6}}},"filterServerList":[]}')

#: (case, request, Java's code, our code, the field our remark names or None)
CASES: list[tuple[str, RemotingCommand, int, int, str | None]] = [
    # the same class of answer
    ("unknown request code", cmd(4321), NOT_SUPPORTED, NOT_SUPPORTED, None),
    ("register: body checksum wrong", _register(bodyCrc32="5"), SYSTEM_ERROR, SYSTEM_ERROR,
     None),
    ("register: brokerId not a number", _register(brokerId="x"), SYSTEM_ERROR, SYSTEM_ERROR,
     "brokerId"),
    ("register: body not JSON", _register_body(b"{oops"), SYSTEM_ERROR, SYSTEM_ERROR,
     "RegisterBrokerBody"),
    ("register: body a JSON array", _register_body(b"[]"), SYSTEM_ERROR, SYSTEM_ERROR,
     "RegisterBrokerBody"),
    ("register: body not UTF-8", _register_body(b"\xff\xfe\x00"), SYSTEM_ERROR,
     SYSTEM_ERROR, "RegisterBrokerBody"),
    ("heartbeat: no fields", cmd(RequestCode.BROKER_HEARTBEAT, {"x": "y"}), SYSTEM_ERROR,
     SYSTEM_ERROR, "brokerName"),
    ("heartbeat: no clusterName", cmd(RequestCode.BROKER_HEARTBEAT, {"brokerName": "ba",
                                                                     "brokerAddr": A.addr}),
     SYSTEM_ERROR, SYSTEM_ERROR, "clusterName"),
    ("query data version: body not JSON", cmd(RequestCode.QUERY_DATA_VERSION, A.ids, b"{oo"),
     SYSTEM_ERROR, SYSTEM_ERROR, "DataVersion"),
    ("register topic: body not JSON", cmd(RequestCode.REGISTER_TOPIC_IN_NAMESRV,
                                          {"topic": "X"}, b"{oops"),
     SYSTEM_ERROR, SYSTEM_ERROR, "TopicRouteData"),
    ("update config: bad \\u escape", cmd(RequestCode.UPDATE_NAMESRV_CONFIG, None,
                                          b"a=\\uZZZZ"), SYSTEM_ERROR, SYSTEM_ERROR, None),
    # Java: a "not found" answer for a null name; ours too, the missing field named
    ("route: no topic", cmd(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"x": "y"}), TOPIC_NOT_EXIST,
     TOPIC_NOT_EXIST, "topic"),
    ("get kv: no key", cmd(RequestCode.GET_KV_CONFIG, {"namespace": "n"}), QUERY_NOT_FOUND,
     QUERY_NOT_FOUND, "key"),
    ("kv list: no namespace", cmd(RequestCode.GET_KVLIST_BY_NAMESPACE, {"x": "y"}),
     QUERY_NOT_FOUND, QUERY_NOT_FOUND, "namespace"),
    # Java: SUCCESS, acting on a null that finds nothing; ours: SUCCESS, nothing done, the
    # missing field named (ext fields and body as Java's)
    ("wipe write perm: no brokerName", cmd(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"x": "y"}),
     SUCCESS, SUCCESS, "brokerName"),
    ("topics by cluster: no cluster", cmd(RequestCode.GET_TOPICS_BY_CLUSTER, {"x": "y"}),
     SUCCESS, SUCCESS, "cluster"),
    ("member group: no clusterName", cmd(RequestCode.GET_BROKER_MEMBER_GROUP,
                                         {"brokerName": "ba"}), SUCCESS, SUCCESS,
     "clusterName"),
    ("delete topic: no topic", cmd(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"x": "y"}), SUCCESS,
     SUCCESS, "topic"),
    ("delete kv: no namespace", cmd(RequestCode.DELETE_KV_CONFIG, {"x": "y"}), SUCCESS,
     SUCCESS, "namespace"),
    ("unregister: brokerId not a number", cmd(RequestCode.UNREGISTER_BROKER,
                                              {**A.ids, "brokerId": "x"}), SUCCESS,
     SUCCESS, "brokerId"),
    # Java reads a body that is not an object as no version: changed, liveness refreshed
    ("query data version: body a JSON array", cmd(RequestCode.QUERY_DATA_VERSION, A.ids,
                                                  b"[]"), SUCCESS, SUCCESS, None),
    # Java: SUCCESS for a write it performs with a null or invalid value, or drops (a topic
    # on an unknown group); ours: refused, nothing written (docs/java-parity.md)
    ("register topic: unknown group", register_topic("X", [("nobody", 6)]), SUCCESS,
     SYSTEM_ERROR, "broker_name"),
    ("register: bodyCrc32 not a number", _register(bodyCrc32="abc"), SUCCESS, SYSTEM_ERROR,
     "bodyCrc32"),
    ("register: heartbeatTimeoutMillis not a number", _register(heartbeatTimeoutMillis="soon"),
     SUCCESS, SYSTEM_ERROR, "heartbeatTimeoutMillis"),
    ("register: heartbeatTimeoutMillis negative", _register(heartbeatTimeoutMillis="-5"),
     SUCCESS, SYSTEM_ERROR, "heartbeat_timeout_ms"),
    ("register: brokerAddr without port", _register(brokerAddr="nohost"), SUCCESS,
     SYSTEM_ERROR, "broker_addr"),
    ("register: negative queue counts", _register_body(_NEGATIVE_QUEUES), SUCCESS,
     SYSTEM_ERROR, "read_queue_nums"),
    ("register: no brokerName", _register(brokerName=None), SUCCESS, SYSTEM_ERROR,
     "brokerName"),
    ("put kv: no value", cmd(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k"}),
     SUCCESS, SYSTEM_ERROR, "value"),
]


def _state(client: WireClient) -> list[tuple[int, bytes]]:
    """What a client can see of a server's tables: cluster, topics, the case's KV
    namespace."""
    return [(answer.code, answer.body) for answer in (
        client.call(cmd(RequestCode.GET_BROKER_CLUSTER_INFO)),
        client.call(cmd(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)),
        client.call(cmd(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "n"})))]


def test_bad_requests_answer_as_pinned_and_break_neither_server(pair: Pair) -> None:
    """One connection to each server takes every case in turn; each answer is the pinned
    one, ours writes nothing for any of them, where the class is the same the ext fields
    and body are Java's too, and a route read still answers the same on that connection
    afterwards."""
    pair.same(Broker("bx", 10981).register(["T9", "T8"]))
    seen = []
    for case, request, java_code, ours_code, field in CASES:
        before = _state(pair.ours)
        java, ours = pair.call(request)
        assert _state(pair.ours) == before, case  # bad input writes nothing here
        seen.append((case, java.code, ours.code))
        if field is not None:
            assert ours.remark is not None and field in ours.remark, (case, ours.remark)
        if java_code == ours_code == SYSTEM_ERROR or java_code == ours_code == NOT_SUPPORTED:
            assert java.remark and ours.remark, case
        if java_code == ours_code == NOT_SUPPORTED:
            assert java.remark == ours.remark, case
        if java_code == ours_code:
            assert differences(request, java, ours, remark=False) == [], case
        pair.same(route("T9"))  # both still serve, with their state intact
    assert seen == [(c, j, o) for c, _, j, o, _ in CASES]
    assert sum(j == o for _, _, j, o, _ in CASES) == 21  # of 29: the same class of answer


def _frame(header: bytes, kind: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header), (kind << 24) | len(header)) + header


#: Java's server waits for 12 bytes before its protocol detection (HAProxy): pad short input.
_PAD = b"\0" * 12
_HEADER = b'"flag":0,"language":"JAVA","opaque":77,"version":479'

#: (case, bytes, answer code or None, closed)
FRAMES: list[tuple[str, bytes, int | None, bool]] = [
    ("length prefix at the limit (16 MiB - 4), body pending",
     struct.pack(">i", 16 * 1024 * 1024 - 4) + _PAD, None, False),
    ("length prefix one past the limit", struct.pack(">i", 16 * 1024 * 1024 - 3) + _PAD, None,
     True),
    ("length prefix 2 GiB - 1", struct.pack(">i", 2**31 - 1) + _PAD, None, True),
    ("negative length prefix", struct.pack(">i", -5) + _PAD, None, True),
    ("zero length prefix", struct.pack(">i", 0) + _PAD, None, True),
    ("header length 0", struct.pack(">ii", 4, 0) + _PAD, None, True),
    ("header longer than the frame", struct.pack(">ii", 8, 100) + b"abcd" + _PAD, None, True),
    ("unknown serialize type", _frame(b"{}", kind=7) + _PAD, None, True),
    ("header not JSON", _frame(b"{oops"), None, True),
    ("header a JSON array", _frame(b"[1,2]"), None, True),
    ("code a string", _frame(b'{"code":"abc","flag":0,"opaque":77}'), None, True),
    ("ext field a number", _frame(b'{"code":105,"extFields":{"topic":5},' + _HEADER + b"}"),
     TOPIC_NOT_EXIST, False),
    ("unknown language", _frame(b'{"code":105,"extFields":{"topic":"x"},"flag":0,'
                                b'"language":"KLINGON","opaque":77,"version":479}'),
     TOPIC_NOT_EXIST, False),
    ("an unsolicited response", _frame(b'{"code":0,"flag":1,"opaque":77}'), None, False),
]


@pytest.mark.parametrize(("case", "data", "code", "closed"), FRAMES, ids=[f[0] for f in FRAMES])
def test_broken_frames_close_the_connection_in_both(java: object, ours: object, case: str,
                                                   data: bytes, code: int | None,
                                                   closed: bool) -> None:
    addresses = {"java": java.address, "ours": ours.address}  # type: ignore[attr-defined]
    outcome = {}
    for name, address in addresses.items():
        with WireClient(address) as client:
            client.send_raw(data)
            answers = [client.receive(77).code] if code is not None else []
            # a close comes at once; an open connection is given half a second to close
            gone = client.closed_by_peer(1.5 if closed else 0.5)
            outcome[name] = (gone, answers + [c.code for c in client.pending])
        with WireClient(address) as again:  # the server itself is fine
            assert again.call(route("T1")).code == TOPIC_NOT_EXIST
    assert outcome["java"] == outcome["ours"] == (closed, [] if code is None else [code])


def test_a_header_without_code_is_code_0_in_java_and_malformed_here(java: object,
                                                                    ours: object) -> None:
    """Java's header fields default (``code`` 0: REQUEST_CODE_NOT_SUPPORTED); ours needs a
    ``code`` and closes the connection, as for any malformed header."""
    data = _frame(b'{"flag":0,"opaque":77}')
    got = {}
    for name, peer in (("java", java), ("ours", ours)):
        with WireClient(peer.address) as client:  # type: ignore[attr-defined]
            client.send_raw(data)
            got[name] = (client.closed_by_peer(1.5), [c.code for c in client.pending])
    assert got == {"java": (False, [NOT_SUPPORTED]), "ours": (True, [])}


def test_big_registrations_answer_the_same(pair: Pair) -> None:
    """A 2 000-topic registration (about 300 KB) and a 12 MiB one; both register alike."""
    big = Broker("big", 10991)
    pair.same(big.register([f"Topic{i:05d}" for i in range(2_000)]))
    pair.same(route("Topic01999"))
    pad = b" " * (12 * 1024 * 1024)
    body = big.body([f"Topic{i:05d}" for i in range(10)]) + pad
    pair.same(cmd(RequestCode.REGISTER_BROKER, {**big.ids, "haServerAddr": big.ha}, body))
    pair.same(cmd(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c1"}))


def test_a_header_without_opaque_gets_javas_own_number(java: object, ours: object) -> None:
    """Java's ``RemotingCommand`` takes the next value of its own request counter when the
    header has no ``opaque``; ours reads 0. Such a client cannot match answers anyway."""
    data = _frame(b'{"code":105,"extFields":{"topic":"x"},"flag":0,"version":479}')
    got = {}
    for name, peer in (("java", java), ("ours", ours)):
        with WireClient(peer.address) as client:  # type: ignore[attr-defined]
            client.send_raw(data)
            assert not client.closed_by_peer(0.5)
            [answer] = client.pending
            got[name] = (answer.code, answer.opaque)
    assert got["java"][0] == got["ours"][0] == TOPIC_NOT_EXIST
    assert got["ours"][1] == 0 and got["java"][1] != 0
