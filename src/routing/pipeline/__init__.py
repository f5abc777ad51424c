"""routing.pipeline — name-server journals turned into answers, on PySpark or in one process.

`analyze` runs on a `SparkSession` (embedded ``local[*]`` by default, any cluster with
``--master``, a Spark Connect server through `remote_session`) and returns the output
tables as DataFrames; `analyze_local` computes the same tables in one Python process and
is the reference the Spark path is tested against.
``docs/pipeline.md`` describes every table. pyspark is imported only when a Spark function
runs, so ``import routing.pipeline`` and `analyze_local` work without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._connect import remote_session
from ._schema import TABLES, Column, Table
from ._session import SparkUnavailable, check_java, spark_session
from .reference import RejectedRecords, analyze_local

if TYPE_CHECKING:
    from ._spark import Analysis, analyze, to_parquet

__all__ = (
    "TABLES",
    "Analysis",
    "Column",
    "RejectedRecords",
    "SparkUnavailable",
    "Table",
    "analyze",
    "analyze_local",
    "check_java",
    "remote_session",
    "spark_session",
    "to_parquet",
)


def __getattr__(name: str) -> Any:
    if name in ("Analysis", "analyze", "to_parquet"):
        from . import _spark

        return getattr(_spark, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
