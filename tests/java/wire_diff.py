"""Field-by-field comparison of two responses to the same request: Java's name server's and
``routing serve``'s.

`differences` lists what differs: response code, remark, ext fields, header form, and the body
— decoded when it is JSON (either dialect) or a properties text, with the lists whose order
is a Java hash order (groups, queue rows, topic lists, cluster members) compared as sets, and
the JSON dialect itself compared (standard ``"0":`` against fastjson's bare ``0:`` keys).
`Pair` sends each request to both servers on its own connection and asserts no difference
beyond the ones a test names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from wire import WireClient

from routing.remoting import RemotingCommand, RequestCode, SerializeType, loads, parse_properties

__all__ = ["Pair", "align_kv_namespaces", "body_doc", "differences", "dialect", "properties"]

#: Lists whose order is a Java HashMap/HashSet iteration order (routing sorts them, D4/D8).
_HASH_ORDERED = frozenset({"brokerDatas", "queueDatas", "topicList"})
#: Maps whose values are hash-ordered sets.
_SET_VALUED = frozenset({"clusterAddrTable"})
_PROPERTIES_BODIES = frozenset({RequestCode.GET_NAMESRV_CONFIG})
_LEGACY_KEY = re.compile(rb'[{,]-?\d+:')
_STANDARD_KEY = re.compile(rb'[{,]"-?\d+":')


def dialect(body: bytes) -> str | None:
    """``legacy`` (fastjson's bare integer keys), ``standard``, or None (no integer keys)."""
    if _LEGACY_KEY.search(body):
        return "legacy"
    if _STANDARD_KEY.search(body):
        return "standard"
    return None


def _sort_key(item: Any) -> str:
    return repr(sorted(item.items())) if isinstance(item, dict) else repr(item)


def _normalize(doc: Any, key: str | None = None) -> Any:
    if isinstance(doc, dict):
        if key in _SET_VALUED:
            return {k: sorted(v, key=_sort_key) if isinstance(v, list) else v
                    for k, v in doc.items()}
        return {k: _normalize(v, k) for k, v in doc.items()}
    if isinstance(doc, list):
        items = [_normalize(v) for v in doc]
        return sorted(items, key=_sort_key) if key in _HASH_ORDERED else items
    return doc


def properties(body: bytes) -> dict[str, str]:
    return {k: v for _, k, v in parse_properties(body.decode("utf-8"))}


def body_doc(code: int, body: bytes) -> Any:
    """The body decoded for comparison: JSON (hash-ordered lists sorted), a properties dict,
    or the bytes when neither."""
    if not body:
        return None
    if code in _PROPERTIES_BODIES:
        return properties(body)
    try:
        return _normalize(loads(body))
    except Exception:
        return body


def differences(request: RemotingCommand, java: RemotingCommand | None,
                ours: RemotingCommand | None, *, remark: bool = True,
                header_form: bool = True) -> list[str]:
    """What differs between Java's answer and ours (empty: the same). ``None`` stands for
    a connection closed without an answer. ``remark=False`` skips the remark,
    ``header_form=False`` the JSON/ROCKETMQ header form of the answer."""
    if java is None or ours is None:
        return [] if java is ours else [f"closed: java={java is None} ours={ours is None}"]
    out = []
    if java.code != ours.code:
        out.append(f"code: java={java.code} ours={ours.code}")
    if remark and java.remark != ours.remark:
        out.append(f"remark: java={java.remark!r} ours={ours.remark!r}")
    if dict(java.ext_fields) != dict(ours.ext_fields):
        out.append(f"ext: java={dict(java.ext_fields)} ours={dict(ours.ext_fields)}")
    if (java.opaque, java.flag) != (ours.opaque, ours.flag):
        out.append(f"opaque/flag: java={(java.opaque, java.flag)} ours={(ours.opaque, ours.flag)}")
    if header_form and java.serialize_type != ours.serialize_type:
        out.append(f"header form: java={java.serialize_type.name} ours={ours.serialize_type.name}")
    if java.body != ours.body:
        jdoc, odoc = body_doc(request.code, java.body), body_doc(request.code, ours.body)
        if jdoc != odoc:
            out.append(f"body: java={jdoc!r:.1500} ours={odoc!r:.1500}")
        elif dialect(java.body) != dialect(ours.body):
            out.append(f"JSON dialect: java={dialect(java.body)} ours={dialect(ours.body)}")
    return out


class Pair:
    """One connection to each server; `same` sends one request to both and compares."""

    def __init__(self, java: tuple[str, int], ours: tuple[str, int]) -> None:
        self.java, self.ours = WireClient(java), WireClient(ours)
        self.log: list[tuple[RemotingCommand, RemotingCommand, RemotingCommand]] = []

    def call(self, request: RemotingCommand) -> tuple[RemotingCommand, RemotingCommand]:
        """Both answers (the same opaque to both)."""
        opaque = self.java.send(request)
        import attrs

        request = attrs.evolve(request, opaque=opaque)
        self.ours.send(request)
        java, ours = self.java.receive(opaque), self.ours.receive(opaque)
        self.log.append((request, java, ours))
        return java, ours

    def same(self, request: RemotingCommand, *, remark: bool = True,
             header_form: bool = True,
             allow: Callable[[str], bool] | None = None) -> tuple[RemotingCommand,
                                                                   RemotingCommand]:
        """Send to both; assert the answers are the same (but for differences ``allow``
        accepts); return them."""
        java, ours = self.call(request)
        found = [d for d in differences(request, java, ours, remark=remark,
                                        header_form=header_form)
                 if allow is None or not allow(d)]
        assert not found, f"request {request.code} {dict(request.ext_fields)}: {found}"
        return java, ours

    def all_same(self, requests: Iterable[RemotingCommand], **kwargs: Any) -> None:
        for request in requests:
            self.same(request, **kwargs)

    def close(self) -> None:
        self.java.close()
        self.ours.close()

    def __enter__(self) -> Pair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def align_kv_namespaces(both: Pair) -> None:
    """Java keeps a KV namespace once created, even emptied (``deleteKVConfig`` removes the
    key only), and a registration's answer carries the order-topic namespace's table: give
    a fresh server of ours the same empty namespace when Java has one."""
    from wire_requests import cmd

    from routing.remoting import NAMESPACE_ORDER_TOPIC_CONFIG, ResponseCode

    listing = cmd(RequestCode.GET_KVLIST_BY_NAMESPACE,
                  {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG})
    if both.java.call(listing).code == ResponseCode.SUCCESS:
        key = {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": "-"}
        both.ours.call(cmd(RequestCode.PUT_KV_CONFIG, {**key, "value": "-"}))
        both.ours.call(cmd(RequestCode.DELETE_KV_CONFIG, key))
    both.same(listing)


def header_forms() -> tuple[tuple[SerializeType, int], ...]:
    """The three request shapes: JSON header with a 5.x version (standard JSON bodies),
    JSON header with version 0 (fastjson's legacy dialect), ROCKETMQ binary header."""
    from routing.remoting import CURRENT_VERSION

    return ((SerializeType.JSON, CURRENT_VERSION), (SerializeType.JSON, 0),
            (SerializeType.ROCKETMQ, CURRENT_VERSION))
