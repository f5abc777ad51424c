"""Admission control and operator logs for the asyncio host (`NameServerHost`).

Java's name server runs route reads on their own executor (``clientRequestExecutor``,
queue 50 000) and everything else on another (``defaultExecutor``, queue 10 000); past a
queue's capacity Netty answers SYSTEM_BUSY. The host does the same with one bounded queue
per request class, each served by its own worker task: the workers take turns one request
at a time, so route reads keep being answered while registrations flood, and a request
that finds its class's queue full (by count or by bytes) is answered SYSTEM_BUSY at once.
Requests of one class are processed in arrival order.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from ..._errors import InvalidRequest
from ..wire._codec import RemotingCommand
from ..wire._codes import RequestCode

__all__ = ["BUSY_REMARK", "CLIENT", "DEFAULT", "ClassQueue", "Job", "request_class"]

CLIENT, DEFAULT = "client", "default"
#: Java's remark when an executor rejects a request (``NettyRemotingAbstract``).
BUSY_REMARK = "[OVERLOAD]system busy, start flow control for a while"
_CLIENT_CODES = frozenset({RequestCode.GET_ROUTEINFO_BY_TOPIC})
#: What a queued job costs beyond its body (header fields, objects).
_JOB_OVERHEAD_BYTES = 256


def request_class(command: RemotingCommand) -> str:
    """``client`` for route reads (Java's ClientRequestProcessor), else ``default``."""
    return CLIENT if command.code in _CLIENT_CODES else DEFAULT


class Job:
    """One admitted request of a connection (``conn`` is the host's connection record)."""

    __slots__ = ("command", "conn", "size", "start")

    def __init__(self, conn: Any, command: RemotingCommand) -> None:
        self.conn, self.command = conn, command
        self.size = len(command.body) + _JOB_OVERHEAD_BYTES
        self.start = time.perf_counter()


class ClassQueue:
    """A FIFO of `Job`s bounded by ``capacity`` jobs and ``max_bytes``. O(1) per call."""

    def __init__(self, name: str, *, capacity: int, max_bytes: int) -> None:
        if capacity <= 0 or max_bytes <= 0:
            raise InvalidRequest(f"{name} queue: capacity and max_bytes must be > 0, got "
                                 f"{capacity} and {max_bytes}", field=f"{name}_queue",
                                 value=(capacity, max_bytes))
        self.name, self.capacity, self.max_bytes = name, capacity, max_bytes
        self._jobs: collections.deque[Job] = collections.deque()
        self._bytes = 0
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.busy = False
        #: Requests answered SYSTEM_BUSY so far, and the largest length seen.
        self.rejected = 0
        self.high_water = 0

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def queued_bytes(self) -> int:
        return self._bytes

    def offer(self, job: Job) -> bool:
        """Queue ``job``, or return False (and count it) if the queue is full."""
        if len(self._jobs) >= self.capacity or self._bytes + job.size > self.max_bytes:
            self.rejected += 1
            return False
        self._jobs.append(job)
        self._bytes += job.size
        self.high_water = max(self.high_water, len(self._jobs))
        self._ready.set()
        self._idle.clear()
        return True

    async def take(self) -> Job:
        """The oldest job (waits for one); the queue counts as busy until `done`."""
        while not self._jobs:
            self._ready.clear()
            await self._ready.wait()
        job = self._jobs.popleft()
        self._bytes -= job.size
        self.busy = True
        return job

    def take_nowait(self) -> Job | None:
        """The oldest job if there is one (the queue stays busy)."""
        if not self._jobs:
            return None
        job = self._jobs.popleft()
        self._bytes -= job.size
        return job

    def take_while(self, codes: frozenset[int]) -> list[Job]:
        """Further jobs at the head whose code is in ``codes`` (to run them together)."""
        out: list[Job] = []
        while self._jobs and self._jobs[0].command.code in codes:
            job = self._jobs.popleft()
            self._bytes -= job.size
            out.append(job)
        return out

    def done(self) -> None:
        self.busy = False
        if not self._jobs:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Until every queued job has been processed."""
        while self._jobs or self.busy:
            self._idle.clear()
            await self._idle.wait()
