"""One SparkSession for the whole test run (``research/pyspark-notes.md``: a session costs
about 10 s once per process, then about 0.5 s per small job).

``local[2,2]`` (a failed task is tried again once, as with the default ``local[*,2]``;
plain ``local[2]`` would never retry), UI off, one or two shuffle partitions and the
C1-only JIT with the serial GC (about 20 % faster on small jobs). Spark tests are marked
``spark`` and skip with the reason when Java 17+ or pyspark is missing, so the
pure-Python suite still runs.

``connect_url``: one Spark Connect server for the whole run (started on first use only), for
the tests of ``--remote``.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _connect_missing(home: Path) -> str | None:
    """Why a Spark Connect server and client cannot run here, or None."""
    if importlib.util.find_spec("grpc") is None:
        return "needs pyspark's connect extra (grpcio)"
    if not list((home / "jars").glob("spark-connect_*.jar")):
        return f"no spark-connect jar in {home / 'jars'}"
    return None


@pytest.fixture(scope="session")
def connect_url(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on ``local[2,2]`` started from the pyspark package's own jars
    (``SparkConnectServer``, as ``sbin/start-connect-server.sh`` does) on a free loopback
    port, its Python workers this interpreter; stopped (its process, by PID) at the end of
    the run. Skips with the reason where the connect extra or jar is missing or the server
    does not start within 3 minutes. (``spark``: skips where Java or pyspark is missing.)"""
    import pyspark

    home = Path(pyspark.__file__).parent
    missing = _connect_missing(home)
    if missing is not None:
        pytest.skip(missing)
    port = _free_port()
    logs = tmp_path_factory.mktemp("connect")
    env = dict(os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(logs))
    for name in ("SPARK_REMOTE", "SPARK_CONF_DIR"):  # Spark's own log4j: INFO to stderr
        env.pop(name, None)
    server = subprocess.Popen(
        [str(home / "bin" / "spark-submit"), "--master", "local[2,2]",
         "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.ui.enabled=false",
         # sized as the embedded session's local settings (2 x task slots); Spark's
         # default 200 made a --partition group run here take 47 s instead of ~13
         "--conf", "spark.sql.shuffle.partitions=4",
         # progress reports every 50 ms (default 2 s: a short job may end unreported)
         "--conf", "spark.connect.progress.reportInterval=50ms",
         "--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
         "--name", "routing-tests-connect"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    started = threading.Event()

    def read_log() -> None:  # until the server ends: it never blocks on a full pipe
        assert server.stderr is not None
        for line in server.stderr:
            if not started.is_set():
                seen.append(line)
                if "Spark Connect server started" in line:
                    started.set()

    threading.Thread(target=read_log, daemon=True).start()
    try:
        if not started.wait(timeout=180) or server.poll() is not None:
            pytest.skip("the Spark Connect server did not start:\n" + "".join(seen[-30:]))
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
