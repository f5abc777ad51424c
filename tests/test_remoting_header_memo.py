"""`FrameDecoder`'s per-connection header memo (`wire._header_cache.HeaderCache`): a header seen
before but for its opaque decodes to exactly what a fresh decode gives, on fixed
adversarial headers and on random ones (hypothesis)."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routing.remoting import (
    CURRENT_VERSION,
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    encode,
)
from routing.remoting.wire._codec import decode_frame as _decode_frame
from routing.remoting.wire._header_cache import HeaderCache

_PREFIX = struct.Struct(">ii")


def _frame(header: str, body: bytes = b"") -> bytes:
    raw = header.encode("utf-8", "surrogatepass")
    return _PREFIX.pack(4 + len(raw) + len(body), len(raw)) + raw + body


def _fresh(frame: bytes) -> RemotingCommand | str:
    try:
        return _decode_frame(memoryview(frame)[4:])
    except ProtocolError as exc:
        return f"error: {exc}"


def _through(memo: HeaderCache, frame: bytes) -> RemotingCommand | str:
    try:
        return _decode_frame(memoryview(frame)[4:], memo)
    except ProtocolError as exc:
        return f"error: {exc}"


def _template(opaque: str, ext: str = '{"brokerName":"b","brokerAddr":"10.0.0.1:10911"}',
              tail: str = "") -> str:
    return (f'{{"code":103,"extFields":{ext},"flag":0,"language":"JAVA",'
            f'"opaque":{opaque}{tail},"serializeTypeCurrentRPC":"JSON","version":479}}')


def test_a_broker_header_is_remembered_and_reused_with_the_new_opaque() -> None:
    memo = HeaderCache()
    first = _through(memo, _frame(_template("1"), b"body"))
    second = _through(memo, _frame(_template("2"), b"body"))
    assert isinstance(first, RemotingCommand) and isinstance(second, RemotingCommand)
    assert second == _fresh(_frame(_template("2"), b"body"))
    assert second.opaque == 2 and second.ext_fields is first.ext_fields  # the memo's
    assert len(memo._entries) == 1


@pytest.mark.parametrize("second", [
    "01", "-0", "1.0", "1e3", '"7"', "2147483648", "-2147483649", "99999999999999999999",
    " 3", "null", "true", "[1]",
])
def test_other_tokens_in_the_opaque_slot_decode_as_a_fresh_decode_does(second: str) -> None:
    memo = HeaderCache()
    _through(memo, _frame(_template("1")))
    frame = _frame(_template(second))
    assert _through(memo, frame) == _fresh(frame)


@pytest.mark.parametrize("header", [
    # "opaque" also a key of extFields (same digits): not remembered
    _template("1", ext='{"a":"b","opaque":1}'),
    # an escaped top-level key, a literal nested one
    '{"code":103,"\\u006fpaque":1,"extFields":{"x":"y","opaque":1},"flag":0}',
    # a backslash anywhere
    _template("1", ext='{"a":"b\\\\c"}'),
    # whitespace after the colon
    '{"code":103,"flag":0, "opaque": 1,"version":1}',
    # duplicate keys: the last wins
    '{"opaque":5,"code":103,"flag":0,"opaque":1,"version":1}',
])
def test_ambiguous_headers_are_not_remembered_or_stay_exact(header: str) -> None:
    memo = HeaderCache()
    first = _frame(header)
    assert _through(memo, first) == _fresh(first)
    spots = [i for i in range(len(header)) if header.startswith(":1", i)]
    for value in ("2", "3", "1"):
        for spot in spots:  # change one number at a time, the top-level opaque or not
            frame = _frame(header[:spot] + f":{value}" + header[spot + 2:])
            assert _through(memo, frame) == _fresh(frame)


@pytest.mark.parametrize("later", ['"version":480', '"version":479,"x":1',
                                   '"serializeTypeCurrentRPC":"ROCKETMQ","version":479'])
def test_a_change_after_the_opaque_is_seen(later: str) -> None:
    memo = HeaderCache()
    _through(memo, _frame(_template("1")))
    frame = _frame(_template("2").replace('"serializeTypeCurrentRPC":"JSON","version":479',
                                          later))
    assert _through(memo, frame) == _fresh(frame)


def test_the_memo_is_bounded() -> None:
    memo = HeaderCache()
    for code in range(20):
        _through(memo, _frame(_template("1").replace('"code":103', f'"code":{code}')))
    assert len(memo._entries) <= 8


def test_a_decoder_fed_one_connection_uses_the_memo_and_decodes_the_same() -> None:
    decoder = FrameDecoder()
    frames = [encode(RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, version=CURRENT_VERSION,
                                     opaque=i, ext_fields={"brokerName": "b"}))
              for i in range(5)]
    got = [c for f in frames for c in decoder.feed(f)]
    assert [c.opaque for c in got] == list(range(5))
    assert got == [FrameDecoder().feed(f)[0] for f in frames]


# --------------------------------------------------------------------------- random headers

_scalar = st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=6), st.booleans(),
                    st.none(), st.floats(allow_nan=False, allow_infinity=False))
_keys = st.sampled_from(["code", "extFields", "flag", "language", "opaque", "remark",
                         "serializeTypeCurrentRPC", "version", "x"])
_ext = st.dictionaries(st.sampled_from(["opaque", "a", "brokerName", "b\\c"]), _scalar,
                       max_size=3)
_doc = st.dictionaries(_keys, st.one_of(_scalar, _ext), max_size=8)
_token = st.one_of(st.integers(-(2**32), 2**32).map(str),
                   st.sampled_from(["01", "-0", "1.5", '"3"', "null", "7 ", "2e2"]))


@settings(max_examples=400, deadline=None)
@given(_doc, st.integers(-(2**31), 2**31 - 1), st.lists(_token, min_size=1, max_size=4),
       st.booleans())
def test_random_headers_decode_through_the_memo_as_fresh(doc: dict[str, object], opaque: int,
                                                        tokens: list[str],
                                                        sort: bool) -> None:
    doc = {**doc, "code": doc.get("code", 103), "opaque": opaque}
    text = json.dumps(doc, separators=(",", ":"), sort_keys=sort, ensure_ascii=False)
    memo = HeaderCache()
    assert _through(memo, _frame(text, b"x")) == _fresh(_frame(text, b"x"))
    marker = f'"opaque":{opaque}'
    changed = {**doc, **{k: 1 - v if type(v) is int else "z" for k, v in doc.items()
                         if k in ("flag", "version", "x", "remark")}}
    later = json.dumps(changed, separators=(",", ":"), sort_keys=sort, ensure_ascii=False)
    for token in tokens:
        for variant in (text.replace(marker, f'"opaque":{token}'),
                        later.replace(marker, f'"opaque":{token}')):
            frame = _frame(variant, b"x")
            assert _through(memo, frame) == _fresh(frame)
