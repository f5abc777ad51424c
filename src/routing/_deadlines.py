"""Expiry deadlines: which live broker is due first, in O(1) per heartbeat and per idle scan.

Java's ``scanNotActiveBroker`` walks the whole live table every 5 s (O(L)). Here, live keys
sit in one insertion-ordered bucket per distinct timeout (timeouts take few values: 120 000 ms
by default, 10 000 ms for acting-master brokers). Because the clock never goes backwards,
a refreshed key always has the latest deadline of its bucket, so ``move_to_end`` keeps
every bucket sorted by deadline. A ``sortedcontainers.SortedList`` orders the bucket heads,
so the earliest deadline overall is its first element.

Costs: refresh O(1) (O(log B) when the refreshed key was its bucket's head, B = number
of distinct timeouts); idle scan O(1); each expiry O(log B).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from sortedcontainers import SortedList

__all__ = ["DeadlineIndex"]

K = TypeVar("K", bound=Hashable)


class DeadlineIndex(Generic[K]):
    """Keys with deadlines (ms); ``pop_expired(now)`` yields keys whose deadline < now."""

    __slots__ = ("_buckets", "_heads", "_timeout_of")

    def __init__(self) -> None:
        # timeout -> (key -> deadline), oldest deadline first
        self._buckets: dict[int, OrderedDict[K, int]] = {}
        # (head deadline, timeout) of every non-empty bucket
        self._heads: SortedList = SortedList()
        self._timeout_of: dict[K, int] = {}

    def __len__(self) -> int:
        return len(self._timeout_of)

    def __contains__(self, key: object) -> bool:
        return key in self._timeout_of

    def set(self, key: K, *, timeout_ms: int, deadline_ms: int) -> None:
        """Insert or refresh ``key``. ``deadline_ms`` must be >= every deadline already in
        the bucket of ``timeout_ms`` (true when deadline = now + timeout, now monotonic)."""
        previous = self._timeout_of.get(key)
        if previous is not None and previous != timeout_ms:
            self.discard(key)
            previous = None
        bucket = self._buckets.get(timeout_ms)
        if bucket is None:
            bucket = self._buckets[timeout_ms] = OrderedDict()
        head_before = next(iter(bucket.items()), None)
        bucket[key] = deadline_ms
        if previous is not None:
            bucket.move_to_end(key)
        else:
            self._timeout_of[key] = timeout_ms
        if head_before is None or head_before[0] == key:
            self._reseat(timeout_ms, bucket, head_before)

    def discard(self, key: K) -> None:
        """Remove ``key`` if present. O(1), or O(log B) when it was a bucket head."""
        timeout_ms = self._timeout_of.pop(key, None)
        if timeout_ms is None:
            return
        bucket = self._buckets[timeout_ms]
        head_before = next(iter(bucket.items()))
        del bucket[key]
        if head_before[0] == key:
            self._reseat(timeout_ms, bucket, head_before)
        if not bucket:
            del self._buckets[timeout_ms]

    def earliest(self) -> int | None:
        """The smallest deadline, or None when empty. O(1)."""
        return self._heads[0][0] if self._heads else None

    def pop_expired(self, now_ms: int) -> list[K]:
        """Remove and return every key with ``deadline < now_ms`` (D1's strict rule), earliest
        first. O(1) when none is due; O(k log B) for k expired keys."""
        expired: list[K] = []
        heads = self._heads
        while heads and heads[0][0] < now_ms:
            _, timeout_ms = heads[0]
            bucket = self._buckets[timeout_ms]
            key, _deadline = next(iter(bucket.items()))
            expired.append(key)
            self.discard(key)
        return expired

    def items(self) -> Iterator[tuple[K, int, int]]:
        """``(key, timeout_ms, deadline_ms)`` for every key, bucket by bucket. O(n)."""
        for timeout_ms, bucket in self._buckets.items():
            for key, deadline in bucket.items():
                yield key, timeout_ms, deadline

    def problems(self) -> list[str]:
        """Self-check for `RouteInfoManager.check_invariants`. O(n log n)."""
        found: list[str] = []
        expected_heads = []
        for timeout_ms, bucket in self._buckets.items():
            if not bucket:
                found.append(f"deadline bucket {timeout_ms} ms is empty but kept")
                continue
            deadlines = list(bucket.values())
            if deadlines != sorted(deadlines):
                found.append(f"deadline bucket {timeout_ms} ms is not in deadline order")
            expected_heads.append((deadlines[0], timeout_ms))
            for key in bucket:
                if self._timeout_of.get(key) != timeout_ms:
                    found.append(f"deadline key {key!r} filed under the wrong timeout")
        if sorted(expected_heads) != list(self._heads):
            found.append(f"deadline heads {list(self._heads)} != expected {sorted(expected_heads)}")
        if sum(len(b) for b in self._buckets.values()) != len(self._timeout_of):
            found.append("deadline index key count disagrees with its buckets")
        return found

    def _reseat(
        self, timeout_ms: int, bucket: OrderedDict[K, int], head_before: tuple[K, int] | None
    ) -> None:
        if head_before is not None:
            self._heads.remove((head_before[1], timeout_ms))
        head_after = next(iter(bucket.items()), None)
        if head_after is not None:
            self._heads.add((head_after[1], timeout_ms))
