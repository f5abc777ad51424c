"""Expiry deadlines: which live broker is due first, with keep-alives that never touch them.

Java's ``scanNotActiveBroker`` walks the whole live table every 5 s (O(L)). Here each live
entry is *filed* once in a binary heap (``heapq``) under a deadline that is a lower bound of
its real one (``last_update + timeout``), as the entry ``(deadline_ms, key)``. A keep-alive
raises ``last_update`` and nothing else (Java: one field store), so the filed deadline falls
behind; the index settles that lazily: when a filed deadline comes due, the entry is
re-filed under the real deadline if the broker was refreshed meanwhile, and only a real
deadline that has passed expires. The entry the holder (the live entry) points at is its
current one; any other entry for its key (the holder left, or re-filed after a timeout
change) is stale and is dropped when it reaches the top, or in a rebuild once stale
entries outnumber the current ones.

Costs: keep-alive O(1) with no index work; filing O(log n) (a new broker, a changed
timeout); an idle scan O(1) (one comparison with `DeadlineIndex.lower_bound`); settling
O(log n) per filed deadline that passed, which is at most one per broker per timeout
(120 s by default) whatever its keep-alive rate; each expiry O(log n); the rebuild O(n)
once per n stale entries, so O(1) amortised. Memory: one 2-tuple and one integer per
broker (about 97 B), about what an ordered-dict node cost before.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ["DeadlineIndex", "Filed"]

K = TypeVar("K", bound=Hashable)

#: An entry of the heap: (filed deadline in ms, key). Compared as tuples: ties by key.
Entry = tuple[int, K]


class Filed(Protocol):
    """What the index reads and writes on a key's holder (`routing._state.Live`)."""

    #: The holder's current entry in the index (None before `DeadlineIndex.file`).
    entry: tuple[int, object] | None
    #: The last refresh (ms) and the timeout (ms): the real deadline is their sum.
    last_update: int
    timeout: int


class DeadlineIndex(Generic[K]):
    """Keys with deadlines (ms); ``pop_expired(now)`` removes and returns every key whose
    real deadline (``last_update + timeout`` of its holder) is before ``now`` (D1's strict
    rule). ``lookup(key)`` gives a key's holder (or None once it is gone).

    `lower_bound` is the smallest filed deadline, or None when nothing is filed: no real
    deadline is below it, so a scan with ``now <= lower_bound`` has nothing to do. After
    `settle`, either it is not before ``now`` or the top entry is really due.
    """

    #: Stale entries kept before a rebuild, beyond half the heap.
    SLACK = 64

    __slots__ = ("_heap", "_lookup", "_stale", "lower_bound")

    def __init__(self, lookup: Callable[[K], Filed | None]) -> None:
        self._heap: list[Entry[K]] = []
        self._lookup = lookup
        self._stale = 0  # entries of the heap that are no holder's current entry
        #: The smallest filed deadline (ms), or None when the heap is empty. O(1) to read.
        self.lower_bound: int | None = None

    def __len__(self) -> int:
        """The number of current entries (one per filed holder). O(1)."""
        return len(self._heap) - self._stale

    def file(self, key: K, holder: Filed) -> None:
        """File ``holder`` (the holder of ``key``) under its real deadline: for a key that
        enters, and after a timeout change (a shorter timeout would leave the filed
        deadline above the real one). Its previous entry, if any, becomes stale. A holder
        that replaces another one of the same key with the same timeout takes over its
        entry instead (``new.entry = old.entry``: the filed deadline stays a lower bound,
        ``last_update`` only grows). O(log n)."""
        if holder.entry is not None:
            self._stale += 1
        entry: Entry[K] = (holder.last_update + holder.timeout, key)
        heapq.heappush(self._heap, entry)
        holder.entry = entry
        bound = self.lower_bound
        if bound is None or entry[0] < bound:
            self.lower_bound = entry[0]
        self._maybe_rebuild()

    def forget(self, holder: Filed) -> None:
        """``holder`` leaves the index (its key was removed): its entry becomes stale.
        O(1), plus an O(n) rebuild once per n stale entries."""
        if holder.entry is not None:
            holder.entry = None
            self._stale += 1
            self._maybe_rebuild()

    def _maybe_rebuild(self) -> None:
        heap = self._heap
        if self._stale > len(heap) // 2 + self.SLACK:
            kept = [entry for entry, _ in self._current()]
            heapq.heapify(kept)
            self._heap, self._stale = kept, 0
            self.lower_bound = kept[0][0] if kept else None

    def settle(self, now_ms: int) -> None:
        """Re-file or drop the top entries whose filed deadline is before ``now_ms`` until
        the top one is not before it or is really due. Changes no holder's deadline, only
        where it is filed. O(log n) per entry moved (see the module's costs)."""
        self._walk(now_ms, None)

    def pop_expired(self, now_ms: int) -> list[K]:
        """Remove and return every key whose real deadline is before ``now_ms``, in real
        deadline order (ties: by key); their holders are left with no entry. O(1) when
        `lower_bound` is not before ``now_ms``; otherwise O(log n) per key returned or
        entry settled."""
        bound = self.lower_bound
        if bound is None or bound >= now_ms:
            return []
        due: list[tuple[int, K]] = []
        self._walk(now_ms, due)
        if len(due) == 1:  # the usual case: one broker gone silent
            return [due[0][1]]
        due.sort()
        return [key for _, key in due]

    def _walk(self, now_ms: int, due: list[tuple[int, K]] | None) -> None:
        """Settle the entries filed before ``now_ms``: drop the stale ones, re-file the
        refreshed ones under their real deadline; a really due one ends the walk
        (``due`` None) or is popped into ``due`` as (real deadline, key) and its holder
        left with no entry."""
        heap, lookup = self._heap, self._lookup
        while heap:
            entry = heap[0]
            if entry[0] >= now_ms:
                break
            key = entry[1]
            holder = lookup(key)
            if holder is None or holder.entry is not entry:  # stale
                heapq.heappop(heap)
                self._stale -= 1
                continue
            real = holder.last_update + holder.timeout
            if real < now_ms:  # really due
                if due is None:
                    break
                heapq.heappop(heap)
                holder.entry = None
                due.append((real, key))
                continue
            refiled: Entry[K] = (real, key)
            heapq.heapreplace(heap, refiled)
            holder.entry = refiled
        self.lower_bound = heap[0][0] if heap else None

    def earliest(self) -> int | None:
        """The smallest real deadline, or None when empty. O(n)."""
        return min((deadline for _, deadline in self.items()), default=None)

    def _current(self) -> Iterator[tuple[Entry[K], Filed]]:
        """(entry, holder) of every current entry (its holder's own), in heap order; the
        others are stale. O(n). (`_walk` makes the same test inline: its hot loop.)"""
        lookup = self._lookup
        for entry in self._heap:
            holder = lookup(entry[1])
            if holder is not None and holder.entry is entry:
                yield entry, holder

    def items(self) -> Iterator[tuple[K, int]]:
        """``(key, real deadline ms)`` for every filed key. O(n)."""
        for entry, holder in self._current():
            yield entry[1], holder.last_update + holder.timeout

    def problems(self) -> list[str]:
        """Self-check for `RouteInfoManager.check_invariants`. O(n)."""
        found: list[str] = []
        heap = self._heap
        for i, entry in enumerate(heap):
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap) and heap[child] < entry:
                    found.append(f"deadline heap out of order at {i}")
        current = 0
        seen: set[object] = set()
        for entry, holder in self._current():
            current += 1
            if entry[1] in seen:
                found.append(f"deadline key {entry[1]!r} is current twice")
            seen.add(entry[1])
            if entry[0] > holder.last_update + holder.timeout:
                found.append(f"deadline key {entry[1]!r} is filed at {entry[0]}, after its "
                             f"real deadline {holder.last_update + holder.timeout}")
        if len(heap) - current != self._stale:
            found.append(f"deadline heap counts {self._stale} stale entries, holds "
                         f"{len(heap) - current}")
        if self.lower_bound != (heap[0][0] if heap else None):
            found.append(f"deadline lower bound {self.lower_bound} is not the top of the heap")
        return found
