"""Expiry deadlines: which live broker is due first, in O(1) per heartbeat and per idle scan.

Java's ``scanNotActiveBroker`` walks the whole live table every 5 s (O(L)). Here, live keys
sit in one insertion-ordered bucket per distinct timeout (timeouts take few values: 120 000 ms
by default, 10 000 ms for acting-master brokers). Because the clock never goes backwards,
a refreshed key always has the latest deadline of its bucket, so ``move_to_end`` keeps
every bucket sorted by deadline. A ``sortedcontainers.SortedList`` orders the buckets by a
recorded lower bound of their first deadline, so a scan walks only the front of it; the
scan walks a plain-list copy of it, renewed whenever the order changes (seating, correcting
or unseating a bucket: O(B) for a handful of timeouts), which spares every scan the
sorted list's Python-level iteration.

Deadlines are kept as *refresh times* ``deadline - timeout`` (the bucket knows its
timeout). Either each bucket holds them as its values, or (``refresh_of`` given, as the
manager does) the caller keeps them and the index reads them through ``refresh_of(key)``
when it needs them (scans, checks): the buckets then hold None, and a refresh is a single
``move_to_end`` (≈ 23 ns here, against ≈ 53 ns for a store and a move), with no integer
of its own per broker.

Costs: refresh O(1); idle scan O(1) (one comparison with `DeadlineIndex.lower_bound`);
each expiry O(1) amortised, plus O(B) when a bucket's record must be corrected
(B = number of distinct timeouts).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

from sortedcontainers import SortedList

__all__ = ["DeadlineIndex"]

K = TypeVar("K", bound=Hashable)

_ABSENT = object()  # `discard`'s "no such key" (bucket values may be None)


class DeadlineIndex(Generic[K]):
    """Keys with deadlines (ms); ``pop_expired(now)`` yields keys whose deadline < now.

    Every bucket is seated in the sorted heads under a *recorded* deadline that is a lower
    bound of its keys' deadlines. Records are corrected lazily: a refresh only ever raises
    a deadline, so the record is fixed (one ``remove`` + ``add``) only when a scan reaches
    a bucket whose record has passed but whose keys are not due. A bucket that empties
    stays seated, marked empty, until more than `MAX_EMPTY_BUCKETS` are empty; scans skip
    it, and a key entering it needs no re-seating. So a broker with a timeout of its own
    that registers and expires over and over costs no sorted-list operation at all.

    `lower_bound` is kept separately: a deadline no key is below, or None when there is
    no key. Scans with ``now <= lower_bound`` return at once; a scan that does work
    recomputes it from the first non-empty bucket's record.

    The index does not remember which bucket a key is in: the caller passes the key's
    timeout to `discard` (and its previous timeout to `set` when it changes). The
    manager has it on the live entry, and a second key -> timeout table would cost a
    dictionary entry per broker and a lookup on every expiry.
    """

    MAX_EMPTY_BUCKETS = 16

    __slots__ = ("_buckets", "_count", "_empty", "_heads", "_order", "_recorded",
                 "_refresh_of", "lower_bound")

    def __init__(self, refresh_of: Callable[[K], int] | None = None) -> None:
        #: None: the buckets hold each key's refresh time; otherwise the refresh time of a
        #: key, kept by the caller, which must call `touch` (or ``move_to_end`` on the
        #: key's bucket) right after raising it. O(1) per call.
        self._refresh_of = refresh_of
        # timeout -> (key -> refresh time = deadline - timeout, or None with refresh_of),
        # oldest first; every bucket is seated
        self._buckets: dict[int, OrderedDict[K, int | None]] = {}
        # (recorded deadline, timeout) of every bucket; each record is a lower bound
        self._heads: SortedList = SortedList()
        # the heads as a plain list, re-copied after each (rare) change of the heads, so a
        # scan walks them without SortedList's Python-level iteration. O(B) per change.
        self._order: list[tuple[int, int]] = []
        self._recorded: dict[int, int] = {}  # timeout -> recorded deadline
        self._empty: set[int] = set()  # timeouts of the empty buckets
        self._count = 0
        #: A deadline (ms) no key is below, or None when no key is held: a scan with
        #: ``now <= lower_bound`` has nothing to do. O(1) to read.
        self.lower_bound: int | None = None

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: object) -> bool:
        """O(B), B = distinct timeouts."""
        return any(key in bucket for bucket in self._buckets.values())

    def set(self, key: K, *, timeout_ms: int, deadline_ms: int,
            previous_timeout_ms: int | None = None, refresh_ms: int | None = None
            ) -> OrderedDict[K, int | None]:
        """Insert or refresh ``key``. ``deadline_ms`` must be >= every deadline already in
        the bucket of ``timeout_ms`` (true when deadline = now + timeout, now monotonic).
        A key that moves to another timeout needs ``previous_timeout_ms``. ``refresh_ms``
        (``deadline_ms - timeout_ms``, when the caller holds that integer) is stored as is.
        Returns the key's bucket: while the key is in it the bucket stays this object, so
        a caller may refresh the key there itself (see `touch`). With ``refresh_of``, the
        caller's refresh time must already be ``deadline_ms - timeout_ms``. O(1); O(B)
        when it seats a new bucket (B = distinct timeouts)."""
        if previous_timeout_ms is not None and previous_timeout_ms != timeout_ms:
            self.discard(key, timeout_ms=previous_timeout_ms)
        bucket = self._buckets.get(timeout_ms)
        if bucket is None:
            bucket = self._buckets[timeout_ms] = OrderedDict()
            self._recorded[timeout_ms] = deadline_ms
            self._heads.add((deadline_ms, timeout_ms))
            self._order = list(self._heads)
            self._lower_to(deadline_ms)
        elif not bucket:
            self._empty.discard(timeout_ms)
            self._lower_to(deadline_ms)  # the bucket's record may be far older: keep it
        refresh: int | None = deadline_ms - timeout_ms if refresh_ms is None else refresh_ms
        if self._refresh_of is not None:
            refresh = None
        if key in bucket:
            bucket[key] = refresh
            bucket.move_to_end(key)
        else:
            bucket[key] = refresh
            self._count += 1
        return bucket

    def bucket_of(self, timeout_ms: int) -> OrderedDict[K, int | None] | None:
        """The bucket of ``timeout_ms`` (refresh times by key, or None with
        ``refresh_of``), or None. O(1)."""
        return self._buckets.get(timeout_ms)

    def touch(self, key: K, timeout_ms: int, now_ms: int) -> None:
        """Refresh a key the index holds under ``timeout_ms`` (the caller knows it is there)
        at ``now_ms``, its new deadline being ``now_ms + timeout_ms``: `set` without its
        checks. A holder of the key's bucket (returned by `set`) may do the same two steps
        itself. ``now_ms`` must be >= every refresh in the bucket (a
        monotonic clock). O(1): one store and one ``move_to_end`` (with ``refresh_of``,
        where the caller has stored ``now_ms`` itself, the move only)."""
        bucket = self._buckets[timeout_ms]
        if self._refresh_of is None:
            bucket[key] = now_ms
        bucket.move_to_end(key)

    def _refreshes(self, bucket: OrderedDict[K, int | None]) -> Iterable[int]:
        """The bucket's refresh times, oldest first. O(1) to make, O(1) per item."""
        of = self._refresh_of
        return map(of, bucket) if of is not None else bucket.values()  # type: ignore[return-value]

    def _first(self, bucket: OrderedDict[K, int | None]) -> int:
        """The oldest refresh time (ms) of a non-empty bucket. O(1)."""
        return next(iter(self._refreshes(bucket)))

    def _last(self, bucket: OrderedDict[K, int | None]) -> int:
        """The newest refresh time (ms) of a non-empty bucket. O(1)."""
        of = self._refresh_of
        if of is not None:
            return of(next(reversed(bucket)))
        return next(reversed(bucket.values()))  # type: ignore[return-value]

    def _lower_to(self, deadline_ms: int) -> None:
        bound = self.lower_bound
        if bound is None or deadline_ms < bound:
            self.lower_bound = deadline_ms

    def discard(self, key: K, *, timeout_ms: int) -> None:
        """Remove ``key`` (held under ``timeout_ms``) if present. O(1); `lower_bound`
        stays a valid (lower) bound."""
        bucket = self._buckets.get(timeout_ms)
        if bucket is None or bucket.pop(key, _ABSENT) is _ABSENT:
            return
        self._count -= 1
        if not bucket:
            self._emptied(timeout_ms)

    def _emptied(self, timeout_ms: int) -> None:
        """Mark a bucket empty; past `MAX_EMPTY_BUCKETS`, unseat every empty one."""
        empty = self._empty
        empty.add(timeout_ms)
        if len(empty) > self.MAX_EMPTY_BUCKETS:
            self._unseat_empty()

    def _unseat_empty(self) -> None:
        """Unseat every empty bucket. O(e log B + B)."""
        for timeout in self._empty:
            self._heads.remove((self._recorded.pop(timeout), timeout))
            del self._buckets[timeout]
        self._empty.clear()
        self._order = list(self._heads)
        if not self._count:
            self.lower_bound = None

    def earliest(self) -> int | None:
        """The smallest deadline, or None when empty. O(B)."""
        return min((self._first(bucket) + timeout for timeout, bucket
                    in self._buckets.items() if bucket), default=None)

    def pop_expired(self, now_ms: int) -> list[K]:
        """Remove and return every key with ``deadline < now_ms`` (D1's strict rule), in
        deadline order (ties: by bucket, then by refresh order). O(1) when none is due;
        otherwise one walk over the front of the sorted heads, O(k + e + b·B) for k
        expired keys, e ≤ `MAX_EMPTY_BUCKETS` empty buckets passed and b buckets whose
        record had to be corrected (plus O(k log k) when several buckets expire at once).
        """
        bound = self.lower_bound
        if bound is None or bound >= now_ms:
            return []
        heads, buckets = self._heads, self._buckets
        expired: list[K] = []
        deadlines: list[int] = []  # beside `expired`, to merge several buckets' keys
        sources = 0
        fixes: list[tuple[tuple[int, int], int]] = []  # (stale head, real first deadline)
        bound = None
        for head in self._order:  # nothing changes the heads inside the walk
            recorded, timeout_ms = head
            if recorded >= now_ms:  # a lower bound of this and every later bucket
                bound = recorded
                break
            bucket = buckets[timeout_ms]
            if not bucket:
                continue
            limit = now_ms - timeout_ms  # refreshed before it: deadline < now, due
            if self._last(bucket) < limit:  # all due: empty the bucket, it stays seated
                sources += 1
                deadlines.extend([refresh + timeout_ms for refresh in self._refreshes(bucket)])
                expired.extend(bucket)
                bucket.clear()
                self._empty.add(timeout_ms)
                continue
            due = 0
            for refresh in self._refreshes(bucket):  # deadline order: the due keys first
                if refresh >= limit:
                    break
                deadlines.append(refresh + timeout_ms)
                due += 1
            if due:  # some, not all (the last deadline is not due)
                sources += 1
            for _ in range(due):
                expired.append(bucket.popitem(last=False)[0])
            fixes.append((head, self._first(bucket) + timeout_ms))
        self._count -= len(expired)
        if fixes:
            recorded_of = self._recorded
            for head, real in fixes:
                heads.remove(head)
                heads.add((real, head[1]))
                recorded_of[head[1]] = real
                if bound is None or real < bound:
                    bound = real
            self._order = list(heads)
        self.lower_bound = bound if self._count else None
        if len(self._empty) > self.MAX_EMPTY_BUCKETS:
            self._unseat_empty()
        if sources > 1:  # stable: equal deadlines keep their walk order
            order = sorted(range(len(expired)), key=deadlines.__getitem__)
            return [expired[i] for i in order]
        return expired

    def items(self) -> Iterator[tuple[K, int, int]]:
        """``(key, timeout_ms, deadline_ms)`` for every key, bucket by bucket. O(n)."""
        for timeout_ms, bucket in self._buckets.items():
            for key, refresh in zip(bucket, self._refreshes(bucket), strict=True):
                yield key, timeout_ms, refresh + timeout_ms

    def problems(self) -> list[str]:
        """Self-check for `RouteInfoManager.check_invariants`. O(n log n)."""
        found: list[str] = []
        seen: dict[K, int] = {}
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
            deadlines = [refresh + timeout_ms for refresh in self._refreshes(bucket)]
            if deadlines != sorted(deadlines):
                found.append(f"deadline bucket {timeout_ms} ms is not in deadline order")
            if recorded > deadlines[0]:
                found.append(f"deadline bucket {timeout_ms} ms head record {recorded} is not a "
                             f"lower bound of {deadlines[0]}")
            for key in bucket:
                if seen.setdefault(key, timeout_ms) != timeout_ms:
                    found.append(f"deadline key {key!r} is in buckets {seen[key]} and "
                                 f"{timeout_ms}")
        if sorted((d, t) for t, d in self._recorded.items()) != list(self._heads):
            found.append("deadline head records disagree with the sorted heads")
        if self._order != list(self._heads):
            found.append("the copy of the deadline heads is stale")
        if set(self._recorded) != set(self._buckets):
            found.append("deadline head records and buckets cover different timeouts")
        if not self._empty <= set(self._buckets):
            found.append("an empty-marked deadline bucket does not exist")
        earliest = self.earliest()
        if earliest is not None and (self.lower_bound is None or self.lower_bound > earliest):
            found.append(f"deadline lower bound {self.lower_bound} is above the earliest "
                         f"deadline {earliest}")
        if len(self._empty) > self.MAX_EMPTY_BUCKETS:
            found.append(f"{len(self._empty)} empty deadline buckets kept")
        if self._refresh_of is not None and any(
                v is not None for b in self._buckets.values() for v in b.values()):
            found.append("a deadline bucket holds a refresh time its caller keeps")
        if sum(len(b) for b in self._buckets.values()) != self._count:
            found.append("deadline index key count disagrees with its buckets")
        return found
