"""What ``benchmarks/load_serve.py`` runs beside ``routing serve``: Apache RocketMQ's own name
server, a server that does no work, and a load generator in C.

- `JavaServer`: Java's name server built and started by ``tests/java/java_namesrv.py`` (the
  shared ``java-namesrv`` tool; ``RMQ_LOG_LEVEL=WARN``, upstream's JVM flags, 1 GiB heap).
- `NullServer`: ``benchmarks/c/load.c`` in ``null`` mode — answers every frame with one fixed
  frame without reading it (one thread, epoll): the most the clients can get out of any
  server on this machine.
- `c_client`: ``load.c`` in ``client`` mode — closed-loop connections on one epoll, one
  request in flight per connection, latency per request in 1 µs buckets. Built with ``gcc -O2``
  on first use into ``~/.cache/routing-bench`` (by the source's hash).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
_SOURCE = Path(__file__).with_name("c") / "load.c"

__all__ = ["JavaServer", "NullServer", "c_client", "run_c_load"]


def c_client() -> Path:
    """The compiled ``load`` binary (built once per source version)."""
    source = _SOURCE.read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "routing-bench"
    binary = cache / f"load-{hashlib.sha256(source).hexdigest()[:12]}"
    if not binary.exists():
        if shutil.which("gcc") is None:
            raise RuntimeError("the C load generator needs gcc (apt-get install gcc)")
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-o", str(binary) + ".tmp", str(_SOURCE)], check=True)
        os.replace(str(binary) + ".tmp", binary)
    return binary


def run_c_load(port: int, connections: int, seconds: float, warmup: float,
               setup: list[bytes], load: list[bytes], workdir: Path,
               per_process: int) -> dict[str, Any]:
    """Run the C client in ``ceil(connections / per_process)`` processes; connection ``i``
    sends ``setup[i]`` once (untimed) then ``load[i]`` in a closed loop. Returns the
    merged ``requests`` and latency histogram ``{µs: count}``."""
    binary = c_client()
    procs = []
    for first in range(0, connections, per_process):
        count = min(per_process, connections - first)
        setup_file = workdir / f"setup-{first}.bin"
        load_file = workdir / f"load-{first}.bin"
        setup_file.write_bytes(b"".join(setup[first:first + count]) if setup else b"")
        load_file.write_bytes(b"".join(load[first:first + count]))
        procs.append(subprocess.Popen(
            [str(binary), "client", "127.0.0.1", str(port), str(count), str(seconds),
             str(warmup), str(setup_file), str(load_file)], stdout=subprocess.PIPE, text=True))
    hist: dict[int, int] = {}
    requests = 0
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"C load client failed ({proc.returncode})")
        result = json.loads(out)
        requests += result["requests"]
        for us, count in result["hist"]:
            hist[us] = hist.get(us, 0) + count
    return {"requests": requests, "hist": hist}


class NullServer:
    """``load null``: answers each frame with ``answer`` (a whole frame), doing nothing else."""

    def __init__(self, answer: bytes, workdir: Path) -> None:
        path = workdir / "null-answer.bin"
        path.write_bytes(answer)
        self.proc = subprocess.Popen([str(c_client()), "null", "0", str(path)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if line[:1] != ["listening"]:
            raise RuntimeError("the null server did not start")
        self.port = int(line[1])
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class JavaServer:
    """Apache RocketMQ's name server (tests/java/java_namesrv.py), started and stopped by PID."""

    def __init__(self) -> None:
        sys.path.insert(0, str(REPO / "tests" / "java"))
        try:
            import java_namesrv
        finally:
            sys.path.pop(0)
        java_namesrv.build()
        self.server = java_namesrv.JavaNameServer(env={"RMQ_LOG_LEVEL": "WARN"}).start()
        self.port = self.server.port
        self.pid = self.server.pid

    def stop(self) -> None:
        self.server.stop()
