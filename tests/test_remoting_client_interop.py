"""A real RocketMQ client speaking the remoting protocol natively against `routing serve`.

The client is ``ali-ons`` (npm, pure JavaScript, talks to open-source RocketMQ name
servers over TCP). Where Node.js or the package is missing the test is skipped with the
reason. Install it with ``npm install --prefix .node ali-ons@3.12.0`` (or point
``ROUTING_ALI_ONS_DIR`` at a directory whose ``node_modules`` holds it).

Other candidates were checked and cannot run here: the PyPI ``rocketmq``/
``rocketmq-client-python`` packages and npm ``apache-rocketmq`` wrap the native C++ client
(``librocketmq``, downloaded or installed separately); ``rocketmq-client-nodejs`` and
``rocketmq-python-client`` speak the 5.x gRPC proxy protocol, not remoting.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import routing as r
from routing.remoting import NameServerHost, NameServerProcessor

_ROOT = Path(__file__).resolve().parent.parent
_CANDIDATES = [os.environ.get("ROUTING_ALI_ONS_DIR", ""), str(_ROOT / ".node"), str(_ROOT)]

PROBE = """
const MQClientAPI = require('ali-ons/lib/mq_client_api');
const [topic, addr] = [process.argv[2], process.argv[3]];
(async () => {
  const api = new MQClientAPI({ nameSrv: [addr], httpclient: {}, responseTimeout: 5000,
                                logger: { info() {}, warn() {}, error() {}, debug() {} } });
  await api.ready();
  try {
    console.log(JSON.stringify({ ok: true,
                                 route: await api.getTopicRouteInfoFromNameServer(topic, 5000) }));
  } catch (err) {
    console.log(JSON.stringify({ ok: false, name: err.name, message: err.message }));
  }
  await api.close();
})().catch(e => { console.error(e); process.exit(2); });
"""


def _node_modules() -> Path | None:
    for base in _CANDIDATES:
        if base and (Path(base) / "node_modules" / "ali-ons" / "package.json").is_file():
            return Path(base) / "node_modules"
    return None


NODE = shutil.which("node")
MODULES = _node_modules()
pytestmark = pytest.mark.skipif(
    NODE is None or MODULES is None,
    reason="needs Node.js and the npm package ali-ons (a pure-JS RocketMQ remoting client): "
           "npm install --prefix .node ali-ons@3.12.0, or set ROUTING_ALI_ONS_DIR")


async def _ask(script: Path, topic: str, port: int) -> dict[str, Any]:
    assert NODE is not None and MODULES is not None
    proc = await asyncio.create_subprocess_exec(
        NODE, str(script), topic, f"127.0.0.1:{port}", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "NODE_PATH": str(MODULES)})
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def test_ali_ons_client_fetches_routes(tmp_path: Path) -> None:
    script = tmp_path / "probe.js"
    script.write_text(PROBE)
    manager = r.RouteInfoManager()
    for name, addr in (("broker-a", "127.0.0.1:10911"), ("broker-b", "127.0.0.1:10921")):
        manager.register(r.Registration(
            cluster="c1", broker_name=name, broker_id=0, broker_addr=addr,
            topics={t: r.TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4)
                    for t in ("TopicTest", f"only-{name}")}))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with NameServerHost(NameServerProcessor(manager), host="127.0.0.1",
                                  port=0) as host:
            return (await _ask(script, "TopicTest", host.port),
                    await _ask(script, "NoSuchTopic", host.port))

    found, missing = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert found["ok"], found
    route = found["route"]
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a", "broker-b"]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    assert [q["writeQueueNums"] for q in route["queueDatas"]] == [4, 4]
    assert missing == {"ok": False, "name": "MQClientException",
                       "message": "No topic route info in name server for the topic: "
                                  "NoSuchTopic\nSee https://rocketmq.apache.org/docs/"
                                  "bestPractice/06FAQ for further details."}
