"""`FakeLock` and `guarded`: the lock a served fake shares with its server loop."""

from __future__ import annotations

from routing.testing import FakeClock, FakeNameServer
from routing.testing._fake_lock import FakeLock, guarded


def test_deferred_work_runs_when_the_outermost_holder_lets_go() -> None:
    lock, done = FakeLock(), []
    lock.defer(lambda: done.append("now"))          # not held: at once
    with lock:
        with lock:
            lock.defer(lambda: done.append("later"))
            assert lock.held
        assert done == ["now"]                      # still held once
    assert done == ["now", "later"] and not lock.held


def test_guarded_methods_and_properties_run_holding_the_lock() -> None:
    @guarded(lambda obj: obj.lock)
    class Counter:
        def __init__(self) -> None:
            self.lock, self.n, self.held = FakeLock(), 0, []

        def bump(self) -> int:
            self.held.append(self.lock.held)
            self.n += 1
            return self.n

        def _private(self) -> bool:
            return self.lock.held

        @property
        def value(self) -> int:
            self.held.append(self.lock.held)
            return self.n

    counter = Counter()
    assert counter.bump() == 1 and counter.value == 1
    assert counter.held == [True, True] and not counter.lock.held
    assert counter._private() is False          # private names are left alone


def test_fakes_on_one_clock_share_its_lock() -> None:
    clock = FakeClock()
    a, b = FakeNameServer(clock=clock), FakeNameServer(clock=clock)
    assert a._lock is b._lock is clock.lock
    with clock.lock:
        a.broker(name="broker-a", topics=["T"])     # re-entrant from the holder's thread
    assert a.route("T") is not None
