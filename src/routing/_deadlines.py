"""Expiry deadlines: which live broker is due first, in O(1) per heartbeat and per idle scan.

Java's ``scanNotActiveBroker`` walks the whole live table every 5 s (O(L)). Here, live keys
sit in one insertion-ordered bucket per distinct timeout (timeouts take few values: 120 000 ms
by default, 10 000 ms for acting-master brokers). Because the clock never goes backwards,
a refreshed key always has the latest deadline of its bucket, so ``move_to_end`` keeps
every bucket sorted by deadline. A ``sortedcontainers.SortedList`` orders the bucket heads,
so the earliest deadline overall is its first element.

Costs: refresh O(1); idle scan amortised O(1); each expiry O(log B), B = number of
distinct timeouts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from sortedcontainers import SortedList

__all__ = ["DeadlineIndex"]

K = TypeVar("K", bound=Hashable)


class DeadlineIndex(Generic[K]):
    """Keys with deadlines (ms); ``pop_expired(now)`` yields keys whose deadline < now.

    The sorted heads are lazily invalidated: a refresh only ever *raises* a deadline, so a
    recorded head deadline is a lower bound of its bucket's real head, and is corrected
    only when it reaches the front of the sorted list. A bucket that empties keeps its
    record (a lower bound of nothing is still a lower bound) until a scan meets it at the
    front, so a broker that re-registers with a timeout of its own does not re-seat the
    sorted heads twice per cycle; at most `MAX_EMPTY_BUCKETS` empty buckets are kept.
    """

    MAX_EMPTY_BUCKETS = 16

    __slots__ = ("_buckets", "_empty", "_heads", "_recorded", "_timeout_of", "lower_bound")

    def __init__(self) -> None:
        # timeout -> (key -> deadline), oldest deadline first
        self._buckets: dict[int, OrderedDict[K, int]] = {}
        # (recorded head deadline, timeout) of every seated bucket; lower bounds
        self._heads: SortedList = SortedList()
        self._recorded: dict[int, int] = {}  # timeout -> recorded deadline, seated buckets
        self._empty: set[int] = set()  # timeouts of empty buckets still seated
        self._timeout_of: dict[K, int] = {}
        #: A deadline (ms) no key is below, or None when nothing is seated: a scan with
        #: ``now <= lower_bound`` has nothing to do. O(1) to read.
        self.lower_bound: int | None = None

    def __len__(self) -> int:
        return len(self._timeout_of)

    def __contains__(self, key: object) -> bool:
        return key in self._timeout_of

    def set(self, key: K, *, timeout_ms: int, deadline_ms: int) -> None:
        """Insert or refresh ``key``. ``deadline_ms`` must be >= every deadline already in
        the bucket of ``timeout_ms`` (true when deadline = now + timeout, now monotonic).
        O(1); O(log B) when it seats a bucket."""
        previous = self._timeout_of.get(key)
        if previous is not None and previous != timeout_ms:
            self.discard(key)
            previous = None
        bucket = self._buckets.get(timeout_ms)
        if bucket is None:
            bucket = self._buckets[timeout_ms] = OrderedDict()
        if timeout_ms not in self._recorded:
            self._seat(timeout_ms, deadline_ms)
        elif not bucket:
            self._empty.discard(timeout_ms)
        bucket[key] = deadline_ms
        if previous is not None:
            bucket.move_to_end(key)
        else:
            self._timeout_of[key] = timeout_ms

    def discard(self, key: K) -> None:
        """Remove ``key`` if present. O(1)."""
        timeout_ms = self._timeout_of.pop(key, None)
        if timeout_ms is None:
            return
        bucket = self._buckets[timeout_ms]
        del bucket[key]
        if not bucket:
            self._emptied(timeout_ms)

    def _seat(self, timeout_ms: int, deadline_ms: int) -> None:
        self._recorded[timeout_ms] = deadline_ms
        self._heads.add((deadline_ms, timeout_ms))
        self.lower_bound = self._heads[0][0]

    def _unseat(self, timeout_ms: int) -> None:
        self._heads.remove((self._recorded.pop(timeout_ms), timeout_ms))
        self._empty.discard(timeout_ms)
        del self._buckets[timeout_ms]
        self.lower_bound = self._heads[0][0] if self._heads else None

    def _emptied(self, timeout_ms: int) -> None:
        self._empty.add(timeout_ms)
        if len(self._empty) > self.MAX_EMPTY_BUCKETS:
            for timeout in list(self._empty):
                self._unseat(timeout)

    def _settle(self) -> None:
        """Correct stale head records until the first one is exact, unseating empty
        buckets met at the front. Amortised O(log B)."""
        heads = self._heads
        while heads:
            recorded, timeout_ms = heads[0]
            bucket = self._buckets[timeout_ms]
            if not bucket:
                self._unseat(timeout_ms)
                continue
            real = next(iter(bucket.values()))
            if real == recorded:
                return
            heads.remove((recorded, timeout_ms))
            heads.add((real, timeout_ms))
            self._recorded[timeout_ms] = real
            self.lower_bound = heads[0][0]

    def earliest(self) -> int | None:
        """The smallest deadline, or None when empty. Amortised O(1)."""
        self._settle()
        return self._heads[0][0] if self._heads else None

    def pop_expired(self, now_ms: int) -> list[K]:
        """Remove and return every key with ``deadline < now_ms`` (D1's strict rule), earliest
        first within each timeout bucket. O(1) when none is due; O(k + b log B) for k
        expired keys from b buckets."""
        expired: list[K] = []
        heads = self._heads
        while True:
            self._settle()
            if not heads or heads[0][0] >= now_ms:
                return expired
            timeout_ms = heads[0][1]
            bucket = self._buckets[timeout_ms]
            # drain this bucket's due keys (they are in deadline order), then re-settle
            due = []
            for key, deadline in bucket.items():
                if deadline >= now_ms:
                    break
                due.append(key)
            for key in due:
                del bucket[key]
                del self._timeout_of[key]
            expired.extend(due)
            if not bucket:
                self._emptied(timeout_ms)
                if heads and heads[0][1] == timeout_ms:
                    self._unseat(timeout_ms)  # an empty front bucket ends the loop cheaply

    def items(self) -> Iterator[tuple[K, int, int]]:
        """``(key, timeout_ms, deadline_ms)`` for every key, bucket by bucket. O(n)."""
        for timeout_ms, bucket in self._buckets.items():
            for key, deadline in bucket.items():
                yield key, timeout_ms, deadline

    def problems(self) -> list[str]:
        """Self-check for `RouteInfoManager.check_invariants`. O(n log n)."""
        found: list[str] = []
        for timeout_ms, bucket in self._buckets.items():
            recorded = self._recorded.get(timeout_ms)
            if recorded is None:
                found.append(f"deadline bucket {timeout_ms} ms is not seated")
                continue
            if not bucket:
                if timeout_ms not in self._empty:
                    found.append(f"empty deadline bucket {timeout_ms} ms is not marked empty")
                continue
            if timeout_ms in self._empty:
                found.append(f"deadline bucket {timeout_ms} ms is marked empty but is not")
            deadlines = list(bucket.values())
            if deadlines != sorted(deadlines):
                found.append(f"deadline bucket {timeout_ms} ms is not in deadline order")
            if recorded > deadlines[0]:
                found.append(f"deadline bucket {timeout_ms} ms head record {recorded} is not a "
                             f"lower bound of {deadlines[0]}")
            for key in bucket:
                if self._timeout_of.get(key) != timeout_ms:
                    found.append(f"deadline key {key!r} filed under the wrong timeout")
        if sorted((d, t) for t, d in self._recorded.items()) != list(self._heads):
            found.append("deadline head records disagree with the sorted heads")
        if set(self._recorded) != set(self._buckets):
            found.append("deadline head records and buckets cover different timeouts")
        if self.lower_bound != (self._heads[0][0] if self._heads else None):
            found.append(f"deadline lower bound {self.lower_bound} is not the first head")
        if len(self._empty) > self.MAX_EMPTY_BUCKETS:
            found.append(f"{len(self._empty)} empty deadline buckets kept")
        if sum(len(b) for b in self._buckets.values()) != len(self._timeout_of):
            found.append("deadline index key count disagrees with its buckets")
        return found
