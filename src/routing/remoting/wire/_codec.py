"""RocketMQ remoting commands, sans-I/O: `RemotingCommand`, `encode`, one frame's decoding.

Wire layout of one frame (all integers big-endian; Java ``RemotingCommand.encode`` and
``NettyDecoder``)::

    int32  length              = 4 + header_length + body_length (the prefix itself excluded)
    int32  header word         = serialize_type << 24 | header_length (24 bits)
    bytes  header              JSON (type 0) or RocketMQ binary (type 1)
    bytes  body                the rest of the frame

The binary header (Java ``RocketMQSerializable``)::

    int16 code, int8 language, int16 version, int32 opaque, int32 flag,
    int32 remark_length, remark (UTF-8),
    int32 ext_length, then ext_length bytes of (int16 key_length, key, int32 value_length, value)

Nothing here touches a socket: the host feeds received bytes to a `FrameDecoder`
(``_frame_decoder.py``: the stream, cut into frames decoded here) and writes what `encode`
returns. Errors are split as h11 splits them, under one `ProtocolError` base:
bytes from the peer that break the protocol raise `RemoteProtocolError`, after which a
decoder refuses further input and the host closes the connection, as Java's
``NettyDecoder`` does; a command this side builds or encodes that the protocol cannot carry
raises `LocalProtocolError` (also a ``ValueError``), and nothing is sent.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Mapping
from typing import Any, cast

import attrs

from ..._errors import RoutingError
from ..._frozen import FrozenMap, freeze_map
from ._codes import CURRENT_VERSION, LanguageCode, SerializeType
from ._header_cache import HeaderCache

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "HEADER_LENGTH_MASK",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "RemotingCommand",
    "decode_frame",
    "encode",
]

#: Bit 0 of ``flag``: the command is a response (Java ``RPC_TYPE``).
FLAG_RESPONSE = 1
#: Bit 1 of ``flag``: the request expects no response (Java ``RPC_ONEWAY``).
FLAG_ONEWAY = 2

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1
#: The 24 low bits of the header-length word: the header's length.
HEADER_LENGTH_MASK = 0xFFFFFF
_FIXED = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remark length
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_PREFIX = struct.Struct(">ii")
_LANGUAGE_BY_NAME = {lang.name: lang for lang in LanguageCode}


class ProtocolError(RoutingError):
    """The remoting protocol was broken; the message says what was wrong.

    The base of `RemoteProtocolError` (the peer's bytes) and `LocalProtocolError` (this
    side's command), as h11 splits them; ``except ProtocolError`` catches both.
    ``commands`` holds the commands a `FrameDecoder.feed` call decoded from the same input
    before the bad frame (Java processes those before closing the connection); it is
    empty for a local error. Raising one costs nothing beyond the message.
    """

    def __init__(self, message: str, *, commands: tuple[RemotingCommand, ...] = ()) -> None:
        super().__init__(message)
        self.commands = commands


class RemoteProtocolError(ProtocolError):
    """The peer's bytes broke the protocol: a bad length, header word or header, or a
    `FrameDecoder` fed again after such an error. The decoder is closed: close the
    connection (after processing ``commands``). Found as soon as the bad bytes arrive,
    at no extra cost."""


class LocalProtocolError(ProtocolError, ValueError):
    """This side asked for what the protocol cannot carry: a `RemotingCommand` field of
    the wrong type or range, or an `encode` that cannot be represented (a header over
    16 MiB, a code over 16 bits in the binary form, an unpaired surrogate). Nothing was
    built or sent; also a ``ValueError``. Raised by the O(fields) checks, at no extra
    cost."""


def _int32(value: Any) -> int:
    if (not isinstance(value, int) or isinstance(value, bool)
            or not _INT32_MIN <= value <= _INT32_MAX):
        raise LocalProtocolError(f"RemotingCommand int fields must be 32-bit signed integers, "
                            f"got {value!r:.40}")
    return int(value)


def _remark(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise LocalProtocolError(
            f"RemotingCommand.remark must be a string or None, got {value!r:.80}")
    return value


def _ext_fields(value: Any) -> FrozenMap[str, str]:
    table: FrozenMap[str, str] = freeze_map(value)
    for key, item in table.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise LocalProtocolError(
                f"RemotingCommand.ext_fields must map str to str, got {key!r:.40}: {item!r:.40}")
    return table


def _body(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise LocalProtocolError(
        f"RemotingCommand.body must be bytes, got {type(value).__name__}")


def _language(value: Any) -> LanguageCode:
    if isinstance(value, LanguageCode):
        return value
    if type(value) is int:
        try:
            return LanguageCode(value)
        except ValueError:
            return LanguageCode.OTHER
    if isinstance(value, str):
        return _LANGUAGE_BY_NAME.get(value, LanguageCode.OTHER)
    raise LocalProtocolError(
        f"RemotingCommand.language must be a LanguageCode, got {value!r:.40}")


@attrs.frozen(kw_only=True)
class RemotingCommand:
    """One remoting command, request or response (Java ``RemotingCommand``).

    ``ext_fields`` carries the request/response header fields as strings, as on the wire.
    An empty ``remark`` is stored as ``None`` and a missing body as ``b""``, because the wire
    cannot tell them apart. ``serialize_type`` says which header form `encode` writes; a
    decoded command keeps the form it arrived in. Unknown language codes become ``OTHER``.
    Construction checks every field, O(fields) (a `LocalProtocolError` names the bad one);
    the decoder and `make_response` build theirs unchecked, about 10x cheaper.

    >>> cmd = RemotingCommand(code=105, opaque=7, ext_fields={"topic": "TopicTest"})
    >>> decode_frame(memoryview(encode(cmd))[4:]) == cmd
    True
    >>> cmd.make_response(17, "no route").is_response
    True
    """

    code: int = attrs.field(converter=_int32)
    language: LanguageCode = attrs.field(default=LanguageCode.JAVA, converter=_language)
    version: int = attrs.field(default=0, converter=_int32)
    opaque: int = attrs.field(default=0, converter=_int32)
    flag: int = attrs.field(default=0, converter=_int32)
    remark: str | None = attrs.field(default=None, converter=_remark)
    ext_fields: FrozenMap[str, str] = attrs.field(factory=FrozenMap, converter=_ext_fields)
    body: bytes = attrs.field(default=b"", converter=_body,
                              repr=lambda b: f"<{len(b)} bytes>")
    serialize_type: SerializeType = attrs.field(
        default=SerializeType.JSON, converter=SerializeType)

    @property
    def is_response(self) -> bool:
        """Flag bit 0 (Java ``isResponseType``)."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """Flag bit 1 (Java ``isOnewayRPC``): the sender wants no response."""
        return bool(self.flag & FLAG_ONEWAY)

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        *,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """A response to this request: same ``opaque`` and header form, response flag set.

        Java's ``createResponseCommand`` plus ``writeResponse``'s opaque copy; the version is
        this name server's (`CURRENT_VERSION`, as ``NamesrvStartup`` sets it). O(fields).
        """
        return _trusted(_int32(code), LanguageCode.JAVA, CURRENT_VERSION, self.opaque,
                        FLAG_RESPONSE, None if remark is None else _remark(remark),
                        _ext_fields(ext_fields) if ext_fields else _EMPTY,
                        body if type(body) is bytes else _body(body), self.serialize_type)


_EMPTY: FrozenMap[str, str] = FrozenMap()
_FIELD_NAMES = tuple(a.name for a in attrs.fields(RemotingCommand))
#: The slot descriptors' setters, in field order: a direct ``member_descriptor.__set__``
#: per field costs about 40 % of ``object.__setattr__`` by name in a loop.
_SETTERS = tuple(RemotingCommand.__dict__[name].__set__ for name in _FIELD_NAMES)
_new = object.__new__


def _trusted(code: int, language: LanguageCode, version: int, opaque: int, flag: int,
             remark: str | None, ext_fields: FrozenMap[str, str], body: bytes,
             serialize_type: SerializeType) -> RemotingCommand:
    """Build a command from values already checked (the decoder's, `make_response`'s),
    skipping the converters: about 10x cheaper than the validated constructor. O(1)."""
    cmd = _new(RemotingCommand)
    s_code, s_lang, s_version, s_opaque, s_flag, s_remark, s_ext, s_body, s_kind = _SETTERS
    s_code(cmd, code)
    s_lang(cmd, language)
    s_version(cmd, version)
    s_opaque(cmd, opaque)
    s_flag(cmd, flag)
    s_remark(cmd, remark)
    s_ext(cmd, ext_fields)
    s_body(cmd, body)
    s_kind(cmd, serialize_type)
    return cmd


# --------------------------------------------------------------------------- encoding


def _utf8(text: str, what: str,
          error: type[ProtocolError] = LocalProtocolError) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(f"{what} is not encodable as UTF-8 ({exc.reason})") from None


_dump = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _json_header(cmd: RemotingCommand) -> bytes:
    # fastjson's field order (alphabetical); null fields and an absent ext map are omitted.
    # Assembled by hand: only the strings need JSON escaping (names are ASCII identifiers).
    ext = f'"extFields":{_dump(cmd.ext_fields.to_dict())},' if cmd.ext_fields else ""
    remark = f'"remark":{_dump(cmd.remark)},' if cmd.remark is not None else ""
    text = (f'{{"code":{cmd.code},{ext}"flag":{cmd.flag},"language":"{cmd.language.name}",'
            f'"opaque":{cmd.opaque},{remark}"serializeTypeCurrentRPC":'
            f'"{cmd.serialize_type.name}","version":{cmd.version}}}')
    return _utf8(text, "header")


def _binary_header(cmd: RemotingCommand) -> bytes:
    if not (_INT16_MIN <= cmd.code <= _INT16_MAX and _INT16_MIN <= cmd.version <= _INT16_MAX):
        raise LocalProtocolError(
            f"code {cmd.code} or version {cmd.version} does not fit the 16-bit fields of the "
            "ROCKETMQ binary header; use the JSON header")
    remark = _utf8(cmd.remark, "remark") if cmd.remark is not None else b""
    parts = [_FIXED.pack(cmd.code, int(cmd.language), cmd.version, cmd.opaque, cmd.flag,
                         len(remark)), remark, b""]
    ext_length = 0
    for key, value in cmd.ext_fields.items():
        k, v = _utf8(key, "ext field name"), _utf8(value, f"ext field {key!r}")
        if len(k) > _INT16_MAX:
            raise LocalProtocolError(f"ext field name of {len(k)} bytes exceeds the 16-bit length")
        parts += (_INT16.pack(len(k)), k, _INT32.pack(len(v)), v)
        ext_length += 6 + len(k) + len(v)
    parts[2] = _INT32.pack(ext_length)
    return b"".join(parts)


#: JSON headers without ext fields or remark, split around the opaque: (code, flag,
#: language, version) -> (the bytes before the opaque's digits, the bytes after).
_PLAIN_HEADERS: dict[tuple[int, int, LanguageCode, int], tuple[bytes, bytes]] = {}
_PLAIN_HEADERS_LIMIT = 256
#: Bodies up to this size take `_plain_json_frame` (the frame's length stays in range).
_PLAIN_BODY_MAX = 64 * 1024 * 1024


def _plain_json_frame(command: RemotingCommand) -> bytes:
    """`encode` of a JSON command without ext fields or remark (a SUCCESS to a heartbeat,
    a route read's answer): the header is a remembered prefix, the opaque's digits and a
    remembered suffix, byte for byte what `_json_header` writes. O(body) for the join."""
    key = (command.code, command.flag, command.language, command.version)
    parts = _PLAIN_HEADERS.get(key)
    if parts is None:
        if len(_PLAIN_HEADERS) >= _PLAIN_HEADERS_LIMIT:
            _PLAIN_HEADERS.clear()
        head, _, tail = _json_header(attrs.evolve(command, opaque=0, body=b"")).partition(
            b'"opaque":0,')
        parts = _PLAIN_HEADERS[key] = (head + b'"opaque":', b"," + tail)
    head, tail = parts
    digits = b"%d" % command.opaque
    size = len(head) + len(digits) + len(tail)
    body = command.body
    return b"".join((_PREFIX.pack(4 + size + len(body), size), head, digits, tail, body))


def encode(command: RemotingCommand) -> bytes:
    """The whole frame of ``command``, length prefix included, in its ``serialize_type``.

    Java ``RemotingCommand.encode``. Cost: O(header + body); a JSON command without ext
    fields or remark reuses its header's fixed parts (`_plain_json_frame`). Raises
    `LocalProtocolError` when the command cannot be represented (a header over 16 MiB, a
    code over 16 bits in the binary form, a string with an unpaired surrogate).
    """
    if (command.serialize_type is SerializeType.JSON and command.remark is None
            and not command.ext_fields and len(command.body) <= _PLAIN_BODY_MAX):
        return _plain_json_frame(command)
    if command.serialize_type is SerializeType.ROCKETMQ:
        header = _binary_header(command)
    else:
        header = _json_header(command)
    if len(header) > HEADER_LENGTH_MASK:
        raise LocalProtocolError(f"header of {len(header)} bytes exceeds the 24-bit header length")
    length = 4 + len(header) + len(command.body)
    if length > _INT32_MAX:
        raise LocalProtocolError(f"frame of {length} bytes exceeds the 32-bit length field")
    word = (int(command.serialize_type) << 24) | len(header)
    return b"".join((_PREFIX.pack(length, word), header, command.body))


# --------------------------------------------------------------------------- decoding


def _text(raw: bytes | memoryview) -> str:
    # Java's readCharSequence replaces malformed UTF-8 rather than failing.
    return str(raw, "utf-8", "replace")  # reads the buffer in place: no bytes copy


def _decode_binary_header(frame: memoryview, start: int, end: int,
                          ) -> tuple[int, int, int, int, int, str | None, dict[str, str]]:
    size = end - start
    if size < _FIXED.size + 4:
        raise RemoteProtocolError(f"ROCKETMQ header of {size} bytes is shorter than its "
                            f"{_FIXED.size + 4}-byte fixed part")
    code, language, version, opaque, flag, remark_length = _FIXED.unpack_from(frame, start)
    pos = start + _FIXED.size
    if remark_length < 0 or remark_length > end - pos - 4:
        raise RemoteProtocolError(
            f"ROCKETMQ header remark length {remark_length} overruns the header")
    remark = _text(frame[pos:pos + remark_length]) if remark_length else None
    pos += remark_length
    (ext_length,) = _INT32.unpack_from(frame, pos)
    pos += 4
    if ext_length < 0 or ext_length != end - pos:
        raise RemoteProtocolError(f"ROCKETMQ header ext-fields length {ext_length} does not "
                                  f"match the {end - pos} bytes left in the header")
    ext: dict[str, str] = {}
    while pos < end:
        if end - pos < 2:
            raise RemoteProtocolError("ROCKETMQ header ext field name length is truncated")
        (key_length,) = _INT16.unpack_from(frame, pos)
        pos += 2
        if key_length < 0 or key_length > end - pos - 4:
            raise RemoteProtocolError(f"ROCKETMQ header ext field name length {key_length} "
                                      "overruns the header")
        key = _text(frame[pos:pos + key_length])
        pos += key_length
        (value_length,) = _INT32.unpack_from(frame, pos)
        pos += 4
        if value_length < 0 or value_length > end - pos:
            raise RemoteProtocolError(f"ROCKETMQ header ext field {key!r:.40} value length "
                                f"{value_length} overruns the header")
        ext[key] = _text(frame[pos:pos + value_length])
        pos += value_length
    return code, language, version, opaque, flag, remark, ext


def _json_int(doc: Mapping[str, Any], key: str, default: int | None) -> int:
    value = doc.get(key, default)
    if value is None or type(value) is not int or not _INT32_MIN <= value <= _INT32_MAX:
        raise RemoteProtocolError(f"malformed header JSON: {key!r} must be a 32-bit integer, "
                            f"got {value!r:.40}")
    return value


def _ext_value(key: str, value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise RemoteProtocolError(f"malformed header JSON: extFields[{key!r:.40}] is not a scalar")


#: The standard decoder's scanner (json.scanner's C one where built): text, start ->
#: (value, end), StopIteration(start) when no value starts there.
_scan_once: Callable[[str, int], tuple[Any, int]] = (
    json.JSONDecoder().scan_once)  # type: ignore[attr-defined]  # not in typeshed
#: json.decoder.WHITESPACE; it matches at any position (possibly the empty string)
_blank = cast(Callable[[str, int], "re.Match[str]"], re.compile(r"[ \t\n\r]*").match)


def _loads(text: str) -> Any:
    """``json.loads(text)`` for a str, without its three Python-level calls: the
    standard decoder's scanner on the text between leading and trailing whitespace.
    Raises `json.JSONDecodeError` (a ValueError) as ``json.loads`` does. O(len(text))."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        doc, end = _scan_once(text, _blank(text, 0).end())
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    end = _blank(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return doc


def _decode_json_header(raw: memoryview | bytes,
                        ) -> tuple[int, LanguageCode, int, int, int, str | None, dict[str, str]]:
    text = _text(raw)
    try:
        doc = _loads(text)
    except (ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"malformed header JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise RemoteProtocolError(f"malformed header JSON: expected an object, got {text[:60]!r}")
    # The checks inline the common case (a plain int, a known language name) and call
    # the checking helpers, in the same order, for anything else: same errors, fewer calls.
    code = doc.get("code")
    if type(code) is not int or not _INT32_MIN <= code <= _INT32_MAX:
        code = _json_int(doc, "code", None)
    language = doc.get("language", "JAVA")
    if type(language) is str:
        lang = _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER)
    elif not isinstance(language, int) or isinstance(language, bool):
        raise RemoteProtocolError(f"malformed header JSON: language {language!r:.40}")
    else:
        lang = _language(language)
    remark = doc.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemoteProtocolError(
            f"malformed header JSON: remark must be a string, got {remark!r:.40}")
    raw_ext = doc.get("extFields")
    if raw_ext is not None and not isinstance(raw_ext, dict):
        raise RemoteProtocolError("malformed header JSON: extFields must be an object")
    ext: dict[str, str] = {}
    for key, value in (raw_ext or {}).items():
        if type(value) is str:  # nearly every field: no call
            ext[key] = value
        else:
            item = _ext_value(key, value)
            if item is not None:
                ext[key] = item
    if "\\u" in text or "\\U" in text:  # escapes may smuggle in unpaired surrogates
        for item in (remark or "", *ext, *ext.values()):
            _utf8(item, "header JSON string", RemoteProtocolError)
    version, opaque, flag = doc.get("version", 0), doc.get("opaque", 0), doc.get("flag", 0)
    if not (type(version) is int and type(opaque) is int and type(flag) is int
            and _INT32_MIN <= version <= _INT32_MAX and _INT32_MIN <= opaque <= _INT32_MAX
            and _INT32_MIN <= flag <= _INT32_MAX):
        version, opaque, flag = (_json_int(doc, "version", 0), _json_int(doc, "opaque", 0),
                                 _json_int(doc, "flag", 0))
    return (code, lang, version, opaque, flag, remark, ext)


def decode_frame(frame: memoryview, memo: HeaderCache | None = None) -> RemotingCommand:
    """Decode one frame without its length prefix (Java ``RemotingCommand.decode``); with
    ``memo`` (the connection's), a JSON header it remembers but for the opaque is not
    parsed again (`HeaderCache`)."""
    if len(frame) < 4:
        raise RemoteProtocolError(f"frame of {len(frame)} bytes has no header-length word")
    (word,) = _INT32.unpack_from(frame, 0)
    kind, header_length = (word >> 24) & 0xFF, word & HEADER_LENGTH_MASK
    if header_length > len(frame) - 4:
        raise RemoteProtocolError(f"header length {header_length} is longer than the frame "
                            f"({len(frame) - 4} bytes after the header-length word)")
    end = 4 + header_length
    if kind == SerializeType.JSON and memo is not None:
        header = bytes(frame[4:end])
        found = memo.find(header)
        if found is not None and _INT32_MIN <= found[1] <= _INT32_MAX:
            (code, language, version, flag, remark, fields), opaque = found
            return _trusted(code, language, version, opaque, flag, remark, fields,
                            memo.body(frame[end:]), SerializeType.JSON)
        code, language, version, opaque, flag, remark, ext = _decode_json_header(header)
        fields = _adopt(ext) if ext else _EMPTY
        memo.remember(header, opaque, (code, language, version, flag, remark or None, fields))
        return _trusted(code, language, version, opaque, flag, remark or None, fields,
                        memo.body(frame[end:]), SerializeType.JSON)
    if kind == SerializeType.JSON:
        code, language, version, opaque, flag, remark, ext = _decode_json_header(frame[4:end])
        serialize_type = SerializeType.JSON
    elif kind == SerializeType.ROCKETMQ:
        code, lang, version, opaque, flag, remark, ext = _decode_binary_header(frame, 4, end)
        language = _language(lang)
        serialize_type = SerializeType.ROCKETMQ
    else:
        raise RemoteProtocolError(f"unknown serialize type {kind} in the header-length word")
    body = bytes(frame[end:]) if memo is None else memo.body(frame[end:])
    return _trusted(code, language, version, opaque, flag, remark or None,
                    _adopt(ext) if ext else _EMPTY, body, serialize_type)


_FROZEN_DATA = FrozenMap.__dict__["_data"].__set__
_FROZEN_HASH = FrozenMap.__dict__["_hash"].__set__


def _adopt(fields: dict[str, str]) -> FrozenMap[str, str]:
    """A `FrozenMap` of ``fields``, a dict the decoder just built and nobody else holds,
    without copying it. O(1)."""
    frozen: FrozenMap[str, str] = _new(FrozenMap)
    _FROZEN_DATA(frozen, fields)
    _FROZEN_HASH(frozen, None)
    return frozen
