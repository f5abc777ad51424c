"""Drive the ali-ons RocketMQ client (``ali_ons_driver.js``) from a Python test.

`find_modules` locates ``node_modules/ali-ons`` (``ROUTING_ALI_ONS_DIR``, ``.node`` in the
checkout, the checkout itself), `SKIP_REASON` says why the tests skip where Node.js or the
package is missing. `AliOns` is one client process: its route events and answers arrive on
a reader thread; waits are bounded (``timeout_s``), never pauses.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "ali_ons_driver.js"
NODE = shutil.which("node")


def find_modules() -> Path | None:
    for base in (os.environ.get("ROUTING_ALI_ONS_DIR", ""), str(ROOT / ".node"), str(ROOT)):
        if base and (Path(base) / "node_modules" / "ali-ons" / "package.json").is_file():
            return Path(base) / "node_modules"
    return None


MODULES = find_modules()
SKIP_REASON = ("needs Node.js and the npm package ali-ons (a pure-JS RocketMQ remoting "
               "client): `make node-client`, or set ROUTING_ALI_ONS_DIR")
MISSING = NODE is None or MODULES is None


class AliOns:
    """One ali-ons client polling ``topics`` on ``name_servers`` every ``poll_ms``."""

    def __init__(self, name_servers: list[str], topics: list[str], *, poll_ms: int = 100,
                 response_timeout_ms: int = 3_000, timeout_s: float = 30.0) -> None:
        assert NODE is not None and MODULES is not None, SKIP_REASON
        options = {"nameSrv": name_servers, "topics": topics, "pollMs": poll_ms,
                   "responseTimeoutMs": response_timeout_ms}
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(
            [NODE, str(DRIVER), json.dumps(options)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "NODE_PATH": str(MODULES)})
        #: Every event received so far, in order.
        self.seen: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        self._cursor = 0
        self._ids = itertools.count(1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_for("ready", consume=False)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._arrived:
                self.seen.append(json.loads(line))
                self._arrived.notify_all()
        with self._arrived:
            self.seen.append({"event": "exited"})
            self._arrived.notify_all()

    def wait_for(self, kind: str, where: Callable[[dict[str, Any]], bool] = lambda e: True,
                 *, consume: bool = True) -> dict[str, Any]:
        """The first event of ``kind`` after the last one returned for which ``where``
        holds (the events between are passed over); ``consume=False`` leaves the place."""
        deadline = time.monotonic() + self.timeout_s
        index = self._cursor
        with self._arrived:
            while True:
                while index < len(self.seen):
                    event = self.seen[index]
                    index += 1
                    if event["event"] == "exited":
                        raise AssertionError(f"the client exited: {self._stderr()}")
                    if event["event"] == kind and where(event):
                        if consume:
                            self._cursor = index
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {kind} event within {self.timeout_s} s; seen: "
                                         f"{self.seen[-10:]}\n{self._stderr()}")
                self._arrived.wait(left)

    def route(self, where: Callable[[list[str]], bool]) -> list[str]:
        """Wait for the client to adopt a route of the topic whose broker names satisfy
        ``where``; return those names."""
        event = self.wait_for("route", lambda e: where(brokers(e["route"])))
        return brokers(event["route"])

    def ask(self, topic: str, timeout_ms: int = 3_000) -> dict[str, Any]:
        """One GET_ROUTEINFO_BY_TOPIC through the client's API; its answer."""
        ident = next(self._ids)
        self._send({"op": "ask", "id": ident, "topic": topic, "timeoutMs": timeout_ms})
        return self.wait_for("answer", lambda e: e["id"] == ident)

    def _send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def _stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send({"op": "close"})
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def brokers(route: dict[str, Any] | None) -> list[str]:
    """The broker names of a route as ali-ons returns it (``queueDatas``), sorted."""
    return sorted(q["brokerName"] for q in (route or {}).get("queueDatas", []))
