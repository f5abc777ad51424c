"""routing.testing.FakeNameServer, FakeBroker and FakeClock."""

from __future__ import annotations

import pytest

import routing as r
from routing.testing import FakeClock, FakeNameServer, NameServerUnavailable

# --------------------------------------------------------------------------- brokers


def test_broker_registers_with_its_system_topics() -> None:
    ns = FakeNameServer()
    a = ns.broker(cluster="c1", name="broker-a", topics=["TopicTest"], queues=4)
    assert set(a.topics) == {"TopicTest", "broker-a", "c1"}
    assert a.topics["broker-a"].perm == 7 and a.topics["broker-a"].write_queue_nums == 1
    assert a.state == "online" and a.generation == 1 and a.is_live
    assert ns.manager.all_topics() == ("TopicTest", "broker-a", "c1")
    ns.assert_route("TopicTest", brokers=["broker-a"], writable_queues=4, readable_queues=4,
                    addrs={"broker-a": {0: "10.0.0.1:10911"}})


def test_without_system_topics_a_one_topic_newcomer_is_rejected() -> None:
    ns = FakeNameServer()
    a = ns.broker(name="broker-a", topics=["OnlyTopic"], system_topics=False)
    assert a.last_result is not None and not a.last_result.accepted
    assert "single-topic" in (a.last_result.rejection or "")
    assert ns.events_of("rejected") and not a.is_live
    ns.assert_no_route("OnlyTopic")


def test_cluster_name_that_is_no_valid_topic_gets_no_system_topic() -> None:
    ns = FakeNameServer()
    a = ns.broker(cluster="cluster.one", name="broker-a", topics=["T"])
    assert set(a.topics) == {"T", "broker-a"}


def test_addresses_are_assigned_in_creation_order() -> None:
    ns = FakeNameServer()
    a, b = ns.broker(name="broker-a"), ns.broker(name="broker-b")
    assert (a.addr, a.ha_server_addr) == ("10.0.0.1:10911", "10.0.0.1:10912")
    assert b.addr == "10.0.0.2:10911"
    assert ns.brokers == (a, b)


def test_slave_gets_master_address_and_promotion_switches_id() -> None:
    ns = FakeNameServer()
    ns.broker(name="broker-a", topics=["T"])
    slave = ns.broker(name="broker-a", broker_id=1, topics=["T"])
    assert slave.last_result is not None
    assert slave.last_result.master_addr == "10.0.0.1:10911"
    ns.assert_route("T", addrs={"broker-a": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}})
    slave.promote(0)
    ns.assert_route("T", addrs={"broker-a": {0: "10.0.0.2:10911"}})


# --------------------------------------------------------------------------- time


@pytest.mark.parametrize(("quiet_for", "alive"), [(120_000, True), (125_000, False)])
def test_quiet_broker_expires_strictly_after_its_timeout(quiet_for: int, alive: bool) -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T"])
    a.go_quiet()
    ns.tick(quiet_for)
    # At 120 000 ms last_update + timeout == now: alive (strict <). Next scan is 125 000.
    if alive:
        ns.assert_alive(a)
    else:
        ns.assert_expired(a)
        assert [e.broker for e in ns.events_of("expired")] == [a.addr]


def test_scans_run_at_multiples_of_the_interval_since_creation() -> None:
    clock = FakeClock(1_000)
    ns = FakeNameServer(clock=clock, scan_interval_ms=7_000, register_interval_ms=None)
    a = ns.broker(topics=["T"], heartbeat_timeout_ms=10_000)
    a.go_quiet()
    ns.tick(13_000)  # now 14 000; the scan at 8 000 found it alive (deadline 11 000)
    ns.assert_alive(a)
    ns.tick(1_000)  # 15 000: scan; last 1 000 + 10 000 < 15 000
    ns.assert_expired(a)
    assert ns.events_of("expired")[0].at_ms == 15_000


def test_online_brokers_reregister_every_30_s_and_stay_alive() -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T"])
    ns.tick(600_000)
    ns.assert_alive(a)
    periodic = [e for e in ns.events_of("register") if "periodic" in e.detail]
    assert [e.at_ms for e in periodic] == list(range(30_000, 600_001, 30_000))


def test_automatic_registration_can_be_turned_off() -> None:
    ns = FakeNameServer(register_interval_ms=None)
    a = ns.broker(topics=["T"])
    ns.tick(125_000)
    ns.assert_expired(a)
    b = ns.broker(name="broker-b", topics=["T"], auto_register=False)
    ns2 = FakeNameServer()
    c = ns2.broker(topics=["T"], auto_register=False)
    ns2.tick(125_000)
    ns2.assert_expired(c)
    assert b.auto_register is False


def test_manual_heartbeat_keeps_a_quiet_broker_alive() -> None:
    ns = FakeNameServer(register_interval_ms=None)
    a = ns.broker(topics=["T"])
    ns.tick(100_000)
    assert a.heartbeat() is True
    ns.tick(100_000)
    ns.assert_alive(a)
    ns.tick(25_000)
    ns.assert_expired(a)
    assert a.heartbeat() is False


def test_registrations_run_before_scans_at_the_same_instant() -> None:
    ns = FakeNameServer(scan_interval_ms=30_000, register_interval_ms=30_000)
    a = ns.broker(topics=["T"], heartbeat_timeout_ms=29_999)
    ns.tick(30_000)  # registration (refresh at 30 000) precedes the scan at 30 000
    ns.assert_alive(a)


def test_tick_rejects_negative_and_plain_manual_clock_works() -> None:
    clock = r.ManualClock(0)
    ns = FakeNameServer(clock=clock, register_interval_ms=None)
    a = ns.broker(topics=["T"])
    with pytest.raises(ValueError, match="backwards"):
        ns.tick(-1)
    ns.tick(125_000)
    ns.assert_expired(a)
    assert clock.now_ms() == 125_000


def test_clock_and_start_ms_are_exclusive() -> None:
    with pytest.raises(ValueError, match="either"):
        FakeNameServer(clock=FakeClock(), start_ms=5)
    with pytest.raises(ValueError, match="scan_interval_ms"):
        FakeNameServer(scan_interval_ms=0)


def test_moving_the_shared_clock_runs_every_servers_schedule() -> None:
    ns1 = FakeNameServer(name="ns1", register_interval_ms=None)
    ns2 = FakeNameServer(name="ns2", clock=ns1.clock, register_interval_ms=None)
    a1, a2 = ns1.broker(topics=["T"]), ns2.broker(topics=["T"], addr="10.0.0.1:10911")
    ns1.clock.advance(125_000)  # nobody called tick: the clock itself runs the scans
    ns1.assert_expired(a1)
    ns2.assert_expired(a2)
    assert ns2.events_of("expired")[0].at_ms == 125_000


def test_clock_cannot_be_moved_from_inside_a_scheduled_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    ns = FakeNameServer(clock=clock)
    monkeypatch.setattr(ns, "_run_scan_due", lambda now_ms: clock.advance(1))
    with pytest.raises(RuntimeError, match="inside a scheduled step"):
        ns.tick(5_000)


# --------------------------------------------------------------------------- failures


def test_disconnect_removes_the_broker_at_once() -> None:
    ns = FakeNameServer()
    a = ns.broker(name="broker-a", topics=["T"])
    b = ns.broker(name="broker-b", topics=["T"])
    gone = a.disconnect()
    assert [e.broker_addr for e in gone] == [a.addr] and a.state == "offline"
    ns.assert_route("T", brokers=["broker-b"])
    ns.assert_expired(a)
    ns.tick(60_000)  # an offline broker does not come back by itself
    ns.assert_expired(a)
    a.register()  # reconnects on a new channel
    assert a.channel is not None and a.channel.serial == 3
    ns.assert_route("T", brokers=["broker-a", "broker-b"])
    assert b.disconnect() and b.disconnect() == ()


def test_shutdown_unregisters_with_its_generation() -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T"])
    assert a.shutdown() is True
    ns.assert_no_route("T")
    assert a.shutdown() is False
    assert [e.detail for e in ns.events_of("unregister")] == ["removed", "nothing to remove"]


def test_create_topic_bumps_version_and_sends_an_increment() -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T"])
    before = a.data_version
    ns.tick(1_000)
    a.create_topic("New", queues=2)
    assert a.data_version.counter == before.counter + 1
    assert a.data_version.timestamp == 1_000
    ns.assert_route("New", brokers=["broker-a"], writable_queues=2)
    a.create_topic("New", write_queue_nums=6, read_queue_nums=3)
    ns.assert_route("New", writable_queues=6, readable_queues=3)
    assert [e.kind for e in ns.events if e.kind.startswith("topic_")] == [
        "topic_created", "topic_updated"]


def test_create_topic_on_a_quiet_broker_waits_for_it() -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T"])
    a.go_quiet()
    a.create_topic("Later")
    ns.assert_no_route("Later")
    a.register()
    ns.assert_route("Later", brokers=["broker-a"])


def test_broker_delete_topic_keeps_the_row_unless_configured() -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T", "U"])
    a.delete_topic("T")
    ns.assert_route("T", brokers=["broker-a"])  # Java: the name server keeps the row
    assert ns.delete_topic("T") is True
    ns.assert_no_route("T")
    with pytest.raises(KeyError):
        a.delete_topic("T")

    ns2 = FakeNameServer(config=r.RoutingConfig(delete_topic_with_broker_registration=True))
    b = ns2.broker(topics=["T", "U"])
    b.delete_topic("T")
    ns2.assert_no_route("T")
    ns2.assert_route("U", brokers=["broker-a"])


def test_write_perm_admin_calls() -> None:
    ns = FakeNameServer()
    ns.broker(name="broker-a", topics=["T"], queues=4)
    ns.broker(name="broker-b", topics=["T"], queues=4)
    assert ns.wipe_write_perm("broker-a") == 3
    ns.assert_route("T", writable_queues=4, writable_brokers=["broker-b"], readable_queues=8)
    assert ns.add_write_perm("broker-a") == 3
    ns.assert_route("T", writable_queues=8, writable_brokers=["broker-a", "broker-b"])


def test_stop_and_start_lose_state_and_brokers_come_back() -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T"])
    ns.stop()
    with pytest.raises(NameServerUnavailable):
        ns.route("T")
    ns.tick(30_000)  # the periodic registration fails
    assert ns.events_of("unavailable")
    ns.start()
    ns.start()  # idempotent
    ns.assert_no_route("T")  # a restarted name server has empty tables
    ns.tick(30_000)
    ns.assert_route("T", brokers=["broker-a"])
    assert a.channel is not None and a.channel.serial == 2


# --------------------------------------------------------------------------- assertions


def test_assert_route_failure_shows_expected_and_actual_side_by_side() -> None:
    ns = FakeNameServer()
    ns.broker(name="broker-a", topics=["T"], queues=4)
    with pytest.raises(AssertionError) as info:
        ns.assert_route("T", brokers=["broker-a", "broker-b"], writable_queues=8)
    message = str(info.value)
    assert "route of 'T' at 0 ms on" in message
    assert "expected" in message and "actual" in message
    assert "! brokers          broker-a, broker-b | broker-a" in message
    assert "! writable queues  8" in message and "| 4" in message
    assert "broker-a r4/w4 RW- [0=10.0.0.1:10911]" in message
    assert "recent events:" in message and "full registration" in message


def test_assert_route_of_missing_topic_and_assert_no_route_failures() -> None:
    ns = FakeNameServer()
    ns.broker(topics=["T"])
    with pytest.raises(AssertionError, match=r"(?s)route .*present.*\(no route\)"):
        ns.assert_route("Missing")
    with pytest.raises(AssertionError, match=r"(?s)\(no route\).*present"):
        ns.assert_no_route("T")
    with pytest.raises(AssertionError, match="addrs of broker-z"):
        ns.assert_route("T", addrs={"broker-z": {0: "10.0.0.9:1"}})


def test_assert_alive_and_expired_failures_name_the_broker() -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T"])
    with pytest.raises(AssertionError, match=r"(?s)10\.0\.0\.1:10911 +absent.*live, last"):
        ns.assert_expired(a)
    with pytest.raises(AssertionError, match=r"10\.0\.0\.9:1 +live +\| absent"):
        ns.assert_alive("10.0.0.9:1")


def test_event_log_records_everything_in_order() -> None:
    ns = FakeNameServer()
    a = ns.broker(topics=["T"])
    a.go_quiet()
    ns.tick(125_000)
    kinds = [e.kind for e in ns.events]
    assert kinds == ["register", "route_changed", "quiet", "expired", "route_changed"]
    assert "T" in ns.events[1].detail and "(by register)" in ns.events[1].detail
    text = ns.event_log(last=2)
    assert text.count("\n") == 1 and "125000 ms" in text
    ns.clear_events()
    assert ns.event_log() == "(no events)"
    assert "FakeNameServer" in repr(ns) and "FakeBroker" in repr(a)
