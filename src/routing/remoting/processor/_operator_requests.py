"""Operator requests of `NameServerProcessor`: the KV configuration (100, 101, 102, 219)
and the name server's own settings (318, 319). Java: ``DefaultRequestProcessor``'s
``putKVConfig``, ``getKVConfig``, ``deleteKVConfig``, ``getKVListByNamespace``,
``updateConfig`` and ``getConfig``.

Each function is a request handler: ``(processor, request, fields, channel) -> Outcome``
(`routing.remoting.processor._request`). Each costs O(1) plus the KV store's or the
settings' work (a KV change with a file is written before it is answered).
"""

from __future__ import annotations

from collections.abc import Hashable

from ..wire._bodies import encode_kv_table
from ..wire._codec import RemotingCommand
from ..wire._codes import ResponseCode
from ._namesrv_config import ConfigError, parse_properties
from ._request import Context, Fields, Outcome, fail, ignored, null_field, ok

__all__ = ["delete_kv", "get_config", "get_kv", "kv_list", "put_kv", "update_config"]

_BLACK_LISTED = "Can not update config in black list."


def put_kv(proc: Context, request: RemotingCommand, f: Fields,
           channel: Hashable | None) -> Outcome:
    """Durable before answered when the store has a file (`KVStore`)."""
    proc.kv.put(f.text("namespace"), f.text("key"), f.text("value"))
    return ok(request)


def get_kv(proc: Context, request: RemotingCommand, f: Fields,
           channel: Hashable | None) -> Outcome:
    """A missing namespace or key finds nothing: QUERY_NOT_FOUND, as Java's null lookup
    answers, with the missing field named."""
    namespace, key = f.given("namespace"), f.given("key")
    value = None if namespace is None or key is None else proc.kv.get(namespace, key)
    if value is None:
        return fail(request, ResponseCode.QUERY_NOT_FOUND,
                    f"No config item, Namespace: {_java(namespace)} Key: {_java(key)}"
                    + _missing(namespace=namespace, key=key))
    return ok(request, ext={"value": value})


def delete_kv(proc: Context, request: RemotingCommand, f: Fields,
              channel: Hashable | None) -> Outcome:
    """A missing namespace or key deletes nothing: SUCCESS, as Java's (`ignored`)."""
    namespace, key = f.given("namespace"), f.given("key")
    if namespace is None or key is None:
        return ignored(request, null_field("namespace" if namespace is None else "key"))
    proc.kv.delete(namespace, key)
    return ok(request)


def kv_list(proc: Context, request: RemotingCommand, f: Fields,
            channel: Hashable | None) -> Outcome:
    """A missing namespace finds nothing: QUERY_NOT_FOUND (Java), the field named."""
    namespace = f.given("namespace")
    table = None if namespace is None else proc.kv.namespace(namespace)
    if table is None:
        return fail(request, ResponseCode.QUERY_NOT_FOUND,
                    f"No config item, Namespace: {_java(namespace)}"
                    + _missing(namespace=namespace))
    return ok(request, body=encode_kv_table(table))


def _java(value: str | None) -> str:
    """A field as Java's string concatenation prints it (``null`` when missing)."""
    return "null" if value is None else value


def _missing(**fields: str | None) -> str:
    """`` (the custom field <name> is null)`` for the first missing field, else ``""``."""
    for name, value in fields.items():
        if value is None:
            return f" ({null_field(name)})"
    return ""


def update_config(proc: Context, request: RemotingCommand, f: Fields,
                  channel: Hashable | None) -> Outcome:
    """UPDATE_NAMESRV_CONFIG: a black-listed key → NO_PERMISSION and nothing changes; a
    value that does not parse → SYSTEM_ERROR naming it and nothing changes; otherwise
    SUCCESS with every known key applied (unknown keys ignored, as Java's)."""
    if request.body:
        text = request.body.decode("utf-8", errors="replace")
        try:
            entries = parse_properties(text)
        except ConfigError:
            return fail(request, ResponseCode.SYSTEM_ERROR, "string2Properties error")
        black = proc.settings.black_list
        if any(key in black for _, key, _ in entries):
            return fail(request, ResponseCode.NO_PERMISSION, _BLACK_LISTED)
        try:
            proc.update_config([(key, value) for _, key, value in entries])
        except ConfigError as exc:
            return fail(request, ResponseCode.SYSTEM_ERROR, str(exc))
    return ok(request)


def get_config(proc: Context, request: RemotingCommand, f: Fields,
               channel: Hashable | None) -> Outcome:
    """GET_NAMESRV_CONFIG: every setting, ``key=value`` per line, sorted by key."""
    return ok(request, body=proc.settings.to_properties().encode("utf-8"))
