"""Spark Connect: `analyze` on a session of a remote Spark Connect server (``sc://HOST``).

A Spark Connect session (``SparkSession.builder.remote(...)``, pyspark's ``connect``
extra) has no ``sparkContext``: no JVM in this process, no py-files, no local properties,
no status tracker. The pipeline needs only DataFrames, ``mapInArrow``, ``persist`` and
``toArrow``, which Connect has; the few places that asked the driver's JVM go through the
functions here instead:

* `session_master`: the server's ``spark.master`` (a configuration read);
* `is_connect`: whether ``spark`` is such a session (the background sweep then runs in the
  server's default scheduler pool, and the CLI shows steps without a task bar);
* `remote_session`: connects, sets the runtime SQL settings `spark_session` sets, and
  ships this install's ``routing`` (with ``attrs``) as a Python artifact of the session
  (``addArtifacts(..., pyfile=True)``), so the server's Python workers replay with the
  client's code. The server's own Python needs pyarrow and pandas (as for any cluster).

Paths are read by the server: local journal paths must name the same files there (the
same machine, or storage mounted at the same path), as for ``--master spark://``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._session import (
    ARROW_BATCH_BYTES,
    SparkUnavailable,
    check_pyspark,
    is_local_master,
    local_cores,
    package_zip,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CONNECT_EXTRA", "is_connect", "remote_session", "session_master",
           "session_parallelism"]

#: What to install for `remote_session` (pyspark's ``connect`` extra: grpcio and friends).
CONNECT_EXTRA = "pip install 'rocketmq-routing[connect]'"

#: The runtime SQL settings `remote_session` sets (as `spark_session` does locally).
_SQL_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_BATCH_BYTES),
}


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (pyspark's ``pyspark.sql.connect`` classes). O(1)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_master(spark: Any) -> str:
    """The master ``spark`` runs on: the classic session's ``sparkContext.master``, or the
    Connect server's ``spark.master`` setting ("" if it does not say)."""
    if is_connect(spark):
        return str(spark.conf.get("spark.master", None) or "")
    return str(spark.sparkContext.master)


def session_parallelism(spark: Any) -> int:
    """How many tasks run at once: the cores of a local master, else Spark's default
    parallelism (the executors' cores on a cluster, unless set by hand; on a Connect
    server its ``spark.default.parallelism`` setting, 2 when unset: the client cannot ask
    the scheduler)."""
    master = session_master(spark)
    if is_local_master(master):
        return local_cores(master)
    if is_connect(spark):
        return max(1, int(spark.conf.get("spark.default.parallelism", None) or 2))
    return max(1, int(spark.sparkContext.defaultParallelism))


#: Spark Connect's port when the URL names none.
DEFAULT_CONNECT_PORT = 15002
#: Seconds `remote_session` waits for the server's port to accept a connection (the client
#: itself retries an unreachable server for minutes before it says so).
CONNECT_TIMEOUT_S = 5.0


def _check_listening(remote: str) -> None:
    """`SparkUnavailable` unless something accepts TCP connections at ``remote``'s host and
    port within `CONNECT_TIMEOUT_S`."""
    import socket
    from urllib.parse import urlparse

    where = urlparse("http://" + remote[len("sc://"):].split("/", 1)[0].split(";", 1)[0])
    host, port = where.hostname or "localhost", where.port or DEFAULT_CONNECT_PORT
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SparkUnavailable(
            f"no Spark Connect server answered at {remote} ({host}:{port}: {exc})") from None


def remote_session(remote: str, *, ship_code: bool = True) -> SparkSession:
    """A session of the Spark Connect server at ``remote`` (``sc://HOST[:PORT]``, Spark's
    connection string), set up for `analyze`: session time zone UTC, Arrow on, Arrow batches
    of at most `ARROW_BATCH_BYTES`, and (``ship_code``) this install's ``routing`` and
    ``attrs`` added as a Python artifact of the session (`package_zip`). Raises
    `SparkUnavailable` when pyspark or its ``connect`` extra is missing, or the server does
    not answer."""
    check_pyspark()
    if not remote.startswith("sc://"):
        raise ValueError(f"remote must be a Spark Connect URL sc://HOST[:PORT], got {remote!r}")
    try:
        import grpc  # noqa: F401  (pyspark's connect extra)
    except ImportError:
        raise SparkUnavailable(
            f"Spark Connect needs pyspark's connect extra (grpcio): {CONNECT_EXTRA}") from None
    _check_listening(remote)
    from pyspark.sql import SparkSession

    try:
        session: SparkSession = SparkSession.builder.remote(remote).getOrCreate()
        for key, value in _SQL_SETTINGS.items():
            session.conf.set(key, value)
    except Exception as exc:  # pyspark's and grpc's errors: keep them one sentence
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "SESSION_ALREADY_EXIST" in first:
            raise SparkUnavailable(
                "a classic Spark session runs in this process: a Spark Connect session "
                "needs a process of its own") from None
        raise SparkUnavailable(f"Spark Connect at {remote} failed: {first}") from None
    if ship_code:
        session.addArtifacts(str(package_zip()), pyfile=True)
    return session
