"""Spark Connect: `analyze` on a session of a remote Spark Connect server (``sc://HOST``).

A Spark Connect session (``SparkSession.builder.remote(...)``, pyspark's ``connect``
extra) has no ``sparkContext``: no JVM in this process, no py-files, no local properties,
no status tracker. The pipeline needs only DataFrames, ``mapInArrow``, ``persist`` and
``toArrow``, which Connect has; the few places that asked the driver's JVM go through the
functions here instead:

* `session_master` and `session_parallelism`: the server's ``spark.master`` (a
  configuration read) and how many tasks it runs at once (one tiny job, remembered);
* `is_connect`: whether ``spark`` is such a session (the background sweep then runs in the
  server's default scheduler pool, and the CLI's bar counts the tasks the server reports:
  ``cli/_progress.ConnectTasks``);
* `remote_session`: connects, sets the runtime SQL settings `spark_session` sets, and
  ships this install's ``routing`` (with ``attrs``) as a Python artifact of the session
  (``addArtifacts(..., pyfile=True)``), so the server's Python workers replay with the
  client's code. The server's own Python needs pyarrow and pandas (as for any cluster).

Paths are read by the server: local journal paths must name the same files there (the
same machine, or storage mounted at the same path), as for ``--master spark://``.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from .._errors import InvalidRequest
from ._errors import SparkUnavailable
from ._session import (
    ARROW_BATCH_BYTES,
    check_pyspark,
    is_connect,
    is_local_master,
    local_cores,
    package_zip,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CONNECT_EXTRA", "is_connect", "redacted", "remote_session", "session_master",
           "session_parallelism"]

#: What to install for `remote_session` (pyspark's ``connect`` extra: grpcio and friends).
CONNECT_EXTRA = "pip install 'rocketmq-routing[connect]'"
#: Spark Connect's port when the URL names none.
DEFAULT_CONNECT_PORT = 15002
#: Seconds `remote_session` waits for the server's port to accept a connection (the client
#: itself retries an unreachable server for minutes before it says so).
CONNECT_TIMEOUT_S = 5.0

#: The runtime SQL settings `remote_session` sets (as `spark_session` does locally).
_SQL_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_BATCH_BYTES),
}
#: Task slots of the Connect sessions asked so far, by session id.
_PARALLELISM: dict[str, int] = {}


def session_master(spark: Any) -> str:
    """The master ``spark`` runs on: the classic session's ``sparkContext.master``, or the
    Connect server's ``spark.master`` setting ("" if it does not say)."""
    if is_connect(spark):
        return str(spark.conf.get("spark.master", None) or "")
    return str(spark.sparkContext.master)


def session_parallelism(spark: Any) -> int:
    """How many tasks run at once: the cores of a local master, else Spark's default
    parallelism (the executors' cores on a cluster, unless set by hand). A Connect client
    cannot ask the scheduler, and ``local[*]`` there means the server's cores, not
    this machine's: it runs one tiny job instead (a range split by the default
    parallelism; its highest partition id), once per session."""
    master, connect = session_master(spark), is_connect(spark)
    if is_local_master(master) and not (connect and "*" in master):
        return local_cores(master)
    if not connect:
        return max(1, int(spark.sparkContext.defaultParallelism))
    key = str(getattr(spark, "session_id", id(spark)))
    if key not in _PARALLELISM:
        from pyspark.sql import functions as F

        # (projected first: an aggregate may not take the nondeterministic id directly)
        top = (spark.range(1 << 16).select(F.spark_partition_id().alias("p"))
               .agg(F.max("p")).first()[0])
        _PARALLELISM[key] = max(1, int(top) + 1)
    return _PARALLELISM[key]


def redacted(remote: str) -> str:
    """``remote`` as ``sc://HOST:PORT``, without its parameters (a token, a user id): what
    messages and output may show. O(len(remote))."""
    where = urlparse("http" + remote[2:]) if remote.startswith("sc://") else None
    if where is None or where.hostname is None:
        return "sc://…"
    try:
        port = where.port or DEFAULT_CONNECT_PORT
    except ValueError:
        return f"sc://{where.hostname}:…"
    host = f"[{where.hostname}]" if ":" in where.hostname else where.hostname
    return f"sc://{host}:{port}"


def _address(remote: str) -> tuple[str, int]:
    """(host, port) of a Spark Connect URL ``sc://HOST[:PORT][/;param=value...]``, parsed
    as pyspark's channel builder does; `routing.InvalidRequest` (a `ValueError`) naming
    ``remote`` (redacted, in the message and as its ``value``) if it is not one. O(len)."""
    shown = redacted(remote)
    problem = None
    where = urlparse("http" + remote[2:])
    if not remote.startswith("sc://"):
        problem = (f"remote must be a Spark Connect URL sc://HOST[:PORT], got "
                   f"{remote.split(';', 1)[0]!r}")
    elif not where.hostname:
        problem = f"remote {shown} names no host (sc://HOST[:PORT])"
    elif where.path not in ("", "/") or where.query or where.fragment:
        problem = (f"remote {shown}: only parameters may follow the host "
                   f"(sc://HOST[:PORT]/;name=value)")
    else:
        try:
            return where.hostname, where.port or DEFAULT_CONNECT_PORT
        except ValueError:
            problem = f"remote {shown}: the port is not a number from 0 to 65535"
    raise InvalidRequest(problem, field="remote", value=shown)


def _check_listening(remote: str) -> None:
    """`SparkUnavailable` unless something accepts TCP connections at ``remote``'s host and
    port within `CONNECT_TIMEOUT_S`."""
    import socket

    host, port = _address(remote)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SparkUnavailable(f"no Spark Connect server answered at {redacted(remote)} "
                               f"({host}:{port}: {exc})") from None


def remote_session(remote: str, *, ship_code: bool = True) -> SparkSession:
    """A session of the Spark Connect server at ``remote`` (``sc://HOST[:PORT]``,
    Spark's connection string, parameters such as ``/;token=...`` included), set up for
    `analyze`: session time zone UTC, Arrow on, Arrow batches of at most
    `ARROW_BATCH_BYTES`, and (``ship_code``) this install's ``routing`` and ``attrs`` added
    as a Python artifact of the session (`package_zip`). Raises `routing.InvalidRequest` (a
    `ValueError`) for a URL that is not Spark Connect's, and `SparkUnavailable` when
    pyspark or its ``connect`` extra is missing, nothing listens there, a classic session
    runs in this process, or the server refuses; a session opened before the failure is
    stopped. Messages never show the URL's parameters (`redacted`). The session is
    pyspark's ``getOrCreate``'s: a process holds one, and never beside a classic session
    (pyspark then switches ``pyspark.sql.functions`` to Connect's columns for the whole
    process, which breaks the classic session: seen in this project's tests).

    Cost: a TCP connection test (at most `CONNECT_TIMEOUT_S`), the session's handshake and,
    with ``ship_code``, zipping and uploading this install's code (about a second)."""
    check_pyspark()
    _address(remote)
    try:
        import grpc  # noqa: F401  (pyspark's connect extra)
    except ImportError:
        raise SparkUnavailable(
            f"Spark Connect needs pyspark's connect extra (grpcio): {CONNECT_EXTRA}") from None
    _check_listening(remote)
    from pyspark.sql import SparkSession

    session: SparkSession | None = None
    try:
        session = SparkSession.builder.remote(remote).getOrCreate()
        for key, value in _SQL_SETTINGS.items():
            session.conf.set(key, value)
        if ship_code:
            with tempfile.TemporaryDirectory(prefix="routing-ship-") as folder:
                session.addArtifacts(str(package_zip(Path(folder))), pyfile=True)
    except Exception as exc:  # pyspark's and grpc's errors: keep them one sentence
        if session is not None:
            with contextlib.suppress(Exception):  # the first error is the one to report
                session.stop()
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "SESSION_ALREADY_EXIST" in first:
            raise SparkUnavailable(
                "a classic Spark session runs in this process: a Spark Connect session "
                "needs a process of its own") from None
        raise SparkUnavailable(f"Spark Connect at {redacted(remote)} failed: "
                               f"{first.replace(remote, redacted(remote))}") from None
    return session
