"""Tests of `routing.sim`: fault behaviour, determinism, record/replay equality.

Small simulations (a few groups, minutes of simulated time) keep this file fast; seeds are
fixed and time is simulated.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import routing as r
from routing.journal import Register, Replayer, read_journal, replay
from routing.sim import (
    Crash,
    DegradedLink,
    Failover,
    NameServerRestart,
    Partition,
    SimConfig,
    SimResult,
    TopicCreate,
    TopicDelete,
    plan_faults,
    simulate,
)

TIMEOUT = 120_000
SCAN = 5_000
PERIOD = 30_000
MAX_LATENCY = 1_000  # far above anything the default latency model draws in these runs


def run(faults: Any = (), **kwargs: Any) -> SimResult:
    settings: dict[str, Any] = {"groups": 3, "slaves": 1, "nameservers": 3, "clients": 2,
                                "duration_ms": 600_000, "seed": 11, "faults": tuple(faults)}
    settings.update(kwargs)
    return simulate(SimConfig(**settings))


def addr_of(group: int, member: int) -> str:
    return f"10.1.{group}.{member + 1}:10911"


def removals(result: SimResult, addr: str) -> dict[str, list[r.BrokerRemoved]]:
    out: dict[str, list[r.BrokerRemoved]] = {ns: [] for ns in result.nameserver_ids}
    for c in result.changes:
        out[c.nameserver_id] += [x for x in c.change.removed if x.broker_addr == addr]
    return out


def routes_to(route: r.TopicRouteData | None, addr: str) -> bool:
    return route is not None and any(addr in d.broker_addrs.values() for d in route.broker_datas)


def journal_docs(result: SimResult, ns: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.journal_lines(ns)]


# --------------------------------------------------------------------------- faults


def test_crashed_master_disappears_after_last_heartbeat_plus_timeout_within_one_scan() -> None:
    crash_at = 200_000
    result = run([Crash(at_ms=crash_at, group=0, broker_id=0, mode="halt")])
    addr = addr_of(0, 0)
    row = result.summary().rows[0]
    for ns, removed in removals(result, addr).items():
        assert len(removed) == 1
        gone = removed[0]
        assert gone.reason == "expired"
        removed_at = next(c.at_ms for c in result.changes
                          if c.nameserver_id == ns and gone in c.change.removed)
        # after the last heartbeat plus the timeout, within one scan interval
        assert gone.last_update_ms + TIMEOUT < removed_at <= gone.last_update_ms + TIMEOUT + SCAN
        # the last heartbeat is the last message from that broker the name server recorded
        touching = [d for d in journal_docs(result, ns)[1:]
                    if d["broker_addr"] == addr and d["ts"] < removed_at]
        assert touching[-1]["ts"] == gone.last_update_ms
        assert crash_at - PERIOD - MAX_LATENCY < gone.last_update_ms <= crash_at + MAX_LATENCY
        # never before: every route of the group's topics kept the broker until then
        for topic in ("DefaultCluster", "broker-000"):
            line = result.route_timeline[topic][ns]
            assert all(routes_to(route, addr) for at, route in line
                       if crash_at <= at < removed_at)
            assert routes_to(max((e for e in line if e[0] < removed_at),
                                 key=lambda e: e[0])[1], addr)
            assert not routes_to(next(route for at, route in line if at >= removed_at), addr)
        assert row.stopped_routing_ms[ns] == removed_at - crash_at


def test_kill_closes_the_channel_and_clean_shutdown_unregisters() -> None:
    result = run([Crash(at_ms=100_000, group=0, mode="kill"),
                  Crash(at_ms=100_000, group=1, mode="clean")], duration_ms=200_000)
    for group, reason in ((0, "channel_closed"), (1, "unregistered")):
        for ns, removed in removals(result, addr_of(group, 0)).items():
            assert [x.reason for x in removed] == [reason], ns
    for row in result.summary().rows:
        assert all(ms is not None and ms < MAX_LATENCY for ms in row.stopped_routing_ms.values())


def test_partition_only_loses_the_broker_on_the_cut_name_servers() -> None:
    cut_at, heal_at = 200_000, 400_000
    result = run([Partition(at_ms=cut_at, group=0, nameservers=(1,),
                            duration_ms=heal_at - cut_at)], duration_ms=520_000)
    addr = addr_of(0, 0)
    lost = removals(result, addr)
    assert lost["ns-0"] == [] and lost["ns-2"] == []
    assert [x.reason for x in lost["ns-1"]] == ["expired"]
    assert cut_at + TIMEOUT - PERIOD < lost["ns-1"][0].last_update_ms + TIMEOUT < heal_at
    back = [c.at_ms for c in result.changes if c.nameserver_id == "ns-1" and c.at_ms > cut_at
            and any(x.broker_addr == addr and x.first for x in c.change.registered)]
    assert back and heal_at < back[0] <= heal_at + PERIOD + MAX_LATENCY  # next registration
    row = result.summary().rows[0]
    assert row.stopped_routing_ms["ns-0"] is None and row.stopped_routing_ms["ns-2"] is None
    assert row.stopped_routing_ms["ns-1"] is not None
    for ns in result.nameserver_ids:
        assert routes_to(result.managers[ns].pickup_route("broker-000"), addr)


def test_failover_promotes_the_slave_to_id_0_and_its_old_id_disappears() -> None:
    at, promote = 200_000, 20_000
    result = run([Failover(at_ms=at, group=0, promote_after_ms=promote)])
    master, slave = addr_of(0, 0), addr_of(0, 1)
    for ns in result.nameserver_ids:
        manager = result.managers[ns]
        assert manager.broker_member_group("DefaultCluster", "broker-000").broker_addrs == {
            0: slave}
        route = manager.pickup_route("broker-000")
        assert route is not None and dict(route.broker_datas[0].broker_addrs) == {0: slave}
        for moment, route in result.route_timeline["broker-000"][ns]:
            if moment > at + promote + MAX_LATENCY:
                assert route is not None
                assert dict(route.broker_datas[0].broker_addrs) == {0: slave}
        # the old master's live entry expires on its own
        assert [x.reason for x in removals(result, master)[ns]] == ["expired"]
        promoted = [d for d in journal_docs(result, ns)
                    if d.get("op") == "register" and d["broker_addr"] == slave
                    and "table" in d["args"] and d["args"]["table"]["brokerId"] == 0]
        version = promoted[0]["args"]["table"]["topicConfigSerializeWrapper"]["dataVersion"]
        assert version["stateVersion"] == 1
    row = result.summary().rows[0]
    assert all(at + promote <= at + ms <= at + promote + MAX_LATENCY
               for ms in row.stopped_routing_ms.values() if ms is not None)


def test_old_master_returns_as_a_slave() -> None:
    result = run([Failover(at_ms=100_000, group=0, promote_after_ms=10_000,
                           restart_old_after_ms=150_000)], duration_ms=400_000)
    for manager in result.managers.values():
        assert manager.broker_member_group("DefaultCluster", "broker-000").broker_addrs == {
            0: addr_of(0, 1), 1: addr_of(0, 0)}


def test_name_server_restart_starts_empty_and_waits_for_its_readiness_gate() -> None:
    result = run([NameServerRestart(at_ms=100_000, nameserver=1, down_ms=20_000)],
                 loss_rate=0.0, duration_ms=300_000)
    headers = [d for d in journal_docs(result, "ns-1") if d["op"] == "header"]
    assert [(h["seq"] > 0, h["start_ms"]) for h in headers] == [(False, 0), (True, 120_000)]
    assert result.serving["ns-1"] == ((0, False), (45_000, True), (100_000, False),
                                      (165_000, True))
    routes = {ns: {t: m.pickup_route(t) for t in m.all_topics()}
              for ns, m in result.managers.items()}
    assert routes["ns-1"] == routes["ns-0"] == routes["ns-2"]
    row = result.summary().rows[0]
    assert row.kind == "ns_restart" and row.max_disagreement_ms == 0


def test_topic_creation_and_deletion_reach_every_name_server() -> None:
    result = run([TopicCreate(at_ms=100_000, group=1, topic="Fresh"),
                  TopicDelete(at_ms=200_000, group=1, topic="Fresh")], duration_ms=300_000)
    for ns, manager in result.managers.items():
        line = result.route_timeline["Fresh"][ns]
        assert line[0][0] < 100_000 + MAX_LATENCY and line[0][1] is not None
        assert line[-1][1] is None and line[-1][0] < 200_000 + 2 * MAX_LATENCY
        assert manager.pickup_route("Fresh") is None
        ops = [d["op"] for d in journal_docs(result, ns)]
        assert ops.count("delete_topic") == 1
    create, delete = result.summary().rows
    assert create.disagreement_ms["Fresh"] < MAX_LATENCY
    assert delete.disagreement_ms["Fresh"] < MAX_LATENCY


def test_a_degraded_link_loses_messages_and_can_expire_the_broker() -> None:
    result = run([DegradedLink(at_ms=100_000, group=2, duration_ms=300_000, loss_rate=0.99,
                               extra_latency_ms=200)], duration_ms=500_000)
    assert result.stats.lost > 20
    assert all(x and x[0].reason == "expired" for x in removals(result, addr_of(2, 0)).values())


def test_skipped_faults_say_why() -> None:
    result = run([Crash(at_ms=50_000, group=0), Crash(at_ms=60_000, group=0),
                  Failover(at_ms=70_000, group=9)], duration_ms=100_000)
    assert [f.skipped for f in result.faults] == [None, "no live broker id 0", "no such group"]
    assert "[no live broker id 0]" in result.summary().to_text()


# --------------------------------------------------------------------------- determinism


def heavy(seed: int = 5, **kwargs: Any) -> SimConfig:
    return SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=1_800_000, seed=seed,
                     faults="heavy", clients=2, **kwargs)


def test_same_seed_gives_byte_identical_journals(tmp_path: Path) -> None:
    first = simulate(heavy(), out_dir=tmp_path / "a", gzip=True)
    second = simulate(heavy(), out_dir=tmp_path / "b", gzip=True)
    assert len(first.faults) > 10
    assert first.summary() == second.summary()
    for ns in first.nameserver_ids:
        a = (tmp_path / "a" / f"{ns}.jsonl.gz").read_bytes()
        assert a == (tmp_path / "b" / f"{ns}.jsonl.gz").read_bytes()
    other = simulate(heavy(seed=6))
    assert other.journal_texts["ns-0"] != "\n".join(first.journal_lines("ns-0")) + "\n"


def test_journals_do_not_depend_on_the_hash_seed() -> None:
    script = ("import hashlib; from routing.sim import SimConfig, simulate; "
              "r = simulate(SimConfig(groups=3, duration_ms=900_000, seed=3, faults='heavy')); "
              "print(hashlib.sha256(''.join(r.journal_texts.values()).encode()).hexdigest())")
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, check=True, timeout=120)
        digests.add(out.stdout.strip())
    result = simulate(SimConfig(groups=3, duration_ms=900_000, seed=3, faults="heavy"))
    digests.add(hashlib.sha256("".join(result.journal_texts.values()).encode()).hexdigest())
    assert len(digests) == 1


def observable(mgr: r.RouteInfoManager) -> dict[str, Any]:
    names = mgr.all_topics()
    return {"routes": {t: mgr.pickup_route(t) for t in names}, "cluster": mgr.cluster_info(),
            "live": {k: (v.last_update_timestamp, v.data_version, v.generation, v.channel)
                     for k, v in mgr.live_brokers().items()}}


def test_replaying_the_journals_gives_the_live_routes_and_events() -> None:
    result = simulate(heavy())
    read = result.read_journals()
    assert read.ok
    assert sum(1 for e in read.records if e.op == "header") > 3  # restarts were recorded
    player = Replayer()
    replayed = [(e.nameserver_id, e.change) for e in replay(read.records, replayer=player)
                if e.change is not None and (e.change.changed_topics or e.change.removed)]
    live = [(c.nameserver_id, c.change) for c in result.changes]
    for ns in result.nameserver_ids:
        assert [c for n, c in replayed if n == ns] == [c for n, c in live if n == ns]
        assert observable(player.managers[ns]) == observable(result.managers[ns])


def test_registrations_in_the_journal_carry_their_channel() -> None:
    result = run(duration_ms=60_000)
    records = read_journal(result.journal_lines("ns-0")).records
    registers = [e.call for e in records if isinstance(getattr(e, "call", None), Register)]
    assert registers and all(isinstance(c.registration.channel, int) for c in registers)


# --------------------------------------------------------------------------- plan & cost


def test_fault_plan_is_seeded_and_never_hits_a_busy_target() -> None:
    config = SimConfig(groups=3, duration_ms=6 * 3_600_000, seed=9, faults="heavy")
    plan = plan_faults(config)
    assert plan == plan_faults(config)
    assert plan != plan_faults(SimConfig(groups=3, duration_ms=6 * 3_600_000, seed=10,
                                         faults="heavy"))
    assert {f.kind for f in plan} == {"crash", "partition", "failover", "ns_restart",
                                      "topic_create", "topic_delete", "degraded"}
    assert [f.at_ms for f in plan] == sorted(f.at_ms for f in plan)
    only = plan_faults(SimConfig(duration_ms=3_600_000, faults="crash,partition"))
    assert only and {f.kind for f in only} <= {"crash", "partition"}
    assert plan_faults(SimConfig(faults="none")) == ()
    with pytest.raises(ValueError, match="unknown fault profile"):
        SimConfig(faults="meteor")


def test_time_jumps_from_event_to_event() -> None:
    hours = 2
    config = SimConfig(groups=5, slaves=1, nameservers=3, duration_ms=hours * 3_600_000,
                       faults="none", clients=1)
    result = simulate(config)
    brokers = config.groups * (config.slaves + 1)
    rounds = brokers * config.duration_ms // PERIOD
    # per round: a poll when it starts and one at its deadline, a delivery and a reply per
    # name server; plus scans and client polls
    budget = (rounds * (2 + 2 * config.nameservers) * 1.05
              + config.nameservers * config.duration_ms // SCAN
              + config.duration_ms // config.client_poll_ms + 200)
    assert result.stats.events <= budget
    assert result.stats.events < config.duration_ms / 100  # nowhere near one per ms


# --------------------------------------------------------------------------- summary & CLI


def test_summary_table_and_json() -> None:
    result = run([Crash(at_ms=100_000, group=0, mode="halt", restart_after_ms=60_000),
                  Partition(at_ms=200_000, group=1, nameservers=(0, 2), duration_ms=150_000)],
                 duration_ms=500_000)
    summary = result.summary()
    crash, cut = summary.rows
    assert crash.stopped_routing_ms == {"ns-0": None, "ns-1": None, "ns-2": None}  # came back
    assert cut.stopped_routing_ms["ns-1"] is None
    assert cut.stopped_routing_ms["ns-0"] is not None
    text = summary.to_text()
    assert text.splitlines()[0].split()[:6] == ["#", "at", "fault", "details", "ns-0", "ns-1"]
    assert "kept" in text
    doc = json.loads(json.dumps(summary.to_json()))
    assert [d["kind"] for d in doc] == ["crash", "partition"]
    per_topic = summary.topic_table()
    assert per_topic and {row[0] for row in per_topic} <= {"0", "1"}
    assert all(cut.disagreement_ms[row[2]] > 0 for row in per_topic if row[0] == "1")


def test_cli_simulate_writes_journals_and_prints_the_table(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from routing.cli._simulate import parse_duration_ms, simulate_command

    assert parse_duration_ms("1h30m") == 5_400_000
    assert parse_duration_ms("250ms") == 250
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_ms("10")
    out = tmp_path / "run"
    args = ["--groups", "3", "--slaves", "1", "--nameservers", "2", "--duration", "20m",
            "--faults", "heavy", "--seed", "7", "--out", str(out), "--no-progress"]
    result = CliRunner().invoke(simulate_command, args)
    assert result.exit_code == 0, result.output
    assert "ns-0" in result.output and "events" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["ns-0.jsonl", "ns-1.jsonl",
                                                    "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["seed"] == 7 and summary["faults"]
    assert read_journal(out / "ns-0.jsonl").ok
    bad = CliRunner().invoke(simulate_command, ["--duration", "soon"])
    assert bad.exit_code == 2 and "not a duration" in bad.output
    again = CliRunner().invoke(simulate_command, [*args[:-3], "--json", "--no-progress"])
    assert again.exit_code == 0 and json.loads(again.output)
    topics = CliRunner().invoke(simulate_command, [*args[:-3], "--topics", "--no-progress"])
    assert topics.exit_code == 0 and "disagreement per affected topic" in topics.output
    snapped = tmp_path / "snapped"
    result = CliRunner().invoke(simulate_command, [*args[:-2], str(snapped),
                                                   "--snapshot-every", "5m", "--no-progress"])
    assert result.exit_code == 0, result.output
    summary = json.loads((snapped / "summary.json").read_text())
    assert summary["config"]["snapshot_every_ms"] == 300_000
    ops = [e.op for e in read_journal(snapped / "ns-0.jsonl").records]
    assert ops.count("snapshot") == 3  # at 5, 10 and 15 of the 20 simulated minutes


def test_acting_master_mode_heartbeats_every_second_and_fails_over_in_routes() -> None:
    routing = r.RoutingConfig(support_acting_master=True, wait_for_service_ms=45_000)
    result = run([Crash(at_ms=60_000, group=0, mode="halt")], duration_ms=90_000, groups=2,
                 acting_master=True, routing=routing)
    for ns, removed in removals(result, addr_of(0, 0)).items():
        gone = removed[0]
        removed_at = next(c.at_ms for c in result.changes
                          if c.nameserver_id == ns and gone in c.change.removed)
        assert gone.last_update_ms + 10_000 < removed_at <= gone.last_update_ms + 10_000 + SCAN
        assert 60_000 - MAX_LATENCY < gone.last_update_ms <= 60_000 + MAX_LATENCY
        route = result.managers[ns].pickup_route("broker-000")
        assert route is not None
        assert dict(route.broker_datas[0].broker_addrs) == {0: addr_of(0, 1)}  # acting master
        assert not route.queue_datas[0].perm & r.Perm.WRITE
        docs = journal_docs(result, ns)
        queries = [d for d in docs if d["op"] == "query_data_version"]
        assert len(queries) > 10 * len([d for d in docs if d["op"] == "register"])
        assert all(d["args"] == {"table_id": d["args"]["table_id"]} for d in queries)
    read = result.read_journals()
    assert read.ok
    player = Replayer()
    list(replay(read.records, replayer=player))
    for ns in result.nameserver_ids:
        assert observable(player.managers[ns]) == observable(result.managers[ns])


def test_acting_master_slave_learns_from_member_group_sync_that_it_acts() -> None:
    """``syncBrokerMemberGroup`` runs in the simulator: once the name servers expire the
    crashed master, its slave's view of the group says the slave acts as master."""
    from routing.sim._runner import Simulation
    config = SimConfig(seed=7, duration_ms=90_000, groups=2, nameservers=2, slaves=1,
                       clients=1, acting_master=True,
                       routing=r.RoutingConfig(support_acting_master=True),
                       faults=(Crash(at_ms=60_000, group=0, mode="halt"),))
    sim = Simulation(config)
    slave = sim._groups[0].procs[1]
    other = sim._groups[1].procs[1]
    sim.run()
    assert slave.hb is not None and other.hb is not None
    assert slave.hb.acting_as_master and slave.hb.min_broker_id == 1
    assert dict(slave.hb.member_group) == {1: slave.addr}
    assert not other.hb.acting_as_master  # its master is alive


def test_cli_simulate_writes_a_snapshot_every_hour_unless_turned_off(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from routing.cli._simulate import simulate_command

    args = ["--groups", "2", "--slaves", "0", "--nameservers", "1", "--duration", "130m",
            "--faults", "none", "--seed", "3", "--no-progress", "--out"]
    for every, expected, count in (([], 3_600_000, 2), (["--snapshot-every", "off"], None, 0),
                                   (["--snapshot-every", "0"], None, 0)):
        out = tmp_path / f"run{len(every)}{every[-1:]}"
        result = CliRunner().invoke(simulate_command, [*args, str(out), *every])
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "summary.json").read_text())
        assert summary["config"]["snapshot_every_ms"] == expected
        ops = [e.op for e in read_journal(out / "ns-0.jsonl").records]
        assert ops.count("snapshot") == count  # at 60 and 120 of the 130 simulated minutes
    bad = CliRunner().invoke(simulate_command, ["--snapshot-every", "often"])
    assert bad.exit_code == 2 and "not a duration" in bad.output


def test_cli_serve_journals_snapshot_every_hour_unless_turned_off() -> None:
    import click

    from routing.cli._serve import serve_command

    options = {p.name: p for p in serve_command.params}
    every = options["journal_snapshot_every"]
    context = click.Context(serve_command)
    assert every.process_value(context, every.get_default(context)) == 3_600_000
    assert every.process_value(context, "off") is None
    assert every.process_value(context, "10m") == 600_000
