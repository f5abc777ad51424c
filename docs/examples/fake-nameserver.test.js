'use strict';
// A Node.js test of a RocketMQ client against `routing fake` (docs/testing-clients.md).
// Runs with plain `node` (no test framework needed) and the ali-ons client:
//   NODE_PATH=.node/node_modules node docs/examples/fake-nameserver.test.js
// ROUTING_FAKE overrides the command, as a JSON array (default ["routing", "fake"]).
const assert = require('assert');
const http = require('http');
const readline = require('readline');
const { spawn } = require('child_process');
const MQClientAPI = require('ali-ons/lib/mq_client_api');

const command = JSON.parse(process.env.ROUTING_FAKE || '["routing", "fake"]');

// Start two fake name servers on free ports; the first stdout line says where they are.
function startFake() {
  const child = spawn(command[0], [...command.slice(1), '--listen', '127.0.0.1:0',
    '--control', '127.0.0.1:0', '--nameservers', '2'], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once('line', line => {
      resolve(Object.assign({ child }, JSON.parse(line)));
    });
    child.once('exit', code => reject(new Error(`routing fake exited with ${code}`)));
  });
}

// One control API call: JSON in, JSON out.
function control(base, method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? '' : JSON.stringify(body);
    const request = http.request(base + path, { method,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) },
    }, response => {
      let text = '';
      response.on('data', chunk => { text += chunk; });
      response.on('end', () => resolve({ status: response.statusCode, body: JSON.parse(text) }));
    });
    request.on('error', reject);
    request.end(data);
  });
}

const brokersOf = route => route.queueDatas.map(q => q.brokerName).sort();
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

async function main() {
  const fake = await startFake();
  const api = (method, path, body) => control(fake.control, method, path, body);
  const client = new MQClientAPI({ nameSrv: fake.nameservers, httpclient: {}, logger: quiet });
  client.on('error', () => {});  // connections refused by the stopped name server, expected
  try {
    await client.ready();
    for (const [name, addr] of [['broker-a', '127.0.0.1:20911'], ['broker-b', '127.0.0.1:20921']]) {
      const made = await api('POST', '/brokers', { name, addr, topics: ['TopicTest'], queues: 4 });
      assert.strictEqual(made.status, 201);
    }
    let route = await client.getTopicRouteInfoFromNameServer('TopicTest', 3000);
    assert.deepStrictEqual(brokersOf(route), ['broker-a', 'broker-b']);

    // broker-b hangs; two minutes pass on the name servers' clock, in no time.
    await api('POST', '/brokers/127.0.0.1:20921/quiet');
    await api('POST', '/clock/advance', { ms: 125000 });
    route = await client.getTopicRouteInfoFromNameServer('TopicTest', 3000);
    assert.deepStrictEqual(brokersOf(route), ['broker-a']);

    // The next route request, wherever it goes, is answered SYSTEM_BUSY.
    await api('POST', '/faults', { action: 'busy', code: 'GET_ROUTEINFO_BY_TOPIC', count: 1 });
    await assert.rejects(client.getTopicRouteInfoFromNameServer('TopicTest', 3000),
      err => err.name === 'MQClientException' && err.code === 2);
    await api('DELETE', '/faults');

    // The first name server goes down: the client gets its routes from the second.
    await api('POST', '/nameservers/0/stop');
    for (let i = 0; i < 3; i++) {
      route = await client.getTopicRouteInfoFromNameServer('TopicTest', 3000);
      assert.deepStrictEqual(brokersOf(route), ['broker-a']);
    }

    // Everything the name servers saw, as JSON.
    const events = (await api('GET', '/events?kind=expired')).body.events;
    assert.deepStrictEqual(events.map(e => [e.nameserver, e.at_ms, e.broker]),
      [[0, 125000, '127.0.0.1:20921'], [1, 125000, '127.0.0.1:20921']]);
    const bad = await api('POST', '/clock/advance', { ms: -1 });
    assert.deepStrictEqual([bad.status, bad.body.field, bad.body.value], [400, 'ms', -1]);
    assert.strictEqual((await api('POST', '/reset')).status, 200);
    console.log('ok');
  } finally {
    await client.close();
    fake.child.kill('SIGTERM');
  }
}

main().catch(err => { console.error(err); process.exit(1); });
