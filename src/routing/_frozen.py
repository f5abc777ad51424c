"""`FrozenMap`: an immutable, hashable mapping used inside the frozen values.

Values such as `BrokerData.broker_addrs` must be immutable (spec principle 3) and hashable
(attrs frozen classes hash all their fields). ``types.MappingProxyType`` is neither hashable
nor safe (it views a dict someone may still hold), so values copy into this instead.
The hash is computed lazily once and cached, so comparing a registration's topic table
with the last one applied costs O(1) when the hashes differ and when the object is the same.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any, TypeVar

__all__ = ["FrozenMap", "dict_of", "freeze_map"]

K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V]):
    """An immutable ``dict`` copy: O(1) lookups, O(n) construction, cached O(n) hash."""

    __slots__ = ("__weakref__", "_data", "_hash")  # weakref: hosts may hold tables weakly

    _data: dict[K, V]
    _hash: int | None

    def __init__(self, data: Mapping[K, V] | None = None) -> None:
        object.__setattr__(self, "_data", dict(data) if data is not None else {})
        object.__setattr__(self, "_hash", None)

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: K, default: Any = None) -> Any:
        return self._data.get(key, default)

    # The views are the dict's own (read-only, C-level): set operations on the keys, such
    # as the unchanged-table check of a registration, run without Python code per item.
    def keys(self) -> KeysView[K]:
        return self._data.keys()

    def values(self) -> ValuesView[V]:
        return self._data.values()

    def items(self) -> ItemsView[K, V]:
        return self._data.items()

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, FrozenMap):
            if self._hash is not None and other._hash is not None and self._hash != other._hash:
                return False
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(frozenset(self._data.items()))
            object.__setattr__(self, "_hash", h)
        return h

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("FrozenMap is immutable")

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))

    def to_dict(self) -> dict[K, V]:
        """A new, mutable ``dict`` with the same items. O(n)."""
        return dict(self._data)


EMPTY: FrozenMap[Any, Any] = FrozenMap()


def freeze_map(value: Mapping[Any, Any] | None) -> FrozenMap[Any, Any]:
    """attrs converter: ``None`` → empty map, a `FrozenMap` as is, any mapping → a copy."""
    if value is None:
        return EMPTY
    if isinstance(value, FrozenMap):
        return value
    if not isinstance(value, Mapping):
        from ._errors import InvalidRequest

        raise InvalidRequest(f"expected a mapping, got {value!r}", value=value)
    return FrozenMap(value)


def dict_of(table: Mapping[K, V]) -> Mapping[K, V]:
    """The dict inside a `FrozenMap` (any other mapping as it is), for hot read-only
    lookups: ``dict.get`` in C instead of `FrozenMap.get` in Python. The caller must not
    change it. O(1)."""
    return table._data if type(table) is FrozenMap else table
