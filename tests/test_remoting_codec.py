"""The remoting frame codec: golden bytes built by hand from the documented layout, round
trips, every protocol error, and fuzzing (random bytes, mutated frames, random chunkings)."""

from __future__ import annotations

import contextlib
import json
import struct

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routing import RoutingError
from routing.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    MAX_FRAME_BYTES,
    FrameDecoder,
    LanguageCode,
    ProtocolError,
    RemotingCommand,
    SerializeType,
    decode,
    encode,
)


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame exactly as the layout says: length, type<<24|header length, header, body."""
    return (struct.pack(">i", 4 + len(header) + len(body))
            + struct.pack(">i", (serialize_type << 24) | len(header)) + header + body)


def binary_header(code: int, language: int, version: int, opaque: int, flag: int,
                  remark: bytes, ext: list[tuple[bytes, bytes]]) -> bytes:
    ext_bytes = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
                         for k, v in ext)
    return (struct.pack(">hbhii", code, language, version, opaque, flag)
            + struct.pack(">i", len(remark)) + remark
            + struct.pack(">i", len(ext_bytes)) + ext_bytes)


# --------------------------------------------------------------------------- golden bytes


def test_json_header_golden_bytes() -> None:
    header = (b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
              b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":401}')
    expected = frame(header, b"BODY")
    cmd = RemotingCommand(code=105, version=401, opaque=7, ext_fields={"topic": "TopicTest"},
                          body=b"BODY")
    assert encode(cmd) == expected
    assert expected[:8] == struct.pack(">ii", 4 + len(header) + 4, len(header))
    assert decode(expected) == cmd


def test_binary_header_golden_bytes() -> None:
    header = binary_header(105, 9, 401, 7, 2, b"hi", [(b"topic", b"TopicTest")])
    expected = frame(header, b"xyz", serialize_type=1)
    assert expected[4] == 0x01  # the high byte of the header word is the serialize type
    cmd = RemotingCommand(code=105, language=LanguageCode.GO, version=401, opaque=7,
                          flag=FLAG_ONEWAY, remark="hi", ext_fields={"topic": "TopicTest"},
                          body=b"xyz", serialize_type=SerializeType.ROCKETMQ)
    assert encode(cmd) == expected
    decoded = decode(expected)
    assert decoded == cmd
    assert decoded.is_oneway and not decoded.is_response


def test_binary_header_with_no_remark_and_no_ext_is_21_bytes() -> None:
    cmd = RemotingCommand(code=0, serialize_type=SerializeType.ROCKETMQ, flag=FLAG_RESPONSE)
    data = encode(cmd)
    assert data == frame(binary_header(0, 0, 0, 0, 1, b"", []), serialize_type=1)
    assert len(data) == 8 + 21


def test_go_client_style_json_header_decodes() -> None:
    header = json.dumps({"code": 105, "language": "GO", "version": 317, "opaque": 3, "flag": 0,
                         "remark": "", "extFields": {"topic": "T", "brokerId": 0,
                                                     "compressed": False, "gone": None}})
    cmd = decode(frame(header.encode()))
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque) == (105, LanguageCode.GO, 317, 3)
    assert cmd.remark is None
    assert dict(cmd.ext_fields) == {"topic": "T", "brokerId": "0", "compressed": "false"}


def test_unknown_language_becomes_other() -> None:
    assert decode(frame(b'{"code":1,"language":"COBOL"}')).language is LanguageCode.OTHER
    data = frame(binary_header(1, 99, 0, 0, 0, b"", []), serialize_type=1)
    assert decode(data).language is LanguageCode.OTHER


def test_empty_ext_values_and_utf8_survive_both_forms() -> None:
    for kind in SerializeType:
        cmd = RemotingCommand(code=7, remark="héllo ✓", ext_fields={"k": "", "ключ": "значение"},
                              serialize_type=kind)
        assert decode(encode(cmd)) == cmd


def test_make_response_keeps_opaque_and_form() -> None:
    request = RemotingCommand(code=105, opaque=42, serialize_type=SerializeType.ROCKETMQ)
    response = request.make_response(17, "nope", ext_fields={"a": "b"}, body=b"x")
    assert (response.opaque, response.flag, response.code) == (42, FLAG_RESPONSE, 17)
    assert response.serialize_type is SerializeType.ROCKETMQ
    assert response.is_response and not response.is_oneway


# --------------------------------------------------------------------------- decoder


def test_decoder_in_any_chunking_yields_whole_commands() -> None:
    cmds = [RemotingCommand(code=i, opaque=i, body=bytes(i), serialize_type=i % 2)
            for i in range(1, 6)]
    stream = b"".join(encode(c) for c in cmds)
    for step in (1, 2, 3, 7, 64, len(stream)):
        dec = FrameDecoder()
        out: list[RemotingCommand] = []
        for i in range(0, len(stream), step):
            out += dec.feed(stream[i:i + step])
        assert out == cmds
        assert dec.buffered == 0


def test_decoder_holds_partial_frames() -> None:
    data = encode(RemotingCommand(code=1, body=b"x" * 100))
    dec = FrameDecoder()
    assert dec.feed(data[:50]) == []
    assert dec.buffered == 50
    assert [c.code for c in dec.feed(data[50:])] == [1]


@pytest.mark.parametrize(("data", "message"), [
    (struct.pack(">i", -1), "negative frame length -1"),
    (struct.pack(">i", 2), "shorter than the 4-byte header-length word"),
    (struct.pack(">i", MAX_FRAME_BYTES - 3), "exceeds the maximum frame size"),
    (struct.pack(">ii", 10, 20), "header length 20 is longer than the frame"),
    (struct.pack(">ii", 10, 0x02000000), "unknown serialize type 2"),
    (frame(b"{not json"), "malformed header JSON"),
    (frame(b"[1, 2]"), "expected an object"),
    (frame(b'{"language":"JAVA"}'), "'code' must be a 32-bit integer"),
    (frame(b'{"code":"105"}'), "'code' must be a 32-bit integer"),
    (frame(b'{"code":4294967296}'), "'code' must be a 32-bit integer"),
    (frame(b'{"code":true}'), "'code' must be a 32-bit integer"),
    (frame(b'{"code":1,"language":1.5}'), "language 1.5"),
    (frame(b'{"code":1,"language":true}'), "language True"),
    (frame(b'{"code":1,"language":null}'), "language None"),
    (frame(b'{"code":1,"version":"1"}'), "'version' must be a 32-bit integer"),
    (frame(b'{"code":1,"version":null}'), "'version' must be a 32-bit integer"),
    (frame(b'{"code":1,"opaque":2147483648}'), "'opaque' must be a 32-bit integer"),
    (frame(b'{"code":1,"flag":-2147483649}'), "'flag' must be a 32-bit integer"),
    (frame(b'{"code":1,"flag":1.0}'), "'flag' must be a 32-bit integer"),
    (frame(b'{"code":1,"version":"x","opaque":"y"}'), "'version' must be"),  # first bad one
    (frame(b'{"code":1,"opaque":"y","remark":5}'), "remark must be a string"),
    (frame(b'{"code":1,"extFields":[1]}'), "extFields must be an object"),
    (frame(b'{"code":1,"extFields":{"a":{"b":1}}}'), "is not a scalar"),
    (frame(b'{"code":1,"remark":5}'), "remark must be a string"),
    (frame(b'{"code":1,"remark":"\\ud800"}'), "not encodable as UTF-8"),
    (frame(b"\x00" * 10, serialize_type=1), "shorter than its 21-byte fixed part"),
    (frame(binary_header(1, 0, 0, 0, 0, b"", [])[:-4] + struct.pack(">i", 99), serialize_type=1),
     "ext-fields length 99"),
    (frame(struct.pack(">hbhiii", 1, 0, 0, 0, 0, 500) + b"\x00" * 4, serialize_type=1),
     "remark length 500 overruns"),
    (frame(struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", 6) + b"\xff\xff"
           + b"\x00" * 4, serialize_type=1), "name length -1 overruns"),
    (frame(struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", 7) + b"\x00\x01k"
           + struct.pack(">i", 50), serialize_type=1), "value length 50 overruns"),
    (frame(struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", 1) + b"\x00",
           serialize_type=1), "name length is truncated"),
])
def test_protocol_errors_name_the_problem(data: bytes, message: str) -> None:
    dec = FrameDecoder()
    with pytest.raises(ProtocolError, match=message):
        dec.feed(data)
    assert dec.closed
    with pytest.raises(ProtocolError, match="decoder closed after an earlier error"):
        dec.feed(encode(RemotingCommand(code=1)))


def test_oversized_length_is_refused_before_the_frame_arrives() -> None:
    dec = FrameDecoder(max_frame_bytes=1024)
    assert dec.feed(encode(RemotingCommand(code=1, body=b"x" * 900))) != []
    with pytest.raises(ProtocolError, match=r"1021 .* exceeds the maximum frame size of 1024"):
        dec.feed(struct.pack(">i", 1021))
    assert dec.buffered == 0


def test_frame_of_exactly_the_maximum_size_is_accepted() -> None:
    cmd = RemotingCommand(code=1)
    size = len(encode(cmd))
    data = encode(attrs.evolve(cmd, body=b"b" * (1024 - size)))
    assert len(data) == 1024
    assert FrameDecoder(max_frame_bytes=1024).feed(data)[0].body == b"b" * (1024 - size)
    with pytest.raises(ProtocolError, match="exceeds"):
        FrameDecoder(max_frame_bytes=1023).feed(data)


def test_commands_before_a_bad_frame_are_handed_over() -> None:
    good = encode(RemotingCommand(code=1)) + encode(RemotingCommand(code=2))
    with pytest.raises(ProtocolError) as info:
        FrameDecoder().feed(good + struct.pack(">i", -5))
    assert [c.code for c in info.value.commands] == [1, 2]


def test_protocol_error_is_a_routing_error() -> None:
    assert issubclass(ProtocolError, RoutingError)


def test_decode_wants_exactly_one_frame() -> None:
    data = encode(RemotingCommand(code=1))
    with pytest.raises(ProtocolError, match="does not match"):
        decode(data + b"x")
    with pytest.raises(ProtocolError, match="cannot hold"):
        decode(b"\x00")
    with pytest.raises(ProtocolError, match=r"does not match"):
        decode(data[:-1])


def test_encode_refuses_what_the_wire_cannot_carry() -> None:
    with pytest.raises(ProtocolError, match="16-bit"):
        encode(RemotingCommand(code=40_000, serialize_type=SerializeType.ROCKETMQ))
    with pytest.raises(ProtocolError, match="UTF-8"):
        encode(RemotingCommand(code=1, remark="\ud800"))
    assert decode(encode(RemotingCommand(code=40_000))).code == 40_000  # JSON carries int32


def test_constructor_validates_fields() -> None:
    with pytest.raises(ProtocolError):
        RemotingCommand(code=2**31)
    with pytest.raises(ProtocolError):
        RemotingCommand(code=True)
    with pytest.raises(ProtocolError):
        RemotingCommand(code=1, ext_fields={"a": 1})
    with pytest.raises(ProtocolError):
        RemotingCommand(code=1, body="text")
    assert RemotingCommand(code=1, remark="").remark is None
    assert RemotingCommand(code=1, body=None).body == b""


# --------------------------------------------------------------------------- fuzzing

_text = st.text(max_size=20)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    kind = draw(st.sampled_from(SerializeType))
    small = kind is SerializeType.ROCKETMQ
    int16 = st.integers(-(2**15), 2**15 - 1)
    int32 = st.integers(-(2**31), 2**31 - 1)
    return RemotingCommand(
        code=draw(int16 if small else int32), language=draw(st.sampled_from(LanguageCode)),
        version=draw(int16 if small else int32), opaque=draw(int32), flag=draw(int32),
        remark=draw(st.none() | _text), ext_fields=draw(st.dictionaries(_text, _text, max_size=5)),
        body=draw(st.binary(max_size=64)), serialize_type=kind)


@settings(deadline=None)
@given(commands())
def test_decode_inverts_encode(cmd: RemotingCommand) -> None:
    assert decode(encode(cmd)) == cmd


@settings(deadline=None)
@given(commands(), st.integers(-(2**31), 2**31 - 1))
def test_plain_json_frames_are_byte_for_byte_the_full_encoding(cmd: RemotingCommand,
                                                              opaque: int) -> None:
    """A JSON command without ext fields or remark reuses its header's remembered parts
    (the same code, flag, language and version with another opaque): the bytes are those
    the header written in full gives, as the layout says."""
    plain = attrs.evolve(cmd, serialize_type=SerializeType.JSON, remark=None, ext_fields={})
    for one in (plain, attrs.evolve(plain, opaque=opaque)):  # the second one: remembered
        header = (f'{{"code":{one.code},"flag":{one.flag},"language":"{one.language.name}",'
                  f'"opaque":{one.opaque},"serializeTypeCurrentRPC":"JSON",'
                  f'"version":{one.version}}}').encode()
        assert encode(one) == frame(header, one.body)
        assert decode(encode(one)) == one


@settings(deadline=None)
@given(st.lists(commands(), max_size=5), st.lists(st.integers(1, 40), max_size=30))
def test_any_chunking_gives_the_same_commands(cmds: list[RemotingCommand],
                                              cuts: list[int]) -> None:
    stream = b"".join(encode(c) for c in cmds)
    dec, out, pos = FrameDecoder(), [], 0
    for cut in cuts:
        out += dec.feed(stream[pos:pos + cut])
        pos += cut
    out += dec.feed(stream[pos:])
    assert out == cmds


def _feed_all(chunks: list[bytes], max_frame_bytes: int) -> None:
    dec = FrameDecoder(max_frame_bytes=max_frame_bytes)
    try:
        for chunk in chunks:
            dec.feed(chunk)
    except ProtocolError:
        assert dec.closed


@settings(deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=10), st.sampled_from([64, 4096, MAX_FRAME_BYTES]))
def test_random_bytes_raise_only_protocol_errors(chunks: list[bytes], limit: int) -> None:
    _feed_all(chunks, limit)
    with contextlib.suppress(ProtocolError):
        decode(b"".join(chunks))


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(commands(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                            min_size=1, max_size=6), st.integers(1, 16))
def test_mutated_frames_raise_only_protocol_errors(cmd: RemotingCommand,
                                                   flips: list[tuple[int, int]],
                                                   step: int) -> None:
    data = bytearray(encode(cmd))
    for where, value in flips:
        data[where % len(data)] = value
    _feed_all([bytes(data[i:i + step]) for i in range(0, len(data), step)], 1 << 20)
    with contextlib.suppress(ProtocolError):
        decode(bytes(data))


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(["code", "language", "version", "opaque", "flag",
                                        "remark", "extFields", "x"]),
                       st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                                    | _text, lambda inner: st.lists(inner, max_size=3)
                                    | st.dictionaries(_text, inner, max_size=3), max_leaves=6)))
def test_random_json_headers_raise_only_protocol_errors(doc: dict[str, object]) -> None:
    try:
        cmd = decode(frame(json.dumps(doc).encode()))
    except ProtocolError:
        return
    assert decode(encode(cmd)) == cmd


@pytest.mark.parametrize("text", [
    '{"code":103}', '  {"a": [1, 2, {"b": null}]} \r\n\t', "", " ", '{"a":1} x', "\ufeff{}",
    '{"a":', "[1,2", '"x"', '{"a":NaN}', '{"a":"\\ud800"}', "1e999", '{"a" 1}', '{"a":1,}',
    "{}{}", "\n", '{"extFields":{"k":"v","n":1,"f":1.5,"b":true,"z":null}}',
])
def test_header_json_parses_as_json_loads(text):
    """The header decoder calls json's scanner directly: same values, same errors."""
    from routing.remoting.wire._codec import _loads

    try:
        expected = ("ok", json.dumps(json.loads(text)))
    except ValueError as exc:
        expected = ("error", str(exc))
    try:
        got = ("ok", json.dumps(_loads(text)))
    except ValueError as exc:
        got = ("error", str(exc))
    assert got == expected


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=8),
       st.sampled_from(["", " ", "\n\t "]), st.sampled_from(["", " x", "\r\n"]))
def test_header_json_parses_any_document_as_json_loads(doc, before, after):
    from routing.remoting.wire._codec import _loads

    text = before + json.dumps(doc) + after
    try:
        expected: object = json.loads(text)
    except ValueError as exc:
        expected = str(exc)
    try:
        got: object = _loads(text)
    except ValueError as exc:
        got = str(exc)
    assert got == expected


@pytest.mark.parametrize(("header", "language", "version", "opaque", "flag"), [
    (b'{"code":1}', LanguageCode.JAVA, 0, 0, 0),
    (b'{"code":1,"language":"GO","version":-5,"opaque":2147483647,"flag":-2147483648}',
     LanguageCode.GO, -5, 2147483647, -2147483648),
    (b'{"code":1,"language":"KLINGON"}', LanguageCode.OTHER, 0, 0, 0),
    (b'{"code":1,"language":9}', LanguageCode(9), 0, 0, 0),
    (b'{"code":1,"language":250}', LanguageCode.OTHER, 0, 0, 0),
])
def test_json_header_fields_decode(header, language, version, opaque, flag):
    [cmd] = FrameDecoder().feed(frame(header))
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (
        1, language, version, opaque, flag)
