"""The error paths of `routing.remoting`'s public names: every exception raised on purpose
is a `routing.RoutingError` (with ``ValueError`` kept where callers catch it), names what was
wrong, and the codec keeps this side's misuse (`LocalProtocolError`) apart from the peer's
bytes (`RemoteProtocolError`), both under `ProtocolError`."""

from __future__ import annotations

import ast
import asyncio
import builtins
import importlib
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import routing as r
from routing import InvalidRequest, RoutingError
from routing.remoting import (
    ConfigError,
    FrameDecoder,
    KVConfigError,
    KVStore,
    LocalProtocolError,
    NameServerHost,
    NameServerProcessor,
    NamesrvConfig,
    ProtocolError,
    RegisterBrokerBody,
    RemoteProtocolError,
    RemotingCommand,
    SerializeType,
    decode,
    decode_kv_table,
    decode_route,
    encode,
    load_properties_file,
    parse_properties,
    run_server,
    serve,
)

REMOTING = Path(r.__file__).parent / "remoting"


def _frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _processor() -> NameServerProcessor:
    return NameServerProcessor(r.RouteInfoManager(clock=r.ManualClock(start_ms=0)))


def _serve_twice_configured() -> None:
    asyncio.run(serve("127.0.0.1", 0, settings=NamesrvConfig(),
                      config=r.RoutingConfig(scan_interval_ms=7)))


def _serve_manager_and_other_config() -> None:
    manager = r.RouteInfoManager()
    asyncio.run(serve("127.0.0.1", 0, manager=manager,
                      config=r.RoutingConfig(scan_interval_ms=7)))


#: (call, the error class, the ``ValueError`` it must also be or not, a word of the message)
CASES: list[tuple[str, Callable[[], object], type[RoutingError], bool, str]] = [
    ("command code not an int", lambda: RemotingCommand(code="x"),  # type: ignore[arg-type]
     LocalProtocolError, True, "32-bit"),
    ("command ext field not a str", lambda: RemotingCommand(code=1, ext_fields={"a": 1}),
     LocalProtocolError, True, "ext_fields"),
    ("command body not bytes", lambda: RemotingCommand(code=1, body="text"),  # type: ignore[arg-type]
     LocalProtocolError, True, "body"),
    ("binary header code over 16 bits",
     lambda: encode(RemotingCommand(code=70_000, serialize_type=SerializeType.ROCKETMQ)),
     LocalProtocolError, True, "16-bit"),
    ("remark with an unpaired surrogate",
     lambda: encode(RemotingCommand(code=1, remark="\ud800")), LocalProtocolError, True,
     "UTF-8"),
    ("frame shorter than its header word", lambda: decode(struct.pack(">i", 1) + b"x"),
     RemoteProtocolError, False, "header-length"),
    ("header JSON not an object", lambda: decode(_frame(b"[1]")), RemoteProtocolError, False,
     "expected an object"),
    ("peer's header smuggles a surrogate",
     lambda: decode(_frame(b'{"code":1,"remark":"\\ud800"}')), RemoteProtocolError, False,
     "UTF-8"),
    ("decoder frame limit below 8", lambda: FrameDecoder(4), InvalidRequest, True,
     "max_frame_bytes"),
    ("host scan interval 0", lambda: NameServerHost(_processor(), scan_interval_ms=0),
     InvalidRequest, True, "scan_interval_ms"),
    ("host queue capacity 0", lambda: NameServerHost(_processor(), client_queue_capacity=0),
     InvalidRequest, True, "capacity"),
    ("an unknown event loop", lambda: run_server("127.0.0.1", 0, loop="tokio"),
     InvalidRequest, True, "tokio"),
    ("settings and another config", _serve_twice_configured, InvalidRequest, True,
     "settings or config"),
    ("a manager and another config", _serve_manager_and_other_config, InvalidRequest, True,
     "manager or config"),
    ("a malformed \\u escape", lambda: parse_properties("key=\\uZZZZ"), ConfigError, True,
     "escape"),
    ("a setting that is not a number",
     lambda: NamesrvConfig().update([("scanNotActiveBrokerInterval", "soon")]), ConfigError,
     True, "scanNotActiveBrokerInterval"),
    ("a route body that is not JSON", lambda: decode_route(b"{"), InvalidRequest, True,
     "TopicRouteData"),
    ("a KV table with a number", lambda: decode_kv_table(b'{"table":{"k":1}}'),
     InvalidRequest, True, "KVTable"),
    ("a registration body that is a list", lambda: RegisterBrokerBody.decode(b"[]"),
     InvalidRequest, True, "RegisterBrokerBody"),
]


@pytest.mark.parametrize(("call", "error", "value_error", "word"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_public_error_paths_raise_a_routing_error_naming_what_was_wrong(
        call: Callable[[], object], error: type[RoutingError], value_error: bool,
        word: str) -> None:
    with pytest.raises(error, match=word) as caught:
        call()
    assert isinstance(caught.value, RoutingError)
    assert isinstance(caught.value, ValueError) is value_error


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.properties"
    with pytest.raises(ConfigError, match=r"missing\.properties") as config:
        load_properties_file(missing)
    assert config.value.source == str(missing)
    bad = tmp_path / "kv.json"
    bad.write_text("[1, 2]")
    with pytest.raises(KVConfigError, match=r"kv\.json") as kv:
        KVStore.open(bad)
    assert isinstance(kv.value, RoutingError) and kv.value.path == str(bad)


def test_local_and_remote_protocol_errors_share_the_base() -> None:
    assert issubclass(LocalProtocolError, ProtocolError)
    assert issubclass(RemoteProtocolError, ProtocolError)
    assert not issubclass(RemoteProtocolError, LocalProtocolError)
    assert not issubclass(LocalProtocolError, RemoteProtocolError)
    assert issubclass(ProtocolError, RoutingError)
    with pytest.raises(ProtocolError):  # ``except ProtocolError`` keeps catching both
        RemotingCommand(code=2**40)
    with pytest.raises(ProtocolError):
        decode(b"\xff\xff\xff\xff")


def test_a_bad_frame_after_good_ones_is_remote_and_closes_the_decoder() -> None:
    good = encode(RemotingCommand(code=105, opaque=3))
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError, match="negative frame length") as caught:
        decoder.feed(good + b"\xff\xff\xff\xff")
    assert [c.opaque for c in caught.value.commands] == [3]
    assert decoder.closed
    with pytest.raises(RemoteProtocolError, match="decoder closed") as again:
        decoder.feed(good)
    assert again.value.commands == ()


def test_a_local_error_builds_and_sends_nothing() -> None:
    with pytest.raises(LocalProtocolError) as caught:
        encode(RemotingCommand(code=1, ext_fields={"k": "\udc80"}))
    assert caught.value.commands == ()


def _raised_names(path: Path) -> list[tuple[int, str]]:
    """``raise Name(...)`` statements, but for the attribute protocol's AttributeError in a
    module's ``__getattr__`` (the face's names loaded on first use), as tests/test_errors.py
    allows it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    protocol = {id(node) for top in tree.body
                if isinstance(top, ast.FunctionDef) and top.name == "__getattr__"
                for node in ast.walk(top)
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                and isinstance(node.exc.func, ast.Name) and node.exc.func.id == "AttributeError"}
    return [(node.lineno, node.exc.func.id) for node in ast.walk(tree)
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
            and isinstance(node.exc.func, ast.Name) and id(node) not in protocol]


def test_every_exception_remoting_raises_by_name_is_a_routing_error() -> None:
    """Each ``raise Name(...)`` in the package names a `RoutingError` subclass (the one
    internal exception, ``json.JSONDecodeError`` inside the codec's fast JSON reader, is
    raised by attribute and caught there)."""
    checked: dict[str, Any] = {}
    for path in sorted(REMOTING.rglob("*.py")):
        parts = path.relative_to(REMOTING.parent.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = importlib.import_module(name)
        for line, raised in _raised_names(path):
            value = getattr(module, raised, None) or getattr(builtins, raised, None)
            if value is None:  # a parameter or local (typed by mypy), not a global name
                continue
            checked[f"{path.name}:{line}"] = value
            assert isinstance(value, type) and issubclass(value, RoutingError), (
                f"{path.name}:{line} raises {raised}")
    assert len(checked) > 40  # the walk saw the package's raise statements
