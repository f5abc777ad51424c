"""Starting Spark the way this machine needs it (``research/pyspark-notes.md``).

Every entry point (the CLI, the demo, the benchmark, the test fixture) gets its session
from `spark_session`, which makes the settings the notes measured as necessary:

* for local masters (``local[N]``, ``local-cluster[...]``): ``PYSPARK_PYTHON`` and
  ``PYSPARK_DRIVER_PYTHON`` = the running interpreter, so Python workers find pyarrow,
  pandas and ``routing``, and ``SPARK_LOCAL_IP=127.0.0.1`` with a loopback driver address
  (on a real cluster the executors must reach the driver and have their own Python, so
  there the environment decides);
* UI and console progress off, session time zone UTC, Arrow conversions on;
* quiet log4j from the first line, through a generated ``log4j2.properties``;
* shuffle partitions sized to the machine for local masters (1–2 in tests);
* the driver JVM's classes mapped from a class-data-sharing archive in the user's cache
  (`_class_archive`; about 3 s less per run, written by the first run).

`check_java` runs before the JVM is launched, so a missing or old Java gives one clear
sentence instead of a py4j stack trace. `in_background` runs a Spark action in a thread of
its own and in a scheduler pool of its own (the topic sweep's job, under the FAIR
scheduling set here). Nothing here is imported by the core; pyspark is
imported only inside the functions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ._class_archive import class_archive_options
from ._errors import SparkUnavailable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "MIN_JAVA",
    "JavaInfo",
    "SparkUnavailable",
    "check_java",
    "check_pyspark",
    "default_master",
    "in_background",
    "is_connect",
    "is_local_master",
    "java_options",
    "local_cores",
    "local_settings",
    "package_zip",
    "ship_package",
    "spark_session",
    "stop_session",
]

#: The oldest Java that pyspark 4.x runs on (its jars are class-file version 61).
MIN_JAVA = 17

#: ``spark.sql.execution.arrow.maxBytesPerBatch``: the largest Arrow batch a Python step is
#: handed, bytes.
ARROW_BATCH_BYTES = 8 << 20
#: The JVM flags `spark_session` gives the driver, and the executors of a local master, by
#: default: the C1 compiler only (no C2) and the serial collector. In this pipeline the JVM
#: hands Arrow batches to Python, shuffles the sweep's rows and writes Parquet, while Python
#: replays; C2's compiler threads and G1's concurrent threads cost more CPU than they save.
#: Measured on 2 cores (docs/performance.md, issue 12's fifth pass): 10 M records 41.3 →
#: 37.5 s and 78 → 68 CPU s; 1 M records 16.1 → 10 s and 29 → 15 CPU s. (The pyspark notes
#: found these flags 2× slower for SQL-heavy jobs, where the JVM does the work.) Executors
#: of other masters keep their defaults: there Spark's own text reader may do real work.
LEAN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: ``ROUTING_SPARK_LEAN_JVM=0`` starts the JVMs with Java's own JIT and collector instead
#: (the tests' session, ``for_tests``, keeps the lean flags whatever it says).
LEAN_JVM_ENV = "ROUTING_SPARK_LEAN_JVM"

_LOG4J = """\
# Written by routing.pipeline: keep Spark's console quiet (errors only).
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.netty.name = io.netty
logger.netty.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""


@attrs.frozen(kw_only=True)
class JavaInfo:
    """The ``java`` that Spark will launch: its path, major version and banner line."""

    executable: str
    major: int
    banner: str


def _java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return shutil.which("java")


def check_java(minimum: int = MIN_JAVA) -> JavaInfo:
    """Find the ``java`` Spark will use (``$JAVA_HOME/bin/java``, else PATH) and check that
    it is at least ``minimum``; raise `SparkUnavailable` with an install hint otherwise.
    Cost: one ``java -version`` subprocess (a few tenths of a second).

    >>> check_java().major >= 17  # doctest: +SKIP
    True
    """
    exe = _java_executable()
    hint = ("install it (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or point "
            "JAVA_HOME at a Java 17+ home")
    if exe is None:
        raise SparkUnavailable(f"the Spark pipeline needs Java {minimum}+, but no `java` was "
                               f"found on PATH or in JAVA_HOME: {hint}")
    try:
        done = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkUnavailable(f"could not run `{exe} -version` ({exc}): {hint}") from None
    banner = (done.stderr or done.stdout).strip()
    match = re.search(r'version "(\d+)(?:\.(\d+))?', banner)
    if match is None:
        raise SparkUnavailable(f"could not read the Java version from `{exe} -version`: "
                               f"{banner[:200]!r}; {hint}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_392" is Java 8
        major = int(match.group(2))
    if major < minimum:
        raise SparkUnavailable(f"the Spark pipeline needs Java {minimum}+, but {exe} is Java "
                               f"{major}: {hint}")
    return JavaInfo(executable=exe, major=major, banner=banner.splitlines()[0])


def check_pyspark() -> str:
    """pyspark's version, or `SparkUnavailable` naming the extra to install."""
    try:
        import pyspark
    except ImportError:
        raise SparkUnavailable(
            "pyspark is not installed: pip install 'rocketmq-routing[spark]'") from None
    return str(pyspark.__version__)


#: The embedded master: every core, and a failed task is tried again once. Spark's plain
#: ``local[N]`` never retries a task (its task-failure limit is 1, whatever
#: ``spark.task.maxFailures`` says); ``local[N,F]`` allows F attempts. Cluster masters
#: (``spark://``, YARN, Kubernetes, ``local-cluster``) retry by ``spark.task.maxFailures``
#: (default 4).
DEFAULT_MASTER = "local[*,2]"


def default_master() -> str:
    """``$SPARK_MASTER`` if set, else `DEFAULT_MASTER` (the embedded Spark, ``local[*,2]``:
    a failed task is retried once). O(1): an environment read."""
    return os.environ.get("SPARK_MASTER") or DEFAULT_MASTER


def is_local_master(master: str) -> bool:
    """True for masters whose executors run on this machine (``local``, ``local[N]``,
    ``local-cluster[...]``): those are bound to 127.0.0.1."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


#: ``spark.memory.fraction`` on local masters (Spark's default is 0.6): the share of the
#: heap above 300 MB that sorts, shuffles and caches may hold before they spill. Every
#: persisted result here is on disk, and the tables' writes sort each table in one task:
#: with 0.6 that sort held up to about 430 MB of the 1 g driver and the heap grew with the
#: input (peak of all processes 1.22 GB at 1 M records, 1.63 GB at 10 M); with 0.2 it
#: spills past about 145 MB (1.24 and 1.40–1.45 GB), at the same speed.
LOCAL_MEMORY_FRACTION = "0.2"


def local_settings(master: str, shuffle_partitions: int | None = None) -> dict[str, str]:
    """The settings `spark_session` adds for a local master (``local[...]``,
    ``local-cluster[...]``): loopback addresses, this interpreter for the workers,
    shuffle partitions (default 2 × the task slots) and `LOCAL_MEMORY_FRACTION`."""
    partitions = shuffle_partitions or 2 * local_cores(master)
    return {
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.default.parallelism": str(partitions),
        "spark.memory.fraction": LOCAL_MEMORY_FRACTION,
    }


def lean_jvm() -> bool:
    """Whether the JVMs start with `LEAN_JAVA_OPTIONS` (``$ROUTING_SPARK_LEAN_JVM`` is not
    ``0``)."""
    return os.environ.get(LEAN_JVM_ENV, "1").strip() != "0"


def java_options(master: str, *, log4j: Path, for_tests: bool = False,
                 archive: str = "") -> tuple[str, str]:
    """``spark.driver.extraJavaOptions`` and ``spark.executor.extraJavaOptions`` for a
    session on ``master``: the quiet log4j configuration, `LEAN_JAVA_OPTIONS` (unless
    turned off, except for the tests' session) for the driver and, on a local master, its
    executors, and the driver's class archive options."""
    base = f"-Dlog4j2.configurationFile=file:{log4j}"
    lean = for_tests or lean_jvm()
    driver = " ".join(filter(None, (base, LEAN_JAVA_OPTIONS if lean else "", archive)))
    executor = f"{base} {LEAN_JAVA_OPTIONS}" if lean and is_local_master(master) else base
    return driver, executor


def local_cores(master: str) -> int:
    """The task slots of a local master: N of ``local[N]``/``local[N,F]``, workers × cores
    of ``local-cluster[W,C,M]``, this machine's cores for ``local[*]``."""
    cores = os.cpu_count() or 2
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if m and m.group(1) != "*":
        return max(1, int(m.group(1)))
    m = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]", master)
    if m:
        return max(1, int(m.group(1)) * int(m.group(2)))
    return 1 if master == "local" else cores


def package_zip(folder: Path | None = None) -> Path:
    """A zip of the running install's ``routing`` and of its pure-Python dependency
    (``attrs`` with ``attr``, which ``attrs`` imports): what an executor needs on its
    Python path to replay. Written to ``folder`` (default: a new
    temporary folder); returns its path."""
    import zipfile

    import attr
    import attrs as attrs_pkg

    import routing

    target = Path(folder or tempfile.mkdtemp(prefix="routing-ship-")) / "routing-pipeline.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for module in (routing, attr, attrs_pkg):
            root = Path(module.__file__ or "").parent
            for path in sorted(root.rglob("*")):
                if path.is_file() and path.suffix in (".py", ".typed") and \
                        "__pycache__" not in path.parts:
                    zf.write(path, path.relative_to(root.parent).as_posix())
    return target


def ship_package(session: SparkSession) -> Path:
    """Add `package_zip` to the session's Python path on every executor (Spark's py-files),
    so a cluster whose Python has pyarrow and pandas but not this package runs the driver's
    code. Returns the zip's path."""
    target = package_zip()
    session.sparkContext.addPyFile(str(target))
    return target


def log4j_config() -> Path:
    """A ``log4j2.properties`` that logs errors only, written once per user to the temp dir."""
    path = Path(tempfile.gettempdir()) / f"routing-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J)
        tmp.replace(path)
    return path


def spark_session(master: str | None = None, *, app_name: str = "routing-analyze",
                  shuffle_partitions: int | None = None, for_tests: bool = False,
                  driver_memory: str | None = None, ship_code: bool | None = None,
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession set up as the notes require (see the module docstring).

    ``master`` defaults to `default_master` (``$SPARK_MASTER`` or ``local[*,2]``).
    ``shuffle_partitions`` defaults to 2 × the local cores for local masters (Spark's own
    default, with adaptive execution, on a cluster). The JVMs start with `LEAN_JAVA_OPTIONS`
    (see `java_options`; ``ROUTING_SPARK_LEAN_JVM=0`` turns them off, except with
    ``for_tests``). ``ship_code`` (default: for
    non-local masters) sends ``routing`` and its pure-Python dependencies to the executors
    (`ship_package`). ``conf`` entries win over ours.
    Raises `SparkUnavailable` when Java 17+ or pyspark is missing, or when ``$SPARK_REMOTE``
    is set (pyspark would then open a Spark Connect session whatever the master: use
    `remote_session`, or unset it). If a session is already running in this process,
    `getOrCreate` returns it and these settings are not re-applied to the JVM (runtime SQL
    settings still are).

    Cost: `check_java` and, the first time in a process, the JVM's start: about 3 s with
    the class archive, 5 s without (``docs/pipeline.md``, "Running"); then O(1).
    """
    check_pyspark()
    if "SPARK_REMOTE" in os.environ:
        raise SparkUnavailable(
            "SPARK_REMOTE is set: pyspark would open a Spark Connect session instead; use "
            "remote_session() (routing analyze --remote) or unset it")
    java = check_java()
    from pyspark.sql import SparkSession

    master = master or default_master()
    local = is_local_master(master)
    # Local workers must run this interpreter (pyarrow, pandas and routing live here). On a
    # cluster this path may not exist: there PYSPARK_PYTHON (or spark.pyspark.python) is
    # the operator's to set.
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    log4j = log4j_config()
    java_opts, executor_opts = java_options(master, log4j=log4j, for_tests=for_tests,
                                            archive=class_archive_options(java.banner))
    settings: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Arrow batches handed to Python steps: at most this many bytes (Spark's default
        # is 10 000 rows whatever their size; 10 000 route contributions of a topic that
        # every group serves held a sweep worker at 0.5 GB)
        "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_BATCH_BYTES),
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": executor_opts,
        "spark.log.level": "ERROR",
        # pools share the task slots: the topic sweep (the longest chain after the read)
        # runs in its own pool (`_spark.SWEEP_POOL`) beside the small tables' writes
        # instead of queueing behind them
        "spark.scheduler.mode": "FAIR",
    }
    if local:
        settings.update(local_settings(master, shuffle_partitions))
    elif shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if driver_memory is not None:
        settings["spark.driver.memory"] = driver_memory
    if conf:
        settings.update(conf)
    builder: Any = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session: SparkSession = builder.getOrCreate()
    if is_connect(session):  # SPARK_API_MODE & co.
        raise SparkUnavailable(
            "pyspark opened a Spark Connect session (its environment asks for Connect: "
            "SPARK_CONNECT_MODE_ENABLED or SPARK_API_MODE); use remote_session() instead")
    session.sparkContext.setLogLevel("ERROR")
    if ship_code if ship_code is not None else not local:
        ship_package(session)
    for key in ("spark.sql.session.timeZone", "spark.sql.shuffle.partitions",
                "spark.sql.execution.arrow.pyspark.enabled",
                "spark.sql.execution.arrow.maxBytesPerBatch"):
        if key in settings:
            session.conf.set(key, settings[key])
    return session


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (pyspark's ``pyspark.sql.connect`` classes), which
    has no ``sparkContext`` (see `_connect`). O(1)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def stop_session(spark: Any) -> None:
    """``spark.stop()`` without waiting for PySpark's accumulator server: the JVM side
    stops first and completely, as with ``stop()``; the Python thread that serves
    accumulator updates then takes up to 1.5 s to notice its shutdown (its handler polls
    every second, its loop every 0.5 s: 0.9 s measured, about a tenth of a 1 M-record
    ``routing analyze``), so that shutdown runs in a daemon thread, which a process about
    to exit does not wait for and a long-lived one sees end. Any other session (Spark
    Connect) is just stopped. Cost: the JVM's own stop (tenths of a second)."""
    context = None if is_connect(spark) else getattr(spark, "sparkContext", None)
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        context._accumulatorServer = None  # type: ignore[union-attr]
    try:
        spark.stop()
    finally:
        if server is not None:
            threading.Thread(target=server.shutdown, name="routing-accumulator-stop",
                             daemon=True).start()


def in_background(job: Callable[[], Any], context: Any, pool: str) -> Future[Any]:
    """``job()`` run in a daemon thread (a Spark action: the session runs jobs from
    several threads at once), its jobs in scheduler ``pool`` (a thread's own property:
    PySpark pins each Python thread to a JVM thread; no ``context``, as on Spark Connect:
    the default pool); its result or error in the future. O(1) here; the job's own cost
    runs in the thread."""
    future: Future[Any] = Future()

    def run() -> None:
        if future.set_running_or_notify_cancel():
            try:
                if context is not None:
                    context.setLocalProperty("spark.scheduler.pool", pool)
                future.set_result(job())
            except BaseException as exc:  # handed to whoever waits
                future.set_exception(exc)

    threading.Thread(target=run, name="routing-sweep", daemon=True).start()
    return future
