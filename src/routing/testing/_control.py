"""The HTTP + JSON control API of ``routing fake`` (in the spirit of WireMock's ``/__admin``
and moto's ``/moto-api``): a test in any language moves the clock, adds brokers and faults,
stops name servers and reads the state and event log of a `FakeFleet`.

Standard library only (``http.server``, one thread per request). Every request runs under
one lock, so each is one step against the fakes; a bad request is answered 4xx with
``{"error": ..., "field": ..., "value": ...}`` and changes nothing. Requests are small JSON
objects: bodies over 1 MiB are refused (413). Every endpoint, with its request and answer,
is in docs/testing-clients.md.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .._errors import InvalidRequest
from .._validate import check_int
from ..remoting import RequestCode
from ._fake import FakeNameServer
from ._faults import _code, fault_from_json
from ._fleet import FakeFleet, FleetError
from ._wire import check_loopback

__all__ = ["ControlServer", "start_control"]

MAX_BODY_BYTES = 1 << 20
_Json = dict[str, Any]
_Handler = Callable[[FakeFleet, tuple[str, ...], Mapping[str, str], _Json], tuple[int, Any]]
_ROUTES: list[tuple[str, re.Pattern[str], _Handler]] = []


def _route(method: str, pattern: str) -> Callable[[_Handler], _Handler]:
    def register(handler: _Handler) -> _Handler:
        _ROUTES.append((method, re.compile(f"^{pattern}$"), handler))
        return handler
    return register


# --------------------------------------------------------------------------- reading


def _ns_json(fleet: FakeFleet, index: int, ns: FakeNameServer) -> _Json:
    wire = ns.wire
    live = ns.manager.live_brokers() if ns.running else {}
    return {
        "index": index, "name": ns.name, "address": None if wire is None else wire.address,
        "running": ns.running, "frozen": bool(wire and wire.frozen),
        "live_brokers": [{"cluster": k.cluster, "addr": k.addr,
                          "last_update_ms": v.last_update_timestamp,
                          "timeout_ms": v.heartbeat_timeout_ms} for k, v in live.items()],
        "topics": list(ns.manager.all_topics()) if ns.running else [],
        "connections": [c.to_json() for c in wire.connections()] if wire else [],
        "faults": [f.to_json() | {"hits": wire.faults.hits(f)} for f in wire.faults.rules]
        if wire else [],
        "held_replies": wire.held if wire else 0,
    }


def _broker_json(addr: str, handles: list[Any]) -> _Json:
    first = handles[0]
    return {"addr": addr, "name": first.name, "cluster": first.cluster,
            "broker_id": first.broker_id,
            "nameservers": [h.server.name for h in handles],
            "states": {h.server.name: h.state for h in handles},
            "topics": sorted(first.topics)}


@_route("GET", "/health")
def _health(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
            ) -> tuple[int, Any]:
    return 200, {"ok": True, "now_ms": fleet.clock.now_ms()}


@_route("GET", "/state")
def _state(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
           ) -> tuple[int, Any]:
    return 200, {"now_ms": fleet.clock.now_ms(), "resets": fleet.resets,
                 "nameservers": [_ns_json(fleet, i, ns) for i, ns in enumerate(fleet.servers)],
                 "brokers": [_broker_json(a, h) for a, h in fleet.brokers.items()]}


@_route("GET", "/events")
def _events(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
            ) -> tuple[int, Any]:
    _known_query(q, ("nameserver", "since", "kind"))
    if "nameserver" in q:
        chosen = fleet.server(q["nameserver"])
        servers = [(fleet.servers.index(chosen), chosen)]
    else:
        servers = list(enumerate(fleet.servers))
    since = 0
    if "since" in q:
        if "nameserver" not in q:
            raise FleetError("since counts one name server's events: give nameserver too",
                             field="since", value=q["since"])
        since = _query_int(q, "since", low=0)
    out = []
    for index, ns in servers:
        for seq, event in enumerate(ns.events):
            if seq >= since and ("kind" not in q or event.kind == q["kind"]):
                out.append({"nameserver": index, "seq": seq, "at_ms": event.at_ms,
                            "kind": event.kind, "detail": event.detail, "broker": event.broker})
    out.sort(key=lambda e: (e["at_ms"], e["nameserver"], e["seq"]))
    return 200, {"events": out}


@_route("GET", "/routes/([^/]+)")
def _route_of(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
              ) -> tuple[int, Any]:
    _known_query(q, ("nameserver",))
    ns = fleet.server(q.get("nameserver", "0"))
    if not ns.running:
        raise FleetError(f"{ns.name} is stopped", field="nameserver",
                         value=q.get("nameserver", "0"), status=409)
    assert ns.wire is not None
    route = ns.wire.view_route(args[0])
    return 200, {"topic": args[0], "nameserver": ns.name, "frozen": ns.wire.frozen,
                 "route": None if route is None else route.to_json()}


@_route("GET", "/requests")
def _requests(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
              ) -> tuple[int, Any]:
    _known_query(q, ("nameserver", "code"))
    ns = fleet.server(q.get("nameserver", "0"))
    code = None if "code" not in q else _code(RequestCode, "code", q["code"])
    assert ns.wire is not None
    return 200, {"requests": [r.to_json() for r in ns.wire.requests(code)]}


# --------------------------------------------------------------------------- time


@_route("POST", "/clock/advance")
def _advance(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
             ) -> tuple[int, Any]:
    _known_body(body, ("ms",))
    ms = check_int("ms", body.get("ms"), low=0)
    return 200, {"now_ms": fleet.clock.advance(ms)}


@_route("POST", "/clock/set")
def _set(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
         ) -> tuple[int, Any]:
    _known_body(body, ("now_ms",))
    now = check_int("now_ms", body.get("now_ms"), low=fleet.clock.now_ms())
    return 200, {"now_ms": fleet.clock.set(now)}


@_route("POST", "/reset")
def _reset(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
           ) -> tuple[int, Any]:
    _known_body(body, ())
    fleet.reset()
    return 200, {"now_ms": fleet.clock.now_ms(),
                 "nameservers": [e.address for e in fleet.endpoints]}


# --------------------------------------------------------------------------- brokers, topics


@_route("POST", "/brokers")
def _add_broker(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
                ) -> tuple[int, Any]:
    handles = fleet.add_broker(body)
    return 201, {"broker": _broker_json(handles[0].addr, handles)}


@_route("GET", "/brokers")
def _brokers(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
             ) -> tuple[int, Any]:
    return 200, {"brokers": [_broker_json(a, h) for a, h in fleet.brokers.items()]}


@_route("DELETE", "/brokers/([^/]+)")
def _remove_broker(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
                   ) -> tuple[int, Any]:
    fleet.remove_broker(args[0])
    return 200, {"removed": args[0]}


@_route("POST", "/brokers/([^/]+)/(quiet|register|shutdown|disconnect)")
def _broker_action(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
                   ) -> tuple[int, Any]:
    _known_body(body, ())
    addr, action = args
    if action == "disconnect":
        return 200, {"addr": addr, "dropped": fleet.disconnect(addr)}
    handles = fleet.handles(addr)
    for handle in handles:
        if action == "quiet":
            handle.go_quiet()
        elif action == "shutdown" and handle.server.running:
            handle.shutdown()
        elif action == "shutdown":
            handle.disconnect()
        elif handle.server.running:
            handle.register()
    return 200, {"broker": _broker_json(addr, handles)}


@_route("POST", "/brokers/([^/]+)/topics")
def _create_topic(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
                  ) -> tuple[int, Any]:
    config = fleet.create_topic(args[0], body)
    return 201, {"topic": config.to_json()}


@_route("DELETE", "/brokers/([^/]+)/topics/([^/]+)")
def _delete_topic(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
                  ) -> tuple[int, Any]:
    fleet.delete_topic(args[0], args[1])
    return 200, {"deleted": args[1]}


@_route("DELETE", "/topics/([^/]+)")
def _delete_topic_in_namesrv(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str],
                             body: _Json) -> tuple[int, Any]:
    _known_query(q, ("nameserver", "cluster"))
    servers = fleet.servers_of(q.get("nameserver"), "nameserver")
    removed = {ns.name: ns.delete_topic(args[0], q.get("cluster")) for ns in servers
               if ns.running}
    return 200, {"topic": args[0], "removed": removed}


# --------------------------------------------------------------------------- name servers


@_route("POST", "/nameservers/([^/]+)/(stop|start|freeze|thaw)")
def _ns_action(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
               ) -> tuple[int, Any]:
    _known_body(body, ())
    index, action = args
    ns = fleet.server(index)
    assert ns.wire is not None
    position = fleet.servers.index(ns)
    if action in ("freeze", "thaw") and not ns.running:
        raise FleetError(f"{ns.name} is stopped", field="nameserver", value=index, status=409)
    {"stop": ns.stop, "start": ns.start, "freeze": ns.wire.freeze,
     "thaw": ns.wire.thaw}[action]()
    return 200, {"nameserver": _ns_json(fleet, position, ns)}


@_route("GET", "/nameservers/([^/]+)")
def _ns_state(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
              ) -> tuple[int, Any]:
    ns = fleet.server(args[0])
    return 200, {"nameserver": _ns_json(fleet, fleet.servers.index(ns), ns)}


@_route("POST", "/nameservers/([^/]+)/connections/([^/]+)/close")
def _close_connection(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str],
                      body: _Json) -> tuple[int, Any]:
    _known_body(body, ())
    ns = fleet.server(args[0])
    connection = _path_int("connection", args[1])
    assert ns.wire is not None
    if not ns.wire.disconnect(connection=connection):
        raise FleetError(f"no open connection {connection} on {ns.name}", field="connection",
                         value=connection, status=404)
    return 200, {"closed": connection}


# --------------------------------------------------------------------------- faults


@_route("POST", "/faults")
def _add_fault(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
               ) -> tuple[int, Any]:
    fault = fault_from_json(body)
    servers = fleet.servers_of(body.get("nameserver"), "nameserver")
    added = []
    for ns in servers:
        assert ns.wire is not None
        armed = ns.wire.faults.arm(fault)
        added.append(armed.to_json() | {"nameserver": fleet.servers.index(ns)})
    return 201, {"faults": added}


@_route("GET", "/faults")
def _faults(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
            ) -> tuple[int, Any]:
    out: list[_Json] = []
    for index, ns in enumerate(fleet.servers):
        assert ns.wire is not None
        faults = ns.wire.faults
        out.extend(f.to_json() | {"nameserver": index, "hits": faults.hits(f)}
                   for f in faults.rules)
    return 200, {"faults": out}


@_route("DELETE", "/faults")
def _clear_faults(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
                  ) -> tuple[int, Any]:
    _known_query(q, ("nameserver",))
    for ns in fleet.servers_of(q.get("nameserver"), "nameserver"):
        assert ns.wire is not None
        ns.wire.faults.clear()
    return 200, {"faults": []}


@_route("DELETE", "/nameservers/([^/]+)/faults/([^/]+)")
def _remove_fault(fleet: FakeFleet, args: tuple[str, ...], q: Mapping[str, str], body: _Json
                  ) -> tuple[int, Any]:
    ns = fleet.server(args[0])
    fault_id = _path_int("fault", args[1])
    assert ns.wire is not None
    if not ns.wire.faults.remove(fault_id):
        raise FleetError(f"no fault rule {fault_id} on {ns.name}", field="fault",
                         value=fault_id, status=404)
    return 200, {"removed": fault_id, "hits": ns.wire.faults.hits(fault_id)}


# --------------------------------------------------------------------------- helpers


def _known_body(body: _Json, keys: tuple[str, ...]) -> None:
    unknown = sorted(set(body) - set(keys))
    if unknown:
        raise FleetError(f"unknown field {unknown[0]!r}; expected "
                         + (f"some of {list(keys)}" if keys else "an empty object"),
                         field=unknown[0], value=body[unknown[0]])


def _known_query(q: Mapping[str, str], keys: tuple[str, ...]) -> None:
    unknown = sorted(set(q) - set(keys))
    if unknown:
        raise FleetError(f"unknown query parameter {unknown[0]!r}; expected some of "
                         f"{list(keys)}", field=unknown[0], value=q[unknown[0]])


def _query_int(q: Mapping[str, str], key: str, *, low: int) -> int:
    raw = q[key]
    if not raw.isdigit() or int(raw) < low:
        raise FleetError(f"{key} must be an integer >= {low}, got {raw!r}", field=key, value=raw)
    return int(raw)


def _path_int(field: str, raw: str) -> int:
    if not raw.isdigit():
        raise FleetError(f"{field} must be a number, got {raw!r}", field=field, value=raw)
    return int(raw)


def dispatch(fleet: FakeFleet, method: str, target: str, raw: bytes) -> tuple[int, Any]:
    """Answer one request: ``(status, JSON document)``. Holds ``fleet.lock`` throughout,
    except for a reset (which waits for the server loop, and that loop may need the lock
    to finish the requests in flight)."""
    parts = urlsplit(target)
    path = parts.path.rstrip("/") or "/"
    pairs = parse_qs(parts.query, keep_blank_values=True)
    query = {k: v[-1] for k, v in pairs.items()}
    allowed = []
    for verb, pattern, handler in _ROUTES:
        match = pattern.match(path)
        if match is None:
            continue
        allowed.append(verb)
        if verb != method:
            continue
        body = _parse_body(raw)
        args = tuple(unquote(a) for a in match.groups())
        lock = contextlib.nullcontext() if handler is _reset else fleet.lock
        try:
            with lock:
                return handler(fleet, args, query, body)
        except FleetError as exc:
            return exc.status, _error(exc)
        except InvalidRequest as exc:
            return 400, _error(exc)
    if allowed:
        return 405, {"error": f"{method} is not allowed on {path}; allowed: "
                              f"{', '.join(sorted(set(allowed)))}", "field": "method",
                     "value": method}
    return 404, {"error": f"no endpoint {path}", "field": "path", "value": path}


def _parse_body(raw: bytes) -> _Json:
    if not raw.strip():
        return {}
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FleetError(f"the body is not JSON: {exc}", field="body",
                         value=raw[:80].decode("utf-8", "replace")) from None
    if not isinstance(document, dict):
        raise FleetError(f"the body must be a JSON object, got {document!r:.60}", field="body",
                         value=document)
    return document


def _error(exc: InvalidRequest) -> _Json:
    value = exc.value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        value = repr(value)
    return {"error": str(exc), "field": exc.field, "value": value}


class _RequestHandler(BaseHTTPRequestHandler):
    server: ControlServer
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        length_text = self.headers.get("Content-Length", "0")
        if not length_text.isdigit():
            self._answer(400, {"error": "Content-Length must be a number",
                               "field": "Content-Length", "value": length_text})
            return
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._answer(413, {"error": f"bodies are limited to {MAX_BODY_BYTES} bytes",
                               "field": "Content-Length", "value": length})
            return
        raw = self.rfile.read(length) if length else b""  # JSON whatever the Content-Type
        try:
            with self.server.serial:
                status, document = dispatch(self.server.fleet, self.command, self.path, raw)
        except FleetError as exc:
            status, document = exc.status, _error(exc)
        self._answer(status, document)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _serve

    def _answer(self, status: int, document: Any) -> None:
        data = json.dumps(document, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None  # requests are in the fakes' event logs; keep stderr quiet


class ControlServer(ThreadingHTTPServer):
    """The control API of ``fleet`` on ``(host, port)``, loopback unless ``allow_remote``."""

    daemon_threads = True

    def __init__(self, fleet: FakeFleet, host: str = "127.0.0.1", port: int = 0, *,
                 allow_remote: bool = False) -> None:
        check_loopback(host, allow_remote=allow_remote, what="control")
        self.fleet = fleet
        #: One control request at a time: each is one step, a reset included.
        self.serial = threading.Lock()
        super().__init__((host, port), _RequestHandler)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), int(self.server_address[1])
        return f"http://{host}:{port}"


def start_control(fleet: FakeFleet, host: str = "127.0.0.1", port: int = 0, *,
                  allow_remote: bool = False) -> tuple[ControlServer, threading.Thread]:
    """Serve the control API (``routing fake --control``; docs/testing-clients.md) for
    ``fleet`` in a daemon thread; stop it with ``server.shutdown()``. Binding a
    non-loopback ``host`` needs ``allow_remote``. Cost: one thread; each request O(its
    answer) under the fleet's lock."""
    server = ControlServer(fleet, host, port, allow_remote=allow_remote)
    thread = threading.Thread(target=server.serve_forever, name="routing-fake-control",
                              daemon=True)
    thread.start()
    return server, thread
