"""The input checks of ``_validate`` (spec D7) for decoders of large documents.

A snapshot names the same groups, addresses and topics hundreds of times (in its groups,
rows, live entries and topic tables) and holds thousands of integers. `Checked` runs each
check of a name, address or topic once per document and remembers what passed; `int_in`
takes a valid integer in one type test and two comparisons. A failure raises exactly
what ``_validate`` raises, the field named ``where + part`` (built only then). The values
are then built with `routing._values.unchecked`: the checks are the constructors' own.
"""

from __future__ import annotations

from typing import Any

from ._validate import check_addr, check_bool, check_int, check_name, check_topic, fail

__all__ = ["Checked", "int_in", "items_of"]


def int_in(where: str, part: str, value: object, low: int | None = None,
           high: int | None = None) -> int:
    """``value`` when it is an ``int`` (not a ``bool``) within ``[low, high]``, else
    `InvalidRequest` naming ``where + part``. O(1)."""
    if type(value) is int and (low is None or value >= low) and (high is None or value <= high):
        return value
    return check_int(where + part, value, low=low, high=high)


def items_of(value: object, where: str, part: str = "", size: int | None = None
             ) -> list[Any]:
    """``value`` when it is a JSON array (of ``size`` items), else `InvalidRequest`."""
    if type(value) is not list or (size is not None and len(value) != size):
        fail(where + part, value, "a JSON array" if size is None else f"an array of {size} items")
    return value


class Checked:
    """Name, address and topic checks that remember what passed (one document's worth:
    make one per decode). Each method returns the value. O(1) for a value seen before."""

    __slots__ = ("_addrs", "_names", "_topics")

    def __init__(self) -> None:
        self._names: set[str] = set()
        self._addrs: set[str] = set()
        self._topics: set[str] = set()

    def name(self, where: str, part: str, value: object) -> str:
        if type(value) is str and value in self._names:
            return value
        self._names.add(check_name(where + part, value))
        return value  # type: ignore[return-value]

    def addr(self, where: str, part: str, value: object) -> str:
        if type(value) is str and value in self._addrs:
            return value
        self._addrs.add(check_addr(where + part, value))
        return value  # type: ignore[return-value]

    def topic(self, where: str, part: str, value: object) -> str:
        if type(value) is str and value in self._topics:
            return value
        self._topics.add(check_topic(where + part, value))
        return value  # type: ignore[return-value]

    def opt_name(self, where: str, part: str, value: object) -> str | None:
        return None if value is None else self.name(where, part, value)

    def opt_addr(self, where: str, part: str, value: object) -> str | None:
        return None if value is None else self.addr(where, part, value)

    @staticmethod
    def flag(where: str, part: str, value: object) -> bool:
        if value is True or value is False:
            return value
        return check_bool(where + part, value)
