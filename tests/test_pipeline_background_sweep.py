"""`Analysis` waits for the topic sweep that `analyze` leaves running in the background
(no Spark needed: the sweep is a future, the tables are stand-ins)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from routing.pipeline._session import in_background as _in_background
from routing.pipeline._spark_tables import SWEEP_POOL, Analysis


class _Context:
    """A SparkContext stand-in: which thread set which local property."""

    def __init__(self) -> None:
        self.set: list[tuple[str, str, int]] = []

    def setLocalProperty(self, key: str, value: str) -> None:  # Spark's name
        self.set.append((key, value, threading.get_ident()))


def test_in_background_hands_over_the_result_and_the_error() -> None:
    context = _Context()
    ran_in: list[int] = []

    def job() -> int:
        ran_in.append(threading.get_ident())
        return 42

    assert _in_background(job, context, SWEEP_POOL).result(timeout=10) == 42
    # the job's own thread is in the sweep's pool, and the caller's is not
    assert context.set == [("spark.scheduler.pool", SWEEP_POOL, ran_in[0])]
    assert ran_in[0] != threading.get_ident()

    def fail() -> None:
        raise RuntimeError("sweep failed")

    with pytest.raises(RuntimeError, match="sweep failed"):
        _in_background(fail, context, SWEEP_POOL).result(timeout=10)


class _Table:
    """An empty Arrow table's stand-in."""

    def to_pylist(self) -> list[Any]:
        return []


class _Frame:
    """A DataFrame stand-in that records when it was collected and unpersisted."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def toArrow(self) -> _Table:  # DataFrame.toArrow
        self.log.append(f"collect {self.name}")
        return _Table()

    def unpersist(self) -> None:
        self.log.append(f"unpersist {self.name}")


def test_collect_waits_for_the_sweep_and_raises_its_error() -> None:
    log: list[str] = []
    sweeping: Future[Any] = Future()
    analysis = Analysis(tables={"sessions": _Frame(log, "sessions")}, partitions={},
                        sweeping=sweeping, swept=frozenset({"route_changes"}),
                        persisted=(_Frame(log, "stage"),))
    started = threading.Event()

    def collect() -> None:
        started.set()
        try:
            analysis.collect()
        except RuntimeError as exc:
            log.append(str(exc))

    thread = threading.Thread(target=collect)
    thread.start()
    started.wait(10)
    thread.join(0.05)
    assert thread.is_alive() and log == []  # still waiting for the sweep
    sweeping.set_exception(RuntimeError("sweep failed"))
    thread.join(10)
    assert log == ["sweep failed"]
    analysis.unpersist()  # the error was the readers'; the cache is still released
    assert log == ["sweep failed", "unpersist stage"]


def test_without_a_sweep_nothing_waits() -> None:
    log: list[str] = []
    analysis = Analysis(tables={"sessions": _Frame(log, "sessions")}, partitions={})
    analysis.ready()
    assert analysis.collect() == {"sessions": []} and log == ["collect sessions"]
