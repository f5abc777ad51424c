"""Which name servers the broker can reach (Java 5.x ``NettyRemotingClient``'s available list).

Java registers and heartbeats only to ``getAvailableNameSrvList()``: the servers its client
holds a connection to, kept by ``scanAvailableNameSrv``, which runs at start and then every
``connectTimeoutMillis`` and, for each configured server, connects if needed and adds it to
the list on success or drops it on failure. Here the host does the connecting: with
``scan_available_name_servers`` the broker emits one `CheckNameServer` per server at start
and every ``connect_timeout_ms``, and the host reports each result (and any connection it
loses) with ``on_connect_result``. Until the host says otherwise every server counts as
available, so a host that never reports behaves as before this existed.
"""

from __future__ import annotations

import threading

from .._validate import check_bool, fail
from ._rules import Action, BrokerConfig, CheckNameServer, next_tick_ms

__all__ = ["Availability", "AvailabilityView"]


class Availability:
    """The available set and the scan schedule. Not thread-safe (the broker's lock guards it).
    Every call is O(name servers) at most."""

    def __init__(self, config: BrokerConfig) -> None:
        self._config = config
        self._down: set[str] = set()
        self._scan_from: int | None = None
        self._next_scan: int | None = None

    def start(self, now: int) -> None:
        if self._config.scan_available_name_servers:
            self._scan_from = self._next_scan = now

    def stop(self) -> None:
        self._next_scan = None

    @property
    def next_deadline_ms(self) -> int | None:
        return self._next_scan

    def available(self) -> tuple[str, ...]:
        """The configured servers not known to be unreachable, in configured order."""
        if not self._down:
            return self._config.name_servers
        return tuple(ns for ns in self._config.name_servers if ns not in self._down)

    def report(self, name_server: str, ok: bool) -> bool:
        """Record a connect result; True when the server's availability changed."""
        if name_server not in self._config.name_servers:
            fail("name_server", name_server, "one of BrokerConfig.name_servers")
        check_bool("ok", ok)
        if ok:
            if name_server in self._down:
                self._down.discard(name_server)
                return True
            return False
        if name_server in self._down:
            return False
        self._down.add(name_server)
        return True

    def poll(self, now: int) -> list[CheckNameServer]:
        """The scan, when due: one check per configured server."""
        if self._next_scan is None or self._scan_from is None or now < self._next_scan:
            return []
        period = self._config.connect_timeout_ms
        self._next_scan = next_tick_ms(self._scan_from, period, now)
        return [CheckNameServer(name_server=ns, timeout_ms=period)
                for ns in self._config.name_servers]


class AvailabilityView:
    """The available-name-server half of `BrokerHeartbeat`'s public face."""

    _lock: threading.RLock
    _ns: Availability

    def _now(self, now_ms: int | None) -> int:
        raise NotImplementedError  # pragma: no cover - BrokerHeartbeat's

    def _advance(self, now: int) -> list[Action]:
        raise NotImplementedError  # pragma: no cover - BrokerHeartbeat's

    @property
    def available_name_servers(self) -> tuple[str, ...]:
        """Where registrations and heartbeats go: the configured name servers the host has
        not reported unreachable (Java ``getAvailableNameSrvList``), in configured order."""
        with self._lock:
            return self._ns.available()

    def on_connect_result(
        self, name_server: str, ok: bool, *, now_ms: int | None = None
    ) -> tuple[Action, ...]:
        """The host connected to ``name_server`` (``ok``), or could not or lost the connection
        (not ``ok``): it joins or leaves `available_name_servers` (Java's scan adds a server it
        holds a channel to and drops one it cannot connect to). Raises `InvalidRequest` for a
        server not in ``config.name_servers``. Returns whatever was due."""
        check_bool("ok", ok)
        with self._lock:
            now = self._now(now_ms)
            self._ns.report(name_server, ok)
            return tuple(self._advance(now))
