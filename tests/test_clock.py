from __future__ import annotations

import pytest

import routing as r


def test_manual_clock_moves_only_forward():
    clock = r.ManualClock(start_ms=5)
    assert clock.now_ms() == 5
    assert clock.advance(10) == 15
    assert clock.set(15) == 15
    with pytest.raises(ValueError, match="backwards"):
        clock.set(14)
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    assert clock.now_ms() == 15


def test_manual_clock_rejects_non_integers():
    with pytest.raises(TypeError, match="milliseconds"):
        r.ManualClock(start_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        r.ManualClock().advance(True)


def test_system_clock_is_wall_anchored_and_monotonic():
    import time

    clock = r.SystemClock()
    first = clock.now_ms()
    assert abs(first - time.time_ns() // 1_000_000) < 5_000
    readings = [clock.now_ms() for _ in range(1000)]
    assert readings == sorted(readings)
    assert isinstance(clock, r.Clock)
    assert isinstance(r.ManualClock(), r.Clock)
