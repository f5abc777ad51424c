"""Input validation (spec D7). Every check raises `InvalidRequest` naming field and value."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from ._errors import InvalidRequest

__all__ = [
    "MAX_QUEUE_NUMS",
    "MAX_TOPIC_LENGTH",
    "attrs_check",
    "attrs_optional",
    "check_addr",
    "check_bool",
    "check_hashable",
    "check_int",
    "check_name",
    "check_queue_cap",
    "check_topic",
    "fail",
    "non_negative",
    "optional_addr",
    "optional_bool",
    "optional_name",
    "optional_non_negative",
    "optional_positive",
    "positive",
    "queue_count",
    "valid_addr",
    "valid_bool",
    "valid_int",
    "valid_name",
    "valid_topic",
]

#: RocketMQ's ``TopicValidator`` rule: letters, digits, ``%``, ``|``, ``_`` and ``-``.
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_TOPIC_LENGTH = 127
MAX_QUEUE_NUMS = 65_535
MAX_NAME_LENGTH = 255
_WHITESPACE = re.compile(r"\s")


def fail(field: str, value: object, rule: str) -> NoReturn:
    """Raise `InvalidRequest` with the standard message ``field must be <rule>, got <value>``."""
    raise InvalidRequest(f"{field} must be {rule}, got {value!r}", field=field, value=value)


def check_name(field: str, value: object) -> str:
    """A cluster/broker/zone name: non-empty ``str``, no whitespace, at most 255 chars."""
    if not isinstance(value, str) or not value or _WHITESPACE.search(value):
        fail(field, value, "a non-empty string without whitespace")
    if len(value) > MAX_NAME_LENGTH:
        fail(field, value, f"at most {MAX_NAME_LENGTH} characters")
    return value


def check_topic(field: str, value: object) -> str:
    """A topic name: 1–127 chars of ``[%|a-zA-Z0-9_-]`` (RocketMQ ``TopicValidator``)."""
    if not isinstance(value, str) or not TOPIC_PATTERN.match(value):
        fail(field, value, "a topic name matching ^[%|a-zA-Z0-9_-]+$")
    if len(value) > MAX_TOPIC_LENGTH:
        fail(field, value, f"a topic name of at most {MAX_TOPIC_LENGTH} characters")
    return value


def check_addr(field: str, value: object) -> str:
    """A ``host:port`` address, port 1–65535 (IPv6 hosts in brackets: ``[::1]:9876``)."""
    if not isinstance(value, str) or _WHITESPACE.search(value) or ":" not in value:
        fail(field, value, "'host:port' with port 1-65535")
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65_535:
        fail(field, value, "'host:port' with port 1-65535")
    return value


def check_int(field: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """An ``int`` (not a ``bool``) within ``[low, high]``."""
    if not isinstance(value, int) or isinstance(value, bool):
        fail(field, value, "an integer")
    if low is not None and value < low:
        fail(field, value, f"an integer >= {low}" + (f" and <= {high}" if high is not None else ""))
    if high is not None and value > high:
        fail(field, value, f"an integer <= {high}" + (f" and >= {low}" if low is not None else ""))
    return value


def check_bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        fail(field, value, "a bool")
    return value


def attrs_check(
    check: Callable[..., Any], **kwargs: Any
) -> Callable[[Any, Any, Any], None]:
    """Adapt a ``check_*`` function to an attrs validator naming ``Class.field``."""

    def validator(instance: Any, attribute: Any, value: Any) -> None:
        check(f"{type(instance).__name__}.{attribute.name}", value, **kwargs)

    return validator


def attrs_optional(
    check: Callable[..., Any], **kwargs: Any
) -> Callable[[Any, Any, Any], None]:
    """Like `attrs_check`, but ``None`` passes."""

    def validator(instance: Any, attribute: Any, value: Any) -> None:
        if value is not None:
            check(f"{type(instance).__name__}.{attribute.name}", value, **kwargs)

    return validator


# attrs validators for the rules many fields share, each naming ``Class.field`` in its error
# (`attrs_check`): one definition each for the values, messages and configs that use them.
valid_name = attrs_check(check_name)
valid_addr = attrs_check(check_addr)
valid_topic = attrs_check(check_topic)
valid_bool = attrs_check(check_bool)
valid_int = attrs_check(check_int)
#: times in ms, broker ids, generations, counts
non_negative = attrs_check(check_int, low=0)
#: periods and timeouts in ms, sizes
positive = attrs_check(check_int, low=1)
#: a topic's read or write queue count
queue_count = attrs_check(check_int, low=0, high=MAX_QUEUE_NUMS)
optional_name = attrs_optional(check_name)
optional_addr = attrs_optional(check_addr)
optional_bool = attrs_optional(check_bool)
optional_non_negative = attrs_optional(check_int, low=0)
optional_positive = attrs_optional(check_int, low=1)


def check_mapping(field: str, value: object) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        fail(field, value, "a mapping")
    return value


def check_hashable(field: str, value: object) -> None:
    """Raise `InvalidRequest` naming ``field`` unless ``value`` is hashable (a channel)."""
    try:
        hash(value)
    except TypeError:
        raise InvalidRequest(f"{field} must be hashable, got {value!r:.80}",
                             field=field, value=value) from None


def check_queue_cap(field: str, read: int, write: int, cap: int) -> None:
    """Raise `InvalidRequest` naming ``field.read_queue_nums`` or ``.write_queue_nums``
    when either count is above ``cap`` (``max_queue_nums``)."""
    for which, value in (("read_queue_nums", read), ("write_queue_nums", write)):
        if value > cap:
            fail(f"{field}.{which}", value, f"at most max_queue_nums={cap}")
