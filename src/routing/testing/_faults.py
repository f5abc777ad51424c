"""Faults on demand for a fake name server on the wire: which requests, and what happens.

A `Fault` is a rule: an ``action`` (what happens to a request), filters (request codes, one
connection, the connection of one broker) and a budget (the next ``count`` matching
requests, each with probability ``share`` drawn from a generator seeded with ``seed``, or
every one until removed). `Faults` holds the rules of one name server in the order they
were added; the first rule whose filters match and whose draw fires decides. Given the
same requests in the same order, the same requests are hit: nothing depends on wall time.

Actions (see docs/testing-clients.md, "Faults"):

========================  ==============================================================
``busy``                  answer SYSTEM_BUSY with Java's flow-control remark; not applied
``answer``                answer ``response_code`` (and ``remark``); not applied
``drop_reply``            apply the request, send no reply (the client times out)
``drop_request``          lose the request: not applied, no reply
``close``                 close the connection instead of answering; not applied
``delay``                 apply the request, hold the reply until the fake's clock has
                          moved ``delay_ms`` further (only the test moves it)
========================  ==============================================================
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from .._errors import InvalidRequest
from ..remoting import RequestCode, ResponseCode

__all__ = ["ACTIONS", "Fault", "FaultError", "Faults"]

ACTIONS = ("busy", "answer", "drop_reply", "drop_request", "close", "delay")
#: Actions after which the request is still applied by the name server.
APPLIED = frozenset({"drop_reply", "delay"})
_MAX_REMARK = 1_000


class FaultError(InvalidRequest):
    """A fault rule that cannot be: names the field and the value. Nothing was added."""


@attrs.frozen(kw_only=True)
class Fault:
    """One fault rule (see the module docstring). ``codes`` None matches every request
    code; ``connection`` is a channel id (`WireEndpoint.connections`); ``broker`` matches
    the connection that registered that broker address. ``count`` None with ``share``
    None applies to every matching request until the rule is removed."""

    id: int
    action: str
    codes: frozenset[int] | None = None
    connection: int | None = None
    broker: str | None = None
    count: int | None = None
    share: float | None = None
    seed: int = 0
    delay_ms: int = 0
    response_code: int = ResponseCode.SYSTEM_BUSY
    remark: str | None = None

    def describe(self) -> str:
        """One line: the action and its filters, for the event log."""
        what = self.action
        if self.action == "answer":
            what += f" {_code_name(ResponseCode, self.response_code)}"
        elif self.action == "delay":
            what += f" {self.delay_ms} ms"
        scope = [", ".join(sorted(_code_name(RequestCode, c) for c in self.codes))
                 if self.codes is not None else "any request"]
        if self.connection is not None:
            scope.append(f"connection #{self.connection}")
        if self.broker is not None:
            scope.append(f"broker {self.broker}")
        budget = (f"next {self.count}" if self.count is not None else "every") + (
            f", share {self.share} (seed {self.seed})" if self.share is not None else "")
        return f"rule {self.id}: {what} on {' and '.join(scope)} ({budget})"

    def to_json(self) -> dict[str, Any]:
        """The rule as the control API shows it."""
        return {"id": self.id, "action": self.action,
                "codes": None if self.codes is None else sorted(self.codes),
                "connection": self.connection, "broker": self.broker, "count": self.count,
                "share": self.share, "seed": self.seed, "delay_ms": self.delay_ms,
                "response_code": self.response_code, "remark": self.remark}


class _Armed:
    """A rule's running state: what is left of its budget, its generator, its hits."""

    __slots__ = ("fault", "hits", "left", "rng")

    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.left = fault.count
        self.rng = random.Random(fault.seed)
        self.hits = 0


class Faults:
    """The fault rules of one name server on the wire (``ns.wire.faults``).

    Every method holds ``lock`` (the fake's), so rules can change while requests are
    answered; ``log`` receives one line per rule added or removed (the fake's event log).
    O(rules) per request.
    """

    def __init__(self, *, lock: contextlib.AbstractContextManager[object] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self._lock = lock if lock is not None else contextlib.nullcontext()
        self._log = log
        self._armed: list[_Armed] = []
        self._ids = 1
        self._retired: dict[int, int] = {}

    def add(self, action: str, *, code: int | str | Iterable[int | str] | None = None,
            connection: int | None = None, broker: str | None = None,
            count: int | None = None, share: float | None = None, seed: int = 0,
            delay_ms: int | None = None, response_code: int | str | None = None,
            remark: str | None = None) -> Fault:
        """Add a rule (checked first: `FaultError` names the field and value, and nothing
        is added). ``code`` is a request code or its name (``"GET_ROUTEINFO_BY_TOPIC"``),
        or several; ``response_code`` likewise a response code (``answer`` only);
        ``delay_ms`` is manual time (``delay`` only, > 0)."""
        fault = make_fault(0, action, code=code, connection=connection, broker=broker,
                           count=count, share=share, seed=seed, delay_ms=delay_ms,
                           response_code=response_code, remark=remark)
        return self.arm(fault)

    def arm(self, fault: Fault) -> Fault:
        """Add a checked rule (`make_fault`, `fault_from_json`) under the next id."""
        with self._lock:
            fault = attrs.evolve(fault, id=self._ids)
            self._ids += 1
            self._armed.append(_Armed(fault))
            if self._log is not None:
                self._log(f"fault {fault.describe()} added")
        return fault

    def remove(self, fault: Fault | int) -> bool:
        """Remove a rule (or its id); False if it is not there (any more)."""
        wanted = fault.id if isinstance(fault, Fault) else fault
        with self._lock:
            for armed in self._armed:
                if armed.fault.id == wanted:
                    self._armed.remove(armed)
                    self._retired[wanted] = armed.hits
                    if self._log is not None:
                        self._log(f"fault rule {wanted} removed after {armed.hits} hit(s)")
                    return True
        return False

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            for armed in self._armed:
                self._retired[armed.fault.id] = armed.hits
            if self._armed and self._log is not None:
                self._log(f"fault rules removed: {len(self._armed)}")
            self._armed.clear()

    @property
    def rules(self) -> tuple[Fault, ...]:
        """The active rules, in the order they are tried."""
        with self._lock:
            return tuple(a.fault for a in self._armed)

    def hits(self, fault: Fault | int) -> int:
        """How many requests a rule (or its id) has hit so far, retired rules included."""
        wanted = fault.id if isinstance(fault, Fault) else fault
        with self._lock:
            for armed in self._armed:
                if armed.fault.id == wanted:
                    return armed.hits
            return self._retired.get(wanted, 0)

    def match(self, code: int, connection: int, brokers: Iterable[str]) -> Fault | None:
        """The rule that hits this request, if any; its budget is spent. A rule whose
        filters match draws from its generator (when it has a ``share``) whether or not
        it fires, so the draws depend on the matching requests only. The caller holds
        the lock."""
        for armed in self._armed:
            fault = armed.fault
            if fault.codes is not None and code not in fault.codes:
                continue
            if fault.connection is not None and connection != fault.connection:
                continue
            if fault.broker is not None and fault.broker not in brokers:
                continue
            if fault.share is not None and armed.rng.random() >= fault.share:
                continue
            armed.hits += 1
            if armed.left is not None:
                armed.left -= 1
                if armed.left == 0:
                    self._armed.remove(armed)
                    self._retired[fault.id] = armed.hits
            return fault
        return None


def make_fault(fault_id: int, action: str, *, code: int | str | Iterable[int | str] | None,
               connection: int | None, broker: str | None, count: int | None,
               share: float | None, seed: int, delay_ms: int | None,
               response_code: int | str | None, remark: str | None) -> Fault:
    """A checked `Fault` (`FaultError` otherwise)."""
    if action not in ACTIONS:
        raise FaultError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}",
                         field="action", value=action)
    codes = None if code is None else frozenset(
        _code(RequestCode, "code", c) for c in ([code] if isinstance(code, int | str)
                                                else code))
    if codes is not None and not codes:
        raise FaultError("code must name at least one request code, got an empty list",
                         field="code", value=[])
    _optional_int("connection", connection, minimum=1)
    if broker is not None and (not isinstance(broker, str) or not broker):
        raise FaultError(f"broker must be a broker address (HOST:PORT), got {broker!r}",
                         field="broker", value=broker)
    _optional_int("count", count, minimum=1)
    if share is not None and (isinstance(share, bool) or not isinstance(share, int | float)
                              or not 0 < share <= 1):
        raise FaultError(f"share must be a number in (0, 1], got {share!r}", field="share",
                         value=share)
    _optional_int("seed", seed, minimum=None)
    if action == "delay":
        if delay_ms is None:
            raise FaultError("a delay needs delay_ms (manual ms, > 0)", field="delay_ms",
                             value=None)
        _optional_int("delay_ms", delay_ms, minimum=1)
    elif delay_ms is not None:
        raise FaultError(f"delay_ms applies to the delay action only, not {action!r}",
                         field="delay_ms", value=delay_ms)
    if action == "answer":
        if response_code is None:
            raise FaultError("an answer needs response_code (e.g. SYSTEM_ERROR or 1)",
                             field="response_code", value=None)
        answered = _code(ResponseCode, "response_code", response_code)
    elif response_code is not None:
        raise FaultError(f"response_code applies to the answer action only, not {action!r}",
                         field="response_code", value=response_code)
    else:
        answered = ResponseCode.SYSTEM_BUSY
    if remark is not None and (not isinstance(remark, str) or len(remark) > _MAX_REMARK):
        raise FaultError(f"remark must be a string of at most {_MAX_REMARK} characters, got "
                         f"{remark!r:.60}", field="remark", value=remark)
    return Fault(id=fault_id, action=action, codes=codes, connection=connection, broker=broker,
                 count=count, share=None if share is None else float(share), seed=seed,
                 delay_ms=delay_ms or 0, response_code=int(answered), remark=remark)


def fault_from_json(document: Mapping[str, Any]) -> Fault:
    """A checked `Fault` (id 0 until `Faults.arm`) from the control API's JSON object: the
    keyword names of `Faults.add`; ``nameserver`` is the caller's. Unknown keys are a
    `FaultError`."""
    known = {"action", "code", "connection", "broker", "count", "share", "seed", "delay_ms",
             "response_code", "remark", "nameserver"}
    unknown = sorted(set(document) - known)
    if unknown:
        raise FaultError(f"unknown field {unknown[0]!r}; expected some of {sorted(known)}",
                         field=unknown[0], value=document[unknown[0]])
    if "action" not in document:
        raise FaultError("a fault needs an action", field="action", value=None)
    return make_fault(0, document["action"], code=document.get("code"),
                      connection=document.get("connection"), broker=document.get("broker"),
                      count=document.get("count"), share=document.get("share"),
                      seed=document.get("seed", 0), delay_ms=document.get("delay_ms"),
                      response_code=document.get("response_code"),
                      remark=document.get("remark"))


def _code(kind: type[RequestCode] | type[ResponseCode], field: str, value: object) -> int:
    if isinstance(value, str) and not value.lstrip("-").isdigit():
        try:
            return int(kind[value.upper()])
        except KeyError:
            raise FaultError(f"{field} {value!r} is not a {kind.__name__} name",
                             field=field, value=value) from None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise FaultError(f"{field} must be a code number or name, got {value!r}",
                         field=field, value=value)
    number = int(value)
    if not -(2**31) <= number < 2**31:
        raise FaultError(f"{field} must fit in an int32, got {value!r}", field=field,
                         value=value)
    return number


def _optional_int(field: str, value: object, *, minimum: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise FaultError(f"{field} must be an integer, got {value!r}", field=field, value=value)
    if minimum is not None and value < minimum:
        raise FaultError(f"{field} must be >= {minimum}, got {value}", field=field, value=value)


def _code_name(kind: type[RequestCode] | type[ResponseCode], number: int) -> str:
    try:
        return kind(number).name
    except ValueError:
        return str(number)
