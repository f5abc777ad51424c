"""Hypothesis-generated request sequences, sent to Java's name server and to ours in the same
order; every answer compared field by field (wire_diff.py).

A small world so that sequences collide: four brokers (a master and a slave of ``ba``, ``bb``,
and ``bc`` in another cluster, zone and acting-master mode), each on its own connection to
each server, and four topics. Steps: registrations (changed or unchanged, with or without
filter servers, in any header form), unregisters, dropped connections, heartbeats, version
queries, route reads in both dialects, every listing, write-permission changes, topic
deletes and registrations, order-topic KV changes. Bounded and derandomized (the same
sequences every run); each example starts from an empty Java and a fresh server of ours.

After an unregister or a dropped connection the next step waits until Java's cluster view
equals ours: Java applies both through a queue, ours at once (spec D2, D6).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire import RoutingServer, eventually, properties_like_java
from wire_diff import Pair, align_kv_namespaces, body_doc, differences
from wire_requests import Broker, cmd, register_topic, route

from routing.remoting import (
    CURRENT_VERSION,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    RemotingCommand,
    RequestCode,
    SerializeType,
)

TOPICS = ("T0", "T1", "T2", "T3")
GROUPS = ("ba", "bb", "bc")
FORMS = ((SerializeType.JSON, CURRENT_VERSION), (SerializeType.JSON, 0),
         (SerializeType.ROCKETMQ, CURRENT_VERSION))
LISTINGS = (RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, RequestCode.GET_UNIT_TOPIC_LIST,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)


def _brokers() -> list[Broker]:
    return [Broker("ba", 10911, 0), Broker("ba", 10921, 1), Broker("bb", 10931, 0),
            Broker("bc", 10941, 0, cluster="c2", zone="z1", acting_master=True)]


broker_ix = st.integers(0, 3)
topics = st.lists(st.sampled_from(TOPICS), min_size=2, max_size=4, unique=True)
steps = st.one_of(
    st.tuples(st.just("register"), broker_ix, topics, st.booleans(), st.booleans(),
              st.sampled_from(range(len(FORMS)))),
    st.tuples(st.just("unregister"), broker_ix),
    st.tuples(st.just("drop"), broker_ix),
    st.tuples(st.just("heartbeat"), broker_ix),
    st.tuples(st.just("query_version"), broker_ix, st.integers(0, 3)),
    st.tuples(st.just("route"), st.sampled_from((*TOPICS, "none")),
              st.sampled_from(range(len(FORMS)))),
    st.tuples(st.just("listing"), st.sampled_from(LISTINGS)),
    st.tuples(st.just("by_cluster"), st.sampled_from(("c1", "c2"))),
    st.tuples(st.just("member_group"), broker_ix),
    st.tuples(st.just("perm"), st.sampled_from((RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                                RequestCode.ADD_WRITE_PERM_OF_BROKER)),
              st.sampled_from(GROUPS)),
    st.tuples(st.just("delete_topic"), st.sampled_from(TOPICS),
              st.sampled_from((None, "c1", "c2"))),
    st.tuples(st.just("register_topic"), st.sampled_from((*TOPICS, "T9")),
              st.sampled_from(GROUPS)),
    st.tuples(st.just("order_kv"), st.sampled_from(TOPICS), st.booleans()),
)


def _accepted(step: tuple[Any, ...], java: RemotingCommand, ours: RemotingCommand) -> bool:
    """The pinned differences a step may show (test_java_bad_requests.py, ...)."""
    if step[0] == "register_topic":  # a group not registered: Java SUCCESS, nothing written
        return (java.code, ours.code) == (0, 1) and "registered broker group" in (
            ours.remark or "")
    return False


class World:
    """Both servers, the brokers' connections to each, and a client pair."""

    def __init__(self, java: tuple[str, int], ours: tuple[str, int]) -> None:
        self.java, self.ours = java, ours
        self.brokers = _brokers()
        self.conns: list[Pair] = [Pair(java, ours) for _ in self.brokers]
        self.client = Pair(java, ours)
        self.pending_removal = False

    def close(self) -> None:
        for conn in (*self.conns, self.client):
            conn.close()

    def converge(self) -> None:
        """Wait until Java's cluster view equals ours (its queued removals applied)."""
        view = cmd(RequestCode.GET_BROKER_CLUSTER_INFO)
        ours = body_doc(view.code, self.client.ours.call(view).body)
        java = eventually(lambda: body_doc(view.code, self.client.java.call(view).body),
                          lambda got: got == ours, timeout_s=5.0)
        assert java == ours, f"Java's view did not converge: java={java} ours={ours}"
        self.pending_removal = False

    def request(self, step: tuple[Any, ...]) -> tuple[Pair, RemotingCommand]:
        kind = step[0]
        if kind == "register":
            _, i, names, bump, filters, form = step
            serialize, version = FORMS[form]
            broker = self.brokers[i]
            return self.conns[i], broker.register(
                names, bump=bump, filter_servers=["127.0.0.1:9999"] if filters else (),
                kind=serialize, version=version)
        if kind in ("unregister", "heartbeat", "member_group"):
            broker = self.brokers[step[1]]
            request = {"unregister": broker.unregister, "heartbeat": broker.heartbeat,
                       "member_group": broker.member_group}[kind]()
            return self.conns[step[1]], request
        if kind == "query_version":
            return self.conns[step[1]], self.brokers[step[1]].query_version(step[2])
        if kind == "route":
            serialize, version = FORMS[step[2]]
            return self.client, route(step[1], kind=serialize, version=version)
        if kind == "listing":
            return self.client, cmd(step[1])
        if kind == "by_cluster":
            return self.client, cmd(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": step[1]})
        if kind == "perm":
            return self.client, cmd(step[1], {"brokerName": step[2]})
        if kind == "delete_topic":
            ext = {"topic": step[1], **({"clusterName": step[2]} if step[2] else {})}
            return self.client, cmd(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
        if kind == "register_topic":
            return self.client, register_topic(step[1], [(step[2], 6)])
        assert kind == "order_kv"
        ext = {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": step[1]}
        if step[2]:
            return self.client, cmd(RequestCode.PUT_KV_CONFIG, {**ext, "value": "ba:4"})
        return self.client, cmd(RequestCode.DELETE_KV_CONFIG, ext)

    def apply(self, step: tuple[Any, ...]) -> list[str]:
        if self.pending_removal:
            self.converge()
        if step[0] == "drop":
            i = step[1]
            self.conns[i].close()
            self.conns[i] = Pair(self.java, self.ours)
            self.pending_removal = True
            return []
        conn, request = self.request(step)
        java, ours = conn.call(request)
        if step[0] == "unregister":
            self.pending_removal = True
        if _accepted(step, java, ours):
            return []
        # Java answers every request with a JSON header (test_java_requests.py pins it)
        return differences(request, java, ours,
                           header_form=request.serialize_type is SerializeType.JSON)


#: examples per run (12; ROUTING_JAVA_EXAMPLES for a longer search)
EXAMPLES = int(os.environ.get("ROUTING_JAVA_EXAMPLES", "12"))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(sequence=st.lists(steps, min_size=1, max_size=14))
def test_random_sequences_answer_the_same(java: Any, sequence: list[tuple[Any, ...]]) -> None:
    java.clean()
    with tempfile.TemporaryDirectory() as folder:
        server = RoutingServer(config_file=properties_like_java(Path(folder))).start()
        world = World(java.address, server.address)
        try:
            align_kv_namespaces(world.client)
            for n, step in enumerate(sequence):
                found = world.apply(step)
                assert not found, f"step {n} {step}: {found}"
            world.converge()
            for topic in (*TOPICS, "T9"):
                world.client.same(route(topic))
            world.client.same(cmd(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        finally:
            world.close()
            server.stop()


def test_world_connections_are_separate(java: Any, ours: RoutingServer) -> None:
    """Each broker has its own connection: dropping one removes only that broker."""
    world = World(java.address, ours.address)
    try:
        align_kv_namespaces(world.client)
        for step in (("register", 0, ["T0", "T1"], True, False, 0),
                     ("register", 2, ["T1", "T2"], True, False, 0), ("drop", 0)):
            assert world.apply(step) == []
        world.converge()
        answer = world.client.same(route("T1"))[1]
        assert [b["brokerName"] for b in body_doc(105, answer.body)["brokerDatas"]] == ["bb"]
    finally:
        world.close()

