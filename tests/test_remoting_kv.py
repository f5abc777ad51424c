"""The KV configuration on disk: Java's kvConfig.json layout, durable before visible,
corrupt files refused and left untouched, concurrent writers lose nothing (in threads and
over TCP), and a restart reads everything back."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from routing.remoting import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    KVConfigError,
    KVStore,
    RequestCode,
    ResponseCode,
    decode_kv_table,
    serve,
)
from routing.remoting.processor import _kv as kv_module
from test_remoting_config import invoke_cli
from test_remoting_server import TIMEOUT_S, Client, run


def test_missing_file_is_empty_and_changes_are_written_in_java_layout(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    store = KVStore.open(path)
    assert store.namespace("ns") is None and not path.exists()
    store.put(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicA", "broker-a:8")
    store.put("ns", "k", "v")
    store.put("ns", "gone", "x")
    store.delete("ns", "gone")
    assert json.loads(path.read_text()) == {"configTable": {
        "ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:8"}, "ns": {"k": "v"}}}
    again = KVStore.open(path)
    assert again.snapshot() == store.snapshot()
    assert [p.name for p in path.parent.iterdir()] == ["kvConfig.json"]  # no temp files left


def test_a_java_written_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_text('{\n\t"configTable":{\n\t\t"ORDER_TOPIC_CONFIG":{\n\t\t\t"T":"b:4"\n'
                    '\t\t}\n\t}\n}')
    assert KVStore.open(path).get("ORDER_TOPIC_CONFIG", "T") == "b:4"
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    assert KVStore.open(empty).snapshot() == {}


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"configTable": 5}',
                                     b'{"configTable": {"ns": {"k": 1}}}',
                                     b'{"configTable": {"ns": [1]}}', b"\xff\xfe"])
def test_corrupt_file_is_a_clear_error_and_left_untouched(tmp_path: Path,
                                                         content: bytes) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_bytes(content)
    with pytest.raises(KVConfigError) as err:
        KVStore.open(path)
    assert str(path) in str(err.value) and err.value.path == str(path)
    assert path.read_bytes() == content


def test_corrupt_file_stops_routing_serve_and_stays_untouched(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_bytes(b'{"configTable": {"ns": "oops"}}')
    result = invoke_cli(["serve", "--listen", "127.0.0.1:0", "--kv-config", str(path)])
    assert result.exit_code == 1 and str(path) in result.output
    assert path.read_bytes() == b'{"configTable": {"ns": "oops"}}'


def test_a_change_is_durable_before_it_is_visible(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kvConfig.json"
    store = KVStore.open(path)
    seen: list[Any] = []
    real = kv_module.write_kv_file

    def observing(p: Path, tables: Any) -> None:
        seen.append(store.get("ns", "k"))  # while the file is being written
        real(p, tables)

    monkeypatch.setattr(kv_module, "write_kv_file", observing)
    store.put("ns", "k", "v")
    assert seen == [None] and store.get("ns", "k") == "v"


def test_a_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kvConfig.json"
    store = KVStore.open(path)
    store.put("ns", "k", "v1")
    before = path.read_bytes()

    def failing(p: Path, tables: Any) -> None:
        raise KVConfigError("cannot write the KV config file: disk full", path=str(p))

    monkeypatch.setattr(kv_module, "write_kv_file", failing)
    with pytest.raises(KVConfigError, match="disk full"):
        store.put("ns", "k", "v2")
    assert store.get("ns", "k") == "v1" and path.read_bytes() == before


def test_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = KVStore(path=blocker / "kvConfig.json")  # a file where a directory should be
    with pytest.raises(KVConfigError, match="cannot write"):
        store.put("ns", "k", "v")
    assert store.get("ns", "k") is None


def test_parallel_writer_threads_lose_nothing_and_share_writes(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    store = KVStore.open(path)
    threads, per_thread = 8, 40
    start = threading.Barrier(threads)

    def writer(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            store.put(f"ns{t % 3}", f"t{t}-k{i}", f"v{i}")

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(TIMEOUT_S)
    total = sum(len(t) for t in KVStore.open(path).snapshot().values())
    assert total == threads * per_thread
    assert store.writes <= threads * per_thread


def test_parallel_tcp_writers_then_restart_read_everything_back(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    connections, per_connection = 16, 10

    async def server_then(work: Any) -> None:
        stop, listening = asyncio.Event(), asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve("127.0.0.1", 0, kv_config=path, stop_event=stop,
                                         install_signal_handlers=False,
                                         on_listening=listening.set_result))
        address = await asyncio.wait_for(listening, TIMEOUT_S)
        try:
            await work(address)
        finally:
            stop.set()
            await asyncio.wait_for(task, TIMEOUT_S)

    async def put_all(address: tuple[str, int]) -> None:
        async def one(c: int) -> None:
            client = await Client.connect(address)
            for i in range(per_connection):
                response = await client.call(RequestCode.PUT_KV_CONFIG, namespace=f"ns{c % 4}",
                                             key=f"c{c}-k{i}", value=f"v{c}.{i}")
                assert response.code == ResponseCode.SUCCESS
            client.close()

        await asyncio.gather(*(one(c) for c in range(connections)))

    async def read_all(address: tuple[str, int]) -> None:
        client = await Client.connect(address)
        for c in range(connections):
            for i in range(per_connection):
                response = await client.call(RequestCode.GET_KV_CONFIG, namespace=f"ns{c % 4}",
                                             key=f"c{c}-k{i}")
                assert response.code == ResponseCode.SUCCESS
                assert response.ext_fields["value"] == f"v{c}.{i}"
        listing = await client.call(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ns0")
        assert len(decode_kv_table(listing.body)) == per_connection * connections // 4
        client.close()

    run(lambda: server_then(put_all))
    assert sum(len(t) for t in json.loads(path.read_text())["configTable"].values()) == \
        connections * per_connection
    run(lambda: server_then(read_all))
