"""routing.testing.pytest_plugin: fixtures, the routing marker, and the overridable config."""

from __future__ import annotations

import pytest

import routing as r
from routing.testing import FakeClock, FakeNameServer

pytest_plugins = ("pytester",)


def test_default_fixtures(routing_clock: FakeClock, routing_config: r.RoutingConfig,
                          route_manager: r.RouteInfoManager,
                          fake_nameserver: FakeNameServer) -> None:
    assert isinstance(routing_clock, r.ManualClock) and routing_clock.now_ms() == 0
    assert routing_config == r.RoutingConfig()
    assert route_manager.clock is routing_clock and route_manager.config is routing_config
    assert fake_nameserver.clock is routing_clock
    assert fake_nameserver.manager is not route_manager


@pytest.mark.routing(start_ms=1_000, heartbeat_timeout_ms=10_000, scan_interval_ms=1_000)
def test_marker_configures_the_fixtures(routing_clock: FakeClock,
                                        fake_nameserver: FakeNameServer,
                                        route_manager: r.RouteInfoManager) -> None:
    assert routing_clock.now_ms() == 1_000
    assert route_manager.config.default_heartbeat_timeout_ms == 10_000
    assert fake_nameserver.scan_interval_ms == 1_000
    a = fake_nameserver.broker(topics=["T"], auto_register=False)
    routing_clock.advance(10_000)  # at 11 000: last 1 000 + 10 000 == now, alive
    fake_nameserver.assert_alive(a)
    routing_clock.advance(1_000)  # the scan at 12 000 removes it
    fake_nameserver.assert_expired(a)


@pytest.mark.routing(start_ms=5)
class TestClassMarker:
    @pytest.mark.routing(heartbeat_timeout_ms=7)
    def test_closest_keyword_wins_and_others_merge(self, routing_clock: FakeClock,
                                                   routing_config: r.RoutingConfig) -> None:
        assert routing_clock.now_ms() == 5
        assert routing_config.default_heartbeat_timeout_ms == 7


def test_marker_rejects_unknown_keywords(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.routing(timeout=5)
        def test_it(routing_clock):
            pass

        @pytest.mark.routing(5)
        def test_positional(routing_clock):
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*unknown keyword(s)*timeout*",
                                 "*keyword arguments only*"])


def test_routing_config_can_be_overridden_in_a_conftest(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import pytest
        import routing as r

        @pytest.fixture
        def routing_config():
            return r.RoutingConfig(default_heartbeat_timeout_ms=3_000, scan_interval_ms=500)
    """)
    pytester.makepyfile("""
        def test_it(fake_nameserver, route_manager):
            assert route_manager.config.default_heartbeat_timeout_ms == 3_000
            a = fake_nameserver.broker(topics=["T"], auto_register=False)
            fake_nameserver.tick(3_500)
            fake_nameserver.assert_expired(a)
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.routing(start_ms=0, *"])
