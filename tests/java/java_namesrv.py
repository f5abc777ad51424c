"""Apache RocketMQ's own name server as a process: find the build tool, build once, start on a
free loopback port, stop by PID.

The tool is ``shared/tools/java-namesrv`` (its README: ``build.sh`` compiles
``NamesrvStartup`` from the bundled sources with ``javac``; ``run.sh`` serves on
``127.0.0.1:$PORT``). It is found through, in order: ``$ROUTING_JAVA_NAMESRV_DIR``,
``<repo>/../shared/tools/java-namesrv``, ``/work/shared/tools/java-namesrv``. The build goes
to ``$ROUTING_JAVA_NAMESRV_WORK`` (default ``~/.cache/routing-java-namesrv``) and is reused
while the tool's files are unchanged (a stamp of their sizes and times); a file lock keeps
two processes from building into the same folder at once.

A start can add ``namesrv.properties`` keys (``scanNotActiveBrokerInterval`` is read at start
only): `JavaNameServer` runs a copy of ``run.sh`` whose properties block takes one more line
from the environment, so the JVM flags stay the tool's own.

Used by the ``java_namesrv`` fixture (tests/java/conftest.py) and by
``benchmarks/load_serve.py --java``. Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ["JavaNameServer", "JavaUnavailable", "build", "find_tool", "free_port", "work_dir"]

REPO = Path(__file__).resolve().parents[2]
BOOT_LINE = "The Name Server boot success"
#: The run.sh line after which extra properties go (the last line of its heredoc's keys).
_ANCHOR = "kvConfigPath=$home/namesrv/kvConfig.json\n"
_EXTRA_ENV = "ROUTING_EXTRA_PROPERTIES"


class JavaUnavailable(Exception):
    """Java's name server cannot run here; the message says why (a test skips with it)."""


def _candidates() -> list[Path]:
    found = []
    env = os.environ.get("ROUTING_JAVA_NAMESRV_DIR")
    if env:
        found.append(Path(env))
    found += [REPO.parent / "shared" / "tools" / "java-namesrv",
              Path("/work/shared/tools/java-namesrv")]
    return found


def find_tool() -> Path:
    """The tool's folder; raises `JavaUnavailable` naming where it looked, or a missing
    ``javac``/``java``."""
    for javac in ("javac", "java"):
        if shutil.which(javac) is None:
            raise JavaUnavailable(f"{javac} is not on PATH (apt-get install "
                                  "openjdk-17-jdk-headless)")
    places = _candidates()
    for place in places:
        if (place / "build.sh").is_file() and (place / "run.sh").is_file():
            return place
    raise JavaUnavailable("Java's name server build tool (java-namesrv) was not found in "
                          + ", ".join(str(p) for p in places)
                          + " (set ROUTING_JAVA_NAMESRV_DIR)")


def work_dir() -> Path:
    """Where the build goes (``$ROUTING_JAVA_NAMESRV_WORK`` or the user's cache)."""
    env = os.environ.get("ROUTING_JAVA_NAMESRV_WORK")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "routing-java-namesrv"


def _stamp(tool: Path) -> str:
    """Sizes and times of every file of the tool: a rebuild when any changes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in tool.rglob("*") if p.is_file()):
        info = path.stat()
        digest.update(f"{path.relative_to(tool)} {info.st_size} {info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(work: Path) -> Iterator[None]:
    work.parent.mkdir(parents=True, exist_ok=True)
    with open(work.parent / f"{work.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build(tool: Path | None = None, work: Path | None = None, *, timeout_s: float = 600) -> Path:
    """Build Java's name server into ``work`` unless an up-to-date build is there; return
    ``work``. About 20-30 s the first time, nothing after. Raises `JavaUnavailable` with the
    end of the build's output when it fails."""
    tool = tool or find_tool()
    work = work or work_dir()
    stamp = _stamp(tool)
    with _locked(work):
        stamp_file = work / "routing-build.stamp"
        if (work / "classpath").is_file() and stamp_file.is_file() \
                and stamp_file.read_text() == stamp:
            return work
        done = subprocess.run([str(tool / "build.sh")], env={**os.environ, "WORK": str(work)},
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0 or not (work / "classpath").is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
            raise JavaUnavailable(f"{tool}/build.sh failed (exit {done.returncode}):\n"
                                  + "\n".join(tail))
        stamp_file.write_text(stamp)
        return work


def free_port() -> int:
    """A port free on 127.0.0.1 now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: SIGTERM when the process that started it dies (Linux ``prctl``; kept
    across run.sh's ``exec java``), so a crashed test run leaves no name server behind."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _run_script(tool: Path, work: Path) -> Path:
    """A copy of the tool's run.sh whose properties heredoc also expands
    ``$ROUTING_EXTRA_PROPERTIES`` (more ``key=value`` lines)."""
    text = (tool / "run.sh").read_text()
    if _ANCHOR not in text:
        raise JavaUnavailable(f"{tool}/run.sh changed: no line {_ANCHOR.strip()!r} to add "
                              "properties after")
    script = work / "run-with-properties.sh"
    patched = text.replace(_ANCHOR, _ANCHOR + f"${{{_EXTRA_ENV}:-}}\n", 1)
    if not script.is_file() or script.read_text() != patched:
        script.write_text(patched)
        script.chmod(0o755)
    return script


class JavaNameServer:
    """One Java name server process on ``127.0.0.1:port``.

    ``properties`` are extra ``namesrv.properties`` keys (e.g.
    ``{"scanNotActiveBrokerInterval": "500"}``); ``env`` adds to run.sh's environment
    (``HEAP``, ``RMQ_LOG_LEVEL``, ``JAVA_OPT_EXT``). Output goes to ``log`` (stdout and
    stderr together). `start` waits until the port accepts and the log says
    ``The Name Server boot success`` (about 4 s); `stop` sends SIGTERM to the PID (the JVM
    runs RocketMQ's shutdown hook), SIGKILL after ``grace_s``.
    """

    def __init__(self, *, tool: Path | None = None, work: Path | None = None,
                 properties: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, port: int | None = None) -> None:
        self.tool = tool or find_tool()
        self.work = work or work_dir()
        self.properties = dict(properties or {})
        self.env = dict(env or {})
        self.port = port or 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: Path | None = None

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    @property
    def home(self) -> Path:
        """run.sh's ``home-$PORT`` folder (properties, KV file, GC log)."""
        return self.work / f"home-{self.port}"

    def start(self, *, timeout_s: float = 60.0, attempts: int = 3) -> JavaNameServer:
        """Start on ``port`` (a free one when 0). A port taken in between is retried."""
        script = _run_script(self.tool, self.work)
        extra = "".join(f"{k}={v}\n" for k, v in self.properties.items()).rstrip("\n")
        fixed = self.port
        for attempt in range(attempts):
            self.port = fixed or free_port()
            self.log = self.work / f"namesrv-{self.port}.log"
            with open(self.log, "wb") as out:
                self.proc = subprocess.Popen(
                    [str(script)], stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                    preexec_fn=_die_with_parent,
                    env={**os.environ, "WORK": str(self.work), "PORT": str(self.port),
                         _EXTRA_ENV: extra, **self.env})
            try:
                self._wait_ready(timeout_s)
                return self
            except JavaUnavailable:
                self.stop()
                if fixed or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.proc is not None and self.log is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise JavaUnavailable(f"Java's name server exited ({self.proc.returncode}) on "
                                      f"port {self.port}:\n{self.log_tail()}")
            if BOOT_LINE in self.log.read_text(errors="replace"):
                with contextlib.suppress(OSError), \
                        socket.create_connection(self.address, timeout=1.0):
                    return
            time.sleep(0.05)
        raise JavaUnavailable(f"Java's name server was not ready after {timeout_s} s:\n"
                              f"{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        if self.log is None or not self.log.is_file():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, *, grace_s: float = 15.0) -> int | None:
        """SIGTERM the PID, then SIGKILL after ``grace_s``; returns the exit status."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace_s)
        shutil.rmtree(self.home, ignore_errors=True)
        if self.log is not None and proc.returncode in (0, 143, -signal.SIGTERM):
            self.log.unlink(missing_ok=True)  # kept when the JVM ended otherwise
        return proc.returncode

    def __enter__(self) -> JavaNameServer:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
