"""Every exception `routing` raises on purpose derives from `routing.RoutingError`.

Two checks. The first walks the source with `ast`: every ``raise X(...)`` / ``raise X`` is
resolved in its module and must be a `RoutingError` subclass, unless it re-raises a caught
error or is one of the built-in exceptions listed below with the protocol that asks for it.
The second calls the public API with bad input and checks the error's class, its ``field``
and that the message names the field and the value.
"""

from __future__ import annotations

import ast
import importlib
import io
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import routing as r

SRC = Path(__file__).resolve().parent.parent / "src" / "routing"

#: Built-in exceptions allowed anywhere, and why.
ALLOWED_EVERYWHERE = {
    "NotImplementedError": "an abstract method, or a case deliberately not supported",
    "SystemExit": "the process-exit protocol (the command line without its extra)",
    "click.ClickException": "click's own error: click prints it and exits with status 1",
    "click.BadParameter": "click's own error: click prints it as a usage error (status 2)",
    "click.UsageError": "click's own error: click prints it as a usage error (status 2)",
}
#: Built-in exceptions allowed in one kind of function, the protocol that asks for them.
ALLOWED_IN = {
    ("KeyError", "__getitem__"): "the mapping protocol: a missing key",
    ("KeyError", "__delitem__"): "the mapping protocol: deleting a missing key",
    ("KeyError", "del_member"): "`Group.del_member` is `del addrs[id]` on members kept "
                                "inline (internal to the core's state; mapping semantics)",
    ("AttributeError", "__getattr__"): "the attribute protocol: a module without that name",
    ("AttributeError", "__setattr__"): "frozen values refuse assignment as attrs' do",
    ("json.JSONDecodeError", "_loads"): "the wire codec's private `json.loads` keeps its "
                                        "contract; its one caller turns it into "
                                        "RemoteProtocolError",
    ("error", "_utf8"): "the codec's helper raises the ProtocolError subclass its caller "
                        "names (`error: type[ProtocolError]`, Local or Remote)",
}


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _raises(tree: ast.AST) -> Iterator[tuple[ast.Raise, str]]:
    """Every raise with a value, and the name of the innermost function around it."""
    def walk(node: ast.AST, function: str) -> Iterator[tuple[ast.Raise, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Raise) and child.exc is not None:
                yield child, function
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) \
                else function
            yield from walk(child, inner)
    return walk(tree, "<module>")


def _resolve(module: Any, dotted: str) -> Any:
    """``dotted`` (``X`` or ``a.b.X``) looked up in the module's namespace, or None."""
    head, *rest = dotted.split(".")
    value = getattr(module, head, None)
    if value is None:
        value = getattr(__builtins__, head, None) if not isinstance(__builtins__, dict) \
            else __builtins__.get(head)
    for part in rest:
        value = getattr(value, part, None)
    return value


def _deferred_imports(tree: ast.AST, package: str) -> dict[str, Any]:
    """The names imported inside functions (``from ._errors import X``), resolved."""
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = importlib.import_module("." * node.level + (node.module or ""), package)
            for alias in node.names:
                found[alias.asname or alias.name] = getattr(source, alias.name, None)
    return found


def _resolve_in(names: dict[str, Any], dotted: str) -> Any:
    head, *rest = dotted.split(".")
    value = names.get(head)
    for part in rest:
        value = getattr(value, part, None)
    return value


def _problems(path: Path, root: Path = SRC) -> list[str]:
    name = _module_name(path, root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the moved-path aliases warn
        try:
            module = importlib.import_module(name)
        except (ModuleNotFoundError, SystemExit) as exc:  # an optional extra not installed
            missing = exc if isinstance(exc, ModuleNotFoundError) else exc.__cause__
            if not isinstance(missing, ModuleNotFoundError) \
                    or (missing.name or "routing").startswith("routing"):
                raise
            pytest.skip(f"{name} needs {missing.name}, not installed")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deferred: dict[str, Any] | None = None
    problems = []
    for node, function in _raises(tree):
        exc = node.exc
        assert exc is not None
        called = isinstance(exc, ast.Call)
        target = exc.func if isinstance(exc, ast.Call) else exc
        dotted = ast.unparse(target)
        where = f"{path.relative_to(root.parent)}:{node.lineno} ({function})"
        cls = _resolve(module, dotted)
        if cls is None:
            if deferred is None:
                deferred = _deferred_imports(tree, package)
            cls = _resolve_in(deferred, dotted)
        if cls is None:
            if not called:
                continue  # ``raise exc``: a caught error, raised again
            if dotted.startswith("type(") or (dotted, function) in ALLOWED_IN:
                continue  # ``raise type(exc)(...)``: a caught error's own class, again
            problems.append(f"{where}: raise {dotted}(...) of a class not found in the module")
            continue
        if not isinstance(cls, type):
            if not called:
                continue  # a module-level error instance raised again
            problems.append(f"{where}: raise {dotted}(...) is not a class")
            continue
        if issubclass(cls, r.RoutingError):
            continue
        if dotted in ALLOWED_EVERYWHERE or (dotted, function) in ALLOWED_IN:
            continue
        problems.append(f"{where}: raise {dotted} is not a routing.RoutingError")
    return problems


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(SRC)))
def test_every_error_raised_on_purpose_is_a_routing_error(path: Path) -> None:
    assert _problems(path) == []


def test_the_checker_finds_a_bare_builtin_error(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # A planted module: a ValueError and a KeyError outside __getitem__ are reported; a
    # RoutingError, a re-raise and a KeyError in __getitem__ are not.
    pkg = tmp_path / "routing_planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bad.py").write_text(
        "from routing import InvalidRequest\n"
        "def f(x):\n"
        "    if x:\n"
        "        raise ValueError('x')\n"
        "    try:\n"
        "        raise InvalidRequest('y', field='x', value=x)\n"
        "    except InvalidRequest as exc:\n"
        "        raise exc\n"
        "class M:\n"
        "    def __getitem__(self, k):\n"
        "        raise KeyError(k)\n"
        "    def get(self, k):\n"
        "        raise KeyError(k)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = _problems(pkg / "bad.py", pkg)
    assert [p.split(": ", 1)[1] for p in found] == [
        "raise ValueError is not a routing.RoutingError",
        "raise KeyError is not a routing.RoutingError",
    ]
    assert ":4 (f)" in found[0] and ":13 (get)" in found[1]


def test_every_allowance_still_names_a_raise_in_the_source() -> None:
    # an allowance nobody needs any more is removed, not kept "just in case"
    used: set[object] = set()
    for path in _sources():
        for node, function in _raises(ast.parse(path.read_text(encoding="utf-8"))):
            assert node.exc is not None
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            dotted = ast.unparse(target)
            used.update({dotted, (dotted, function)})
    assert set(ALLOWED_IN) <= used, set(ALLOWED_IN) - used
    assert {k for k in ALLOWED_EVERYWHERE if not k.startswith("click.")} <= used


# --------------------------------------------------------------------------- error paths


def _manager() -> r.RouteInfoManager:
    return r.RouteInfoManager(clock=r.ManualClock(start_ms=0))


def _registered_manager() -> r.RouteInfoManager:
    manager = _manager()
    manager.register(r.Registration(cluster="c", broker_name="b", broker_id=0,
                                    broker_addr="10.0.0.1:10911",
                                    topics={t: r.TopicConfig(topic_name=t) for t in "TU"}))
    return manager


def _recorder_on_used_manager() -> Any:
    from routing.journal import JournalRecorder
    return JournalRecorder(_registered_manager(), io.StringIO(), nameserver_id="ns-0")


def _open_journal_bad_mode() -> Any:
    from routing.journal import open_journal
    return open_journal("journal.jsonl", mode="x")


def _replay_not_an_entry() -> Any:
    from routing.journal import Replayer
    return Replayer().apply("not an entry")  # type: ignore[arg-type]


def _next_tick_zero_period() -> Any:
    from routing.heartbeat import next_tick_ms
    return next_tick_ms(0, 0, 10)


def _broker_config_zero_period() -> Any:
    from routing.heartbeat import BrokerConfig
    return BrokerConfig(cluster="c", broker_name="b", broker_id=0,
                        broker_addr="10.0.0.1:10911", register_period_ms=0)


def _sim(**kwargs: Any) -> Any:
    from routing.sim import SimConfig
    return SimConfig(**kwargs)


def _crash_before_zero() -> Any:
    from routing.sim import Crash
    return Crash(at_ms=-1, group=0)


def _fake(**kwargs: Any) -> Any:
    from routing.testing import FakeNameServer
    return FakeNameServer(**kwargs)


def _fake_tick_back() -> Any:
    return _fake().tick(-5)


def _fake_delete_unknown_topic() -> Any:
    return _fake().broker(name="broker-a", topics=["T"]).delete_topic("Nope")


def _fleet_unknown_group() -> Any:
    from routing.testing import Fleet
    return Fleet(groups=(), topics=()).group("broker-z")


def _apply_not_an_operation() -> Any:
    from routing.testing import apply_operation
    clock = r.ManualClock()
    return apply_operation(r.RouteInfoManager(clock=clock), "scan", clock=clock)  # type: ignore[arg-type]


def _advance_back() -> Any:
    from routing.testing import AdvanceOp
    return AdvanceOp(ms=-1)


def _names_min_size() -> Any:
    from routing.testing import strategies as rst
    return rst.names(min_size=0)


def _strategy_plain_value() -> Any:
    from routing.testing import strategies as rst
    return rst.topic_configs(queue_nums=4)  # type: ignore[arg-type]


def _parse_duration() -> Any:
    pytest.importorskip("click", reason="the command line needs the cli extra")
    from routing.cli._simulate import parse_duration_ms
    return parse_duration_ms("soon")


#: (what is called, the error class, its field, the offending value)
ERROR_PATHS: list[tuple[str, Callable[[], Any], type[r.RoutingError], str, object]] = [
    ("ManualClock start_ms < 0", lambda: r.ManualClock(start_ms=-1),
     r.InvalidRequest, "start_ms", -1),
    ("ManualClock.advance back", lambda: r.ManualClock().advance(-5),
     r.InvalidRequest, "ms", -5),
    ("ManualClock.advance float", lambda: r.ManualClock().advance(1.5),  # type: ignore[arg-type]
     r.InvalidType, "ms", 1.5),
    ("ManualClock.set back", lambda: r.ManualClock(start_ms=10).set(5),
     r.InvalidRequest, "ms", 5),
    ("RouteInfoManager config", lambda: r.RouteInfoManager(config="fast"),  # type: ignore[arg-type]
     r.InvalidRequest, "config", "fast"),
    ("TopicConfig name", lambda: r.TopicConfig(topic_name="no spaces"),
     r.InvalidRequest, "TopicConfig.topic_name", "no spaces"),
    ("Registration addr", lambda: r.Registration(cluster="c", broker_name="b", broker_id=0,
                                                 broker_addr="nowhere"),
     r.InvalidRequest, "Registration.broker_addr", "nowhere"),
    ("RoutingConfig scan", lambda: r.RoutingConfig(scan_interval_ms=0),
     r.InvalidRequest, "RoutingConfig.scan_interval_ms", 0),
    ("register not a Registration", lambda: _manager().register("b"),  # type: ignore[arg-type]
     r.InvalidRequest, "registration", "b"),
    ("heartbeat addr", lambda: _manager().heartbeat(cluster="c", broker_addr="x"),
     r.InvalidRequest, "broker_addr", "x"),
    ("delete_topic name", lambda: _manager().delete_topic("a topic"),
     r.InvalidRequest, "topic", "a topic"),
    ("DataVersion.from_json", lambda: r.DataVersion.from_json({"counter": "one"}),
     r.InvalidRequest, "DataVersion.counter", "one"),
    ("JournalRecorder used manager", _recorder_on_used_manager,
     r.InvalidRequest, "manager", "RouteInfoManager"),
    ("open_journal mode", _open_journal_bad_mode, r.InvalidRequest, "mode", "x"),
    ("Replayer.apply not an entry", _replay_not_an_entry,
     r.InvalidType, "entry", "not an entry"),
    ("next_tick_ms period", _next_tick_zero_period, r.InvalidRequest, "period_ms", 0),
    ("BrokerConfig period", _broker_config_zero_period,
     r.InvalidRequest, "BrokerConfig.register_period_ms", 0),
    ("SimConfig loss_rate", lambda: _sim(loss_rate=2.0),
     r.InvalidRequest, "SimConfig.loss_rate", 2.0),
    ("SimConfig fault profile", lambda: _sim(faults="meteor"),
     r.InvalidRequest, "faults", "meteor"),
    ("SimConfig groups", lambda: _sim(groups=0), r.InvalidRequest, "SimConfig.groups", 0),
    ("Crash at_ms", _crash_before_zero, r.InvalidRequest, "Crash.at_ms", -1),
    ("FakeNameServer scan interval", lambda: _fake(scan_interval_ms=0),
     r.InvalidRequest, "scan_interval_ms", 0),
    ("FakeNameServer clock and start", lambda: _fake(clock=r.ManualClock(), start_ms=5),
     r.InvalidRequest, "start_ms", 5),
    ("FakeNameServer.tick back", _fake_tick_back, r.InvalidRequest, "ms", -5),
    ("FakeBroker.delete_topic unknown", _fake_delete_unknown_topic, KeyError, "topic", "Nope"),
    ("Fleet.group unknown", _fleet_unknown_group, KeyError, "broker_name", "broker-z"),
    ("apply_operation not an operation", _apply_not_an_operation,
     r.InvalidType, "operation", "scan"),
    ("AdvanceOp back", _advance_back, r.InvalidRequest, "AdvanceOp.ms", -1),
    ("strategies names min_size", _names_min_size, r.InvalidRequest, "min_size", 0),
    ("strategies plain value", _strategy_plain_value, r.InvalidType, "queue_nums", 4),
    ("routing simulate --duration", _parse_duration, r.InvalidRequest, "duration", "soon"),
]


@pytest.mark.parametrize(("call", "error", "field", "value"),
                         [pytest.param(*row[1:], id=row[0]) for row in ERROR_PATHS])
def test_public_error_paths_name_the_field_and_value(call: Callable[[], Any], error: type,
                                                     field: str, value: object) -> None:
    with pytest.raises(r.RoutingError) as info:
        call()
    exc = info.value
    assert isinstance(exc, error), type(exc).__mro__
    assert exc.field == field
    message = str(exc)
    assert field.rpartition(".")[2] in message, message
    assert repr(value) in message or str(value) in message, message
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        assert exc.value == value or value in repr(exc.value)
