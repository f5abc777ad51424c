"""Admission control for the asyncio host (`NameServerHost`): one bounded queue per
request class, shared fairly between the connections.

Java's name server runs route reads on their own executor (``clientRequestExecutor``,
queue 50 000) and everything else on another (``defaultExecutor``, queue 10 000); past a
queue's capacity Netty answers SYSTEM_BUSY. The host does the same with one bounded queue
per request class, each served by its own worker task, so route reads keep being answered
while registrations flood; a request that finds its class's queue full (by count or by
bytes) is answered SYSTEM_BUSY at once. A connection's requests of one class are processed
in arrival order; the connections holding queued requests are served in turn, one request
each (as Java's threads give no order across connections either).

One event loop both reads and processes, where Java has threads for each, so two rules
keep an overload fair (issue 27, where 21 of 64 flooding connections went ~20 s without
an answer while the others got SYSTEM_BUSY by the ten thousand):

* **the workers keep pace with the readers**: a worker's turn serves as many requests as
  arrived in its class since its previous turn (admitted or answered SYSTEM_BUSY), at
  least ``MIN_TURN``. Answering SYSTEM_BUSY costs CPU too, so a fixed turn would let the
  rejected connections' re-sends starve the queue (it drained at 16 requests per loop
  iteration while each iteration read thousands), and what was admitted would wait for
  the queue's whole length at that pace. Each request in the queue is now served within
  about one loop iteration of being read, and as the connections take turns, each one's
  answers are spread over the turn rather than sent in one burst.
* **each connection holds at most its share of the queue**: ``capacity`` divided by the
  connections sending to it (rounded up: those that offered a request since the worker's
  previous turn or in the turn before, or hold queued ones); past its share a
  connection's request is answered SYSTEM_BUSY even when the queue has room. The
  connections read first in a loop iteration cannot fill the queue for the others, and a
  connection alone may use all of it.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from ..._errors import InvalidRequest
from ..wire._codec import RemotingCommand
from ..wire._codes import RequestCode

__all__ = ["BUSY_REMARK", "CLIENT", "DEFAULT", "MIN_TURN", "ClassQueue", "Job",
           "request_class"]

CLIENT, DEFAULT = "client", "default"
#: Java's remark when an executor rejects a request (``NettyRemotingAbstract``).
BUSY_REMARK = "[OVERLOAD]system busy, start flow control for a while"
_CLIENT_CODES = frozenset({RequestCode.GET_ROUTEINFO_BY_TOPIC})
#: What a queued job costs beyond its body (header fields, objects).
_JOB_OVERHEAD_BYTES = 256
#: Requests a worker serves in a turn at least, before yielding to the other class and
#: the readers (more when more arrived since its last turn: `ClassQueue.turn`).
MIN_TURN = 16


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
    """The queue of one request class: a FIFO of `Job` s per connection, the connections
    served in turn (one job each), bounded by ``capacity`` jobs and ``max_bytes`` in all
    and each connection by its share of ``capacity`` (module docstring). O(1) per call;
    one FIFO per connection with queued jobs."""

    def __init__(self, name: str, *, capacity: int, max_bytes: int) -> None:
        if capacity <= 0 or max_bytes <= 0:
            raise InvalidRequest(f"{name} queue: capacity and max_bytes must be > 0, got "
                                 f"{capacity} and {max_bytes}", field=f"{name}_queue",
                                 value=(capacity, max_bytes))
        self.name, self.capacity, self.max_bytes = name, capacity, max_bytes
        self._fifos: dict[Any, collections.deque[Job]] = {}  # per connection holding jobs
        self._ring: collections.deque[Any] = collections.deque()  # their turn order
        self._count = 0
        self._bytes = 0
        self._arrivals = 0  # offers since the last turn
        self._senders: set[Any] = set()  # connections that offered since the last turn
        self._last_senders = 0  # how many offered between the last two turns
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.busy = False
        #: Requests answered SYSTEM_BUSY so far, and the largest length seen.
        self.rejected = 0
        self.high_water = 0

    def __len__(self) -> int:
        """Jobs queued, all connections together."""
        return self._count

    @property
    def queued_bytes(self) -> int:
        """Bytes the queued jobs hold (each body plus a fixed overhead), at most
        ``max_bytes``."""
        return self._bytes

    def offer(self, job: Job) -> bool:
        """Queue ``job``, or return False (and count it) if the queue is full or its
        connection holds its share already."""
        self._arrivals += 1
        conn = job.conn
        self._senders.add(conn)
        fifo = self._fifos.get(conn)
        held = len(fifo) if fifo is not None else 0
        sharing = max(len(self._senders), self._last_senders, len(self._fifos) + (not held))
        if (self._count >= self.capacity or self._bytes + job.size > self.max_bytes
                or held >= -(-self.capacity // sharing)):
            self.rejected += 1
            return False
        if fifo is None:
            fifo = self._fifos[conn] = collections.deque()
            self._ring.append(conn)
        fifo.append(job)
        self._count += 1
        self._bytes += job.size
        self.high_water = max(self.high_water, self._count)
        self._ready.set()
        self._idle.clear()
        return True

    def turn(self) -> int:
        """How many requests the worker's turn starting now may serve: as many as arrived
        since the previous turn, at least `MIN_TURN`."""
        size, self._arrivals = max(MIN_TURN, self._arrivals), 0
        self._last_senders, self._senders = len(self._senders), set()
        return size

    async def take(self) -> Job:
        """The next job (waits for one); the queue counts as busy until `done`."""
        while not self._count:
            self._ready.clear()
            await self._ready.wait()
        self.busy = True
        return self._pop()

    def take_nowait(self) -> Job | None:
        """The next job if there is one (the queue stays busy)."""
        return self._pop() if self._count else None

    def take_while(self, codes: frozenset[int]) -> list[Job]:
        """Further jobs, in turn order, while their code is in ``codes`` (to run them
        together)."""
        out: list[Job] = []
        while self._count and self._fifos[self._ring[0]][0].command.code in codes:
            out.append(self._pop())
        return out

    def _pop(self) -> Job:
        """The first job of the connection whose turn it is; that connection goes to the
        back of the ring if it holds more."""
        conn = self._ring.popleft()
        fifo = self._fifos[conn]
        job = fifo.popleft()
        if fifo:
            self._ring.append(conn)
        else:
            del self._fifos[conn]
        self._count -= 1
        self._bytes -= job.size
        return job

    def done(self) -> None:
        self.busy = False
        if not self._count:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Until every queued job has been processed."""
        while self._count or self.busy:
            self._idle.clear()
            await self._idle.wait()
