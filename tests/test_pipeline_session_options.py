"""The JVM flags `spark_session` starts Spark with (no JVM needed to check them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from routing.pipeline._session import (
    LEAN_JAVA_OPTIONS,
    LEAN_JVM_ENV,
    SparkUnavailable,
    java_options,
    spark_session,
)

LOG4J = Path("/tmp/log4j2.properties")
ARCHIVE = "-XX:SharedArchiveFile=/cache/a.jsa -Xlog:cds=off"


@pytest.mark.parametrize("master", ["local[2,2]", "local[*]", "local", "local-cluster[2,1,1024]"])
def test_local_masters_start_every_jvm_lean_by_default(master, monkeypatch):
    monkeypatch.delenv(LEAN_JVM_ENV, raising=False)
    driver, executor = java_options(master, log4j=LOG4J, archive=ARCHIVE)
    assert driver == f"-Dlog4j2.configurationFile=file:{LOG4J} {LEAN_JAVA_OPTIONS} {ARCHIVE}"
    assert executor == f"-Dlog4j2.configurationFile=file:{LOG4J} {LEAN_JAVA_OPTIONS}"
    assert "-XX:TieredStopAtLevel=1" in driver and "-XX:+UseSerialGC" in executor


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "yarn", "k8s://https://h:6443"])
def test_cluster_executors_keep_their_own_jit_and_collector(master, monkeypatch):
    monkeypatch.delenv(LEAN_JVM_ENV, raising=False)
    driver, executor = java_options(master, log4j=LOG4J)
    assert LEAN_JAVA_OPTIONS in driver
    assert executor == f"-Dlog4j2.configurationFile=file:{LOG4J}"


def test_the_environment_turns_the_lean_flags_off_but_not_for_the_tests(monkeypatch):
    monkeypatch.setenv(LEAN_JVM_ENV, "0")
    driver, executor = java_options("local[2]", log4j=LOG4J, archive=ARCHIVE)
    assert LEAN_JAVA_OPTIONS not in driver and LEAN_JAVA_OPTIONS not in executor
    assert driver == f"-Dlog4j2.configurationFile=file:{LOG4J} {ARCHIVE}"
    driver, executor = java_options("local[2]", log4j=LOG4J, for_tests=True)
    assert LEAN_JAVA_OPTIONS in driver and LEAN_JAVA_OPTIONS in executor
    monkeypatch.setenv(LEAN_JVM_ENV, "1")
    assert LEAN_JAVA_OPTIONS in java_options("local[2]", log4j=LOG4J)[0]


def test_local_masters_spill_sorts_early_and_use_loopback():
    import sys

    from routing.pipeline._session import LOCAL_MEMORY_FRACTION, local_settings

    settings = local_settings("local[2,2]")
    assert settings["spark.memory.fraction"] == LOCAL_MEMORY_FRACTION == "0.2"
    assert settings["spark.sql.shuffle.partitions"] == "4"
    assert settings["spark.driver.bindAddress"] == "127.0.0.1"
    assert settings["spark.executorEnv.PYSPARK_PYTHON"] == sys.executable
    assert local_settings("local-cluster[2,1,1024]", 3)["spark.default.parallelism"] == "3"


def test_spark_session_refuses_to_run_while_spark_remote_is_set(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    monkeypatch.setenv("SPARK_REMOTE", "sc://somewhere:15002")
    with pytest.raises(SparkUnavailable, match="SPARK_REMOTE is set") as caught:
        spark_session("local[1]")
    assert "somewhere" not in str(caught.value)  # a URL may carry a token: never shown
    monkeypatch.setenv("SPARK_REMOTE", "")  # pyspark tests presence, not a value
    with pytest.raises(SparkUnavailable, match="SPARK_REMOTE is set"):
        spark_session("local[1]")
