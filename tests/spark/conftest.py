"""One SparkSession for the whole test run (``research/pyspark-notes.md``: a session costs
about 10 s once per process, then about 0.5 s per small job).

``local[2,2]`` (a failed task is tried again once, as with the default ``local[*,2]``;
plain ``local[2]`` would never retry), UI off, one or two shuffle partitions and the
C1-only JIT with the serial GC (about 20 % faster on small jobs). Spark tests are marked
``spark`` and skip with the reason when Java 17+ or pyspark is missing, so the
pure-Python suite still runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from routing.pipeline._session import (
    SparkUnavailable,
    check_java,
    check_pyspark,
    spark_session,
)


def _unavailable() -> str | None:
    try:
        check_pyspark()
        check_java()
    except SparkUnavailable as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/spark/ is a Spark test."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared session; skips the test when Spark cannot run here."""
    reason = _unavailable()
    if reason is not None:
        pytest.skip(f"needs pyspark and Java 17+: {reason}")
    session = spark_session("local[2,2]", app_name="routing-tests", shuffle_partitions=2,
                            for_tests=True)
    yield session
    session.stop()
