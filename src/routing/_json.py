"""Helpers for the ``to_json``/``from_json`` methods of the values.

RocketMQ's JSON uses camelCase names (fastjson). ``from_json`` accepts a ``str``, ``bytes``
or an already-parsed mapping, and turns *any* malformation into `InvalidRequest`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ._errors import InvalidRequest

__all__ = ["JsonDoc", "document", "json_loader"]

T = TypeVar("T")

JsonDoc = dict[str, Any]


def document(data: object, what: str) -> Mapping[str, Any]:
    """Parse ``data`` (str, bytes or mapping) into a mapping, or raise `InvalidRequest`."""
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"{what}: JSON is not valid UTF-8 ({exc})", field=what) from None
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise InvalidRequest(f"{what}: malformed JSON ({exc})", field=what) from None
    if not isinstance(data, Mapping):
        raise InvalidRequest(f"{what}: expected a JSON object, got {data!r:.80}", field=what)
    return data


def json_loader(func: Callable[..., T]) -> Callable[..., T]:
    """Wrap a ``from_json`` so that every failure surfaces as `InvalidRequest`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return func(*args, **kwargs)
        except InvalidRequest:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError,
                RecursionError) as exc:
            owner = getattr(args[0], "__name__", "value") if args else "value"
            raise InvalidRequest(f"{owner}.from_json: malformed input ({exc!r:.200})") from None

    return wrapper


def get(doc: Mapping[str, Any], key: str, default: Any = None, *alternatives: str) -> Any:
    """``doc[key]``, else the first present alternative spelling, else ``default``."""
    if key in doc:
        return doc[key]
    for alt in alternatives:
        if alt in doc:
            return doc[alt]
    return default


def need(doc: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in doc:
        raise InvalidRequest(f"{what}: missing field {key!r}", field=f"{what}.{key}")
    return doc[key]


def as_int(value: Any, field: str) -> int:
    """JSON numbers (and numeric strings, as fastjson map keys are) to ``int``."""
    if isinstance(value, bool):
        raise InvalidRequest(f"{field} must be an integer, got {value!r}", field=field, value=value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise InvalidRequest(f"{field} must be an integer, got {value!r}", field=field, value=value)


def as_mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{field} must be a JSON object, got {value!r:.80}", field=field)
    return value


def as_list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidRequest(f"{field} must be a JSON array, got {value!r:.80}", field=field)
    return list(value)
