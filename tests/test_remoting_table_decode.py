"""`decode_against` (``processor/_register_broker.py``: a changed REGISTER_BROKER body read
against the broker's previous one) gives exactly what the full `RegisterBrokerBody.decode`
gives, or declines (None): on random tables and edits (hypothesis) and on adversarial
texts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing import InvalidRequest
from routing.remoting import V3_0_11, RegisterBrokerBody
from routing.remoting.processor._register_broker import (
    TableText,
    TopicConfigMemo,
    decode_against,
)
from routing.remoting.wire._codes import CURRENT_VERSION

#: One memo for the whole module, as one processor keeps one.
_MEMO = TopicConfigMemo()


def _full(data: bytes, version: int) -> RegisterBrokerBody | None:
    try:
        return RegisterBrokerBody.decode(data, version=version)
    except InvalidRequest:
        return None


def _against(data: bytes, previous: TableText | None, version: int = CURRENT_VERSION
             ) -> tuple[RegisterBrokerBody, TableText] | None:
    """decode_against, checked against the full decode; returns its result."""
    got = decode_against(data, version, previous, _MEMO)
    expected = _full(data, version)
    if got is not None:
        assert expected is not None, data[:300]
        assert got[0] == expected
        assert list(got[0].topics) == list(expected.topics)  # the same order
        assert got[0].data_version == expected.data_version
    return got


def _body(names: list[str], counter: int = 1, **config: Any) -> bytes:
    topics = {n: r.TopicConfig(topic_name=n, read_queue_nums=8, write_queue_nums=8, **config)
              for n in names}
    return RegisterBrokerBody(data_version=r.DataVersion(timestamp=1, counter=counter),
                              topics=topics, filter_servers=("10.0.0.1:1",)).encode()


def test_a_new_version_with_the_same_table_reuses_the_table_object() -> None:
    first = _against(_body([f"T{i}" for i in range(50)]), None)
    assert first is not None
    second = _against(_body([f"T{i}" for i in range(50)], counter=2), first[1])
    assert second is not None
    assert second[0].topics is first[0].topics and second[1] is first[1]
    assert second[0].data_version.counter == 2


def test_one_changed_topic_reuses_the_others() -> None:
    names = [f"T{i}" for i in range(50)]
    first = _against(_body(names), None)
    assert first is not None
    changed = _body([*names[:10], "New", *names[11:]], counter=2)
    second = _against(changed, first[1])
    assert second is not None
    old, new = first[0].topics, second[0].topics
    assert new["T20"] is old["T20"] and "New" in new and "T10" not in new


@pytest.mark.parametrize("text", [
    # whitespace everywhere JSON allows it
    b' { "filterServerList" : [ ] , "topicConfigSerializeWrapper" : { "dataVersion" : '
    b'{"counter":2} , "topicConfigTable" : { "A" : {"topicName":"A"} , "B" : '
    b'{"topicName":"B"} } } } ',
    # duplicate keys: the later value wins, the earlier place stays
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"A"},'
    b'"B":{"topicName":"B"},"A":{"topicName":"A","perm":2}}}}',
    # a second table: the later one counts
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"A"}},'
    b'"topicConfigTable":{"B":{"topicName":"B"}}}}',
    # the marker inside a string
    b'{"filterServerList":["\\"topicConfigTable\\":{}"],"topicConfigSerializeWrapper":'
    b'{"topicConfigTable":{"A":{"topicName":"A"}}}}',
    b'{"x":"\\"topicConfigTable\\":{\\"A\\":{}}","topicConfigSerializeWrapper":'
    b'{"topicConfigTable":{}}}',
    # the marker ending a longer key (its quote escaped), the real table empty
    b'{"topicConfigSerializeWrapper":{"abc\\"topicConfigTable":{"A":{"topicName":"A"}},'
    b'"topicConfigTable":{}}}',
    # the marker in another object
    b'{"filterServerList":[],"other":{"topicConfigTable":{"A":{"topicName":"A"}}},'
    b'"topicConfigSerializeWrapper":{"topicConfigTable":{"B":{"topicName":"B"}}}}',
    # legacy dialect, BOM, bad UTF-8, garbage, trailing comma, not an object
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{},"topicQueueMappingInfoMap":'
    b'{"T":{"currIdMap":{0:1}}}}}',
    b'\xef\xbb\xbf{"topicConfigSerializeWrapper":{"topicConfigTable":{}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"\xff":{}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"A"},}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"A"}}}} x',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":[1]}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"A"} "B":{}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"A",'
    b'"readQueueNums":"x"}}}}',
    b'[{"topicConfigTable":{}}]',
    b'{"topicConfigTable":{"A":{"topicName":"A"}}}',
])
@pytest.mark.parametrize("version", [CURRENT_VERSION, V3_0_11 - 1])
def test_adversarial_texts_decode_as_the_full_decode_or_decline(text: bytes,
                                                                version: int) -> None:
    first = _against(text, None, version)
    previous = first[1] if first is not None else None
    _against(text, previous, version)
    _against(text.replace(b'"A"', b'"C"'), previous, version)


def test_a_previous_member_text_in_another_place_is_checked_again() -> None:
    names = ["A", "B", "C"]
    first = _against(_body(names), None)
    assert first is not None
    for edit in (["C", "B", "A"], ["B", "C"], ["A", "A2", "B", "C"], []):
        _against(_body(edit, counter=3), first[1])
    _against(_body(names, counter=3, perm=2), first[1])  # every value changed


# --------------------------------------------------------------------------- random edits

_name = st.sampled_from(["A", "B", "C", "D", "E", "F", "G", "%RETRY%g", "a_b-1"])
_config = st.builds(lambda n, rq, wq, perm, order, attrs: (n, {
    "read_queue_nums": rq, "write_queue_nums": wq, "perm": perm, "order": order,
    "attributes": attrs}), _name, st.integers(0, 16), st.integers(0, 16),
    st.sampled_from([2, 4, 6]), st.booleans(),
    st.dictionaries(st.sampled_from(["+a", "+b"]), st.sampled_from(["1", "x"]), max_size=2))


def _encode(configs: list[tuple[str, dict[str, Any]]], counter: int, version: int) -> bytes:
    topics = {n: r.TopicConfig(topic_name=n, **c) for n, c in configs}
    return RegisterBrokerBody(data_version=r.DataVersion(timestamp=7, counter=counter),
                              topics=topics).encode(version=version)


@settings(max_examples=300, deadline=None)
@given(st.lists(_config, max_size=8), st.lists(st.lists(_config, max_size=8), max_size=3),
       st.sampled_from([CURRENT_VERSION, V3_0_11 - 1]), st.booleans())
def test_random_edits_decode_as_the_full_decode(first: list[Any], later: list[list[Any]],
                                                version: int, spaced: bool) -> None:
    previous = None
    for counter, configs in enumerate([first, *later, first]):
        data = _encode(configs, counter, version)
        if spaced:  # the same document, spaced out (a decoder must not care)
            data = data.replace(b'":{', b'" : {').replace(b',"', b', "')
        got = _against(data, previous, version)
        assert got is not None or _full(data, version) is None or spaced
        if got is not None:
            previous = got[1]
