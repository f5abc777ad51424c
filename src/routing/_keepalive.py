"""The keep-alive paths of `RouteInfoManager`: ``heartbeat`` and ``query_data_version``.

Between two 30 s registrations every broker sends keep-alives; with 10⁵ brokers they are
the calls a name server answers most, so each is one lock, one lookup, one clock read and
one store of the refresh time (the deadline index re-files a refreshed broker only when
its filed deadline comes due), with nothing validated twice. A base
class of the manager, split from it by responsibility; it holds no state of its own.
"""

from __future__ import annotations

import threading

from ._clock import Clock
from ._messages import VersionAnswer
from ._state import Live, LiveKey, State
from ._validate import check_addr, check_name, fail
from ._values import DataVersion

__all__ = ["KeepAlive"]


class KeepAlive:
    """``heartbeat`` and ``query_data_version``, and the clock read every write shares.

    The attributes below are set by `RouteInfoManager.__init__`. The hot paths call the
    lock's ``acquire``/``release`` in a ``try``/``finally`` instead of a ``with`` statement:
    on CPython 3.11 here that is 100–200 ns less per call (``with`` looks up and calls
    ``__enter__``/``__exit__``, the latter with three arguments). Calling them through
    the attribute chain (``self._lock.acquire()``) measured faster than through bound
    methods stored on the instance; the clock's read costs the same either way. The one
    difference from ``with``: an asynchronous exception (KeyboardInterrupt, raised only in
    the main thread) landing between ``acquire`` returning and the ``try`` would leave
    the lock held; the other paths keep ``with``.
    """

    _lock: threading.RLock
    _clock: Clock
    _last_now: int
    _state: State
    _live: dict[LiveKey, Live]

    def query_data_version(self, *, cluster: str, broker_addr: str,
                           data_version: DataVersion) -> VersionAnswer:
        """QUERY_DATA_VERSION: is ``data_version`` different from the stored one? Always
        refreshes liveness of a known broker (5.x). O(1), as `heartbeat`, plus a comparison
        of three integers; the "unchanged" answer is made once per live entry and shared.
        ``data_version`` is checked before anything changes, but not when it is the very
        object stored (a host passing its broker's version object again)."""
        key = (cluster, broker_addr)
        self._lock.acquire()
        try:
            try:
                live = self._live.get(key)
            except TypeError:  # unhashable input: validation below names it
                live = None
            if live is not None:
                stored = live.data_version
                if (stored is not data_version and type(data_version) is not DataVersion
                        and not isinstance(data_version, DataVersion)):
                    fail("data_version", data_version, "a DataVersion")
                now = self._clock.now_ms()  # self._now(), inlined: the hot path
                last = self._last_now
                if now != last:  # (equal: nothing to store, the usual case at high rates)
                    if now < last:
                        now = last
                    else:
                        self._last_now = now
                live.last_update = now  # all of it: the deadline index reads it when due
                if stored is data_version or _same_version(stored, data_version):
                    answer = live.unchanged_answer
                    if answer is None:
                        answer = live.unchanged_answer = VersionAnswer(changed=False,
                                                                       stored=stored)
                    return answer
                return VersionAnswer(changed=True, stored=stored)
        finally:
            self._lock.release()
        if type(data_version) is not DataVersion and not isinstance(data_version, DataVersion):
            fail("data_version", data_version, "a DataVersion")
        self._known_key(cluster, broker_addr)  # unknown: raises if invalid (D7)
        return VersionAnswer(changed=True, stored=None)

    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool:
        """BROKER_HEARTBEAT: refresh a known broker's liveness; never creates an entry nor
        changes its timeout. False for an unknown broker. O(1): under the lock, one lookup,
        a clock read and one field store (Java: the same store); an unknown key is
        validated (D7) after."""
        key = (cluster, broker_addr)
        self._lock.acquire()
        try:
            try:
                live = self._live.get(key)
            except TypeError:  # unhashable input: validation below names it
                live = None
            if live is not None:
                now = self._clock.now_ms()  # self._now(), inlined: the hot path
                last = self._last_now
                if now != last:  # (equal: nothing to store, the usual case at high rates)
                    if now < last:
                        now = last
                    else:
                        self._last_now = now
                live.last_update = now  # all of it: the deadline index reads it when due
                return True
        finally:
            self._lock.release()
        self._known_key(cluster, broker_addr)
        return False

    def _now(self) -> int:
        """Read the clock once; a clock that steps back is treated as standing still."""
        now = self._clock.now_ms()
        if now < self._last_now:
            return self._last_now
        self._last_now = now
        return now

    def _known_key(self, cluster: object, addr: object) -> LiveKey:
        """``(cluster, addr)``, validated (D7) unless it is a live key: those were validated
        when they registered, so the common case costs one dictionary lookup."""
        if type(cluster) is str and type(addr) is str:
            key = (cluster, addr)
            if key in self._state.live:
                return key
        return (check_name("cluster", cluster), check_addr("broker_addr", addr))


def _same_version(stored: DataVersion, other: DataVersion) -> bool:
    """``stored == other`` for `DataVersion` (attrs' equality: same class, three equal
    fields), without the Python call of the generated ``__eq__`` when both are plain
    `DataVersion` objects. O(1)."""
    if type(stored) is DataVersion and type(other) is DataVersion:
        return (stored.counter == other.counter and stored.timestamp == other.timestamp
                and stored.state_version == other.state_version)
    return stored == other
