"""Live pacing: a simulation that runs in scaled real time, for watchers of its journals.

``routing simulate --live --speed 60`` replays a simulated hour in a real minute: before
each event at simulated time ``t`` (ms from the start), the run waits until the wall clock
reads ``start + t / speed``. The wall clock and the sleep are injected (`LivePacing`), so a
test drives a live run on a `routing.ManualClock` whose sleeper advances it: no real
sleeps. The simulated world itself is unchanged (same events, same journal lines): pacing
only decides when lines are written.

With ``wall_times`` (``routing simulate --live``'s default) the name servers' clocks, and
so every journal ``ts`` and the times inside snapshots, read the wall clock's ms at the
start of the run plus the simulated time: a journal of a live run looks like one
``routing serve --journal`` wrote from that instant, and a watcher's lag (wall time less
the newest ``ts``) means something. Journal time is *not* divided by the speed: a
heartbeat period, the 120 s expiry timeout and every detection delay stay simulated
durations, as the replay needs them; so at ``speed`` S journal time runs S times as fast as
the wall clock (lag is exact at speed 1; at S > 1 the newest ``ts`` is ahead of the wall
clock by (S − 1) · elapsed). The simulation's own bookkeeping (faults, the summary, the
route timeline) stays on simulated time from 0.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import attrs

from .._clock import Clock, SystemClock
from .._errors import InvalidRequest

__all__ = ["LivePacing", "OffsetClock", "Pacer", "sleep_ms"]


def sleep_ms(ms: int) -> None:
    """Sleep ``ms`` milliseconds of real time (the default sleeper)."""
    time.sleep(ms / 1000)


def _positive_speed(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise InvalidRequest(f"speed must be a finite number > 0 (simulated ms per real ms), "
                             f"got {value!r}", field="speed", value=value)


def _min_sleep(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequest(f"min_sleep_ms must be an integer >= 0, got {value!r}",
                             field="min_sleep_ms", value=value)


@attrs.frozen(kw_only=True)
class LivePacing:
    """How a live run keeps pace with the wall clock.

    ``speed`` simulated ms per real ms (60: a simulated hour per minute); ``clock`` the wall
    clock (default `SystemClock`); ``sleep(ms)`` waits that long on it (default
    `sleep_ms`; a test passes ``ManualClock.advance``); a wait shorter than
    ``min_sleep_ms`` (ms) is skipped, so a dense stretch of events costs no sleep calls
    (the run is then at most that late, never early). ``wall_times``: stamp the journals
    on the wall clock (the module's docstring; default False: simulated ms from 0, the
    bytes of the run without ``live``).
    """

    speed: float = attrs.field(default=60.0, validator=_positive_speed)
    clock: Clock = attrs.field(factory=SystemClock)
    sleep: Callable[[int], object] = attrs.field(default=sleep_ms)
    min_sleep_ms: int = attrs.field(default=20, validator=_min_sleep)
    wall_times: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))

    def wall_ms(self, sim_ms: int) -> int:
        """Real ms that ``sim_ms`` simulated ms take at this speed (rounded up)."""
        return math.ceil(sim_ms / self.speed)

    def sim_ms(self, wall_ms: int) -> int:
        """Simulated ms that pass in ``wall_ms`` real ms at this speed (rounded)."""
        return round(wall_ms * self.speed)


class Pacer:
    """Waits, event by event, until the wall clock has caught up with simulated time.

    `start` anchors simulated time ``sim_start_ms`` to the wall clock's now; `wait_for`
    sleeps until ``anchor + (t - sim_start_ms) / speed``. ``slept_ms`` and ``sleeps``
    count what it waited; ``late_ms`` is the most the run fell behind (an event handled
    after its wall time, the simulation being slower than ``speed``). O(1) per event.
    """

    def __init__(self, pacing: LivePacing) -> None:
        self.pacing = pacing
        self._wall0 = 0
        self._sim0 = 0
        self.sleeps = 0
        self.slept_ms = 0
        self.late_ms = 0

    def start(self, sim_start_ms: int = 0) -> None:
        self._wall0 = self.pacing.clock.now_ms()
        self._sim0 = sim_start_ms

    @property
    def anchor_ms(self) -> int:
        """The wall clock's ms when `start` was called."""
        return self._wall0

    def due_wall_ms(self, sim_ms: int) -> int:
        """The wall time at which simulated time ``sim_ms`` is due."""
        return self._wall0 + self.pacing.wall_ms(sim_ms - self._sim0)

    def wait_for(self, sim_ms: int) -> None:
        """Sleep until simulated time ``sim_ms`` is due (no sleep when it is, or when the
        wait is shorter than ``min_sleep_ms``)."""
        wait = self.due_wall_ms(sim_ms) - self.pacing.clock.now_ms()
        if wait < 0:
            self.late_ms = max(self.late_ms, -wait)
        elif wait >= max(1, self.pacing.min_sleep_ms):
            self.pacing.sleep(wait)
            self.sleeps += 1
            self.slept_ms += wait


class OffsetClock:
    """``clock`` read ``offset_ms`` later: the name servers' clock of a live run with
    ``wall_times`` (simulated ms + the run's wall start). O(1)."""

    __slots__ = ("_clock", "offset_ms")

    def __init__(self, clock: Clock, offset_ms: int) -> None:
        self._clock = clock
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return self._clock.now_ms() + self.offset_ms

    def __repr__(self) -> str:
        return f"OffsetClock(offset_ms={self.offset_ms})"
