'use strict';
// A real RocketMQ client (ali-ons, pure JavaScript, remoting over TCP) driven by a Python test.
//
//   node ali_ons_driver.js '{"nameSrv": ["127.0.0.1:9876"], "topics": ["T"], "pollMs": 100}'
//
// The client's own scheduled task polls the name servers for the topics' routes every
// pollMs (pollNameServerInteval); each route the client adopts is printed as
// {"event":"route",...}, each failed poll as {"event":"error",...}. Commands on stdin, one
// JSON object a line: {"op":"ask","id":1,"topic":"T","timeoutMs":2000} asks once
// (getTopicRouteInfoFromNameServer: every name server in turn until one answers) and
// prints {"event":"answer","id":1,...}; {"op":"close"} closes the client and exits.
// The brokers of these tests are fakes: the client sends them nothing.
const readline = require('readline');
const MQClient = require('ali-ons/lib/mq_client');
const ClientConfig = require('ali-ons/lib/client_config');

const options = JSON.parse(process.argv[2]);
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const emit = doc => process.stdout.write(JSON.stringify(doc) + '\n');
const failure = err => ({ name: err.name, code: err.code === undefined ? null : err.code,
                          message: err.message });

class Client extends MQClient {
  async sendHeartbeatToAllBroker() {}
  async doRebalance() {}
  async persistAllConsumerOffset() {}
  _refreshTopicRouteInfo(topic, route) {
    const before = this._topicRouteTable.get(topic);
    super._refreshTopicRouteInfo(topic, route);
    if (!before || JSON.stringify(before) !== JSON.stringify(route)) {
      emit({ event: 'route', topic, route });
    }
  }
}

const config = new ClientConfig({
  nameSrv: options.nameSrv, httpclient: {}, logger: quiet,
  responseTimeout: options.responseTimeoutMs || 3000,
  pollNameServerInteval: options.pollMs || 30000,
  heartbeatBrokerInterval: 3600000, persistConsumerOffsetInterval: 3600000,
  rebalanceInterval: 3600000, instanceName: `test-${process.pid}`,
});
const client = new Client(config);
client.on('error', err => emit(Object.assign({ event: 'error' }, failure(err))));
client.registerProducer('routing-test', {
  publishTopicList: options.topics || [],
  isPublishTopicNeedUpdate() { return false; },
  updateTopicPublishInfo() {},
});

client.ready().then(() => {
  emit({ event: 'ready' });
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', async line => {
    const command = JSON.parse(line);
    if (command.op === 'close') {
      client._inited = false;
      await client.close();
      process.exit(0);
    }
    try {
      const route = await client.getTopicRouteInfoFromNameServer(command.topic,
                                                                  command.timeoutMs || 3000);
      emit({ event: 'answer', id: command.id, ok: true, route });
    } catch (err) {
      emit(Object.assign({ event: 'answer', id: command.id, ok: false }, failure(err)));
    }
  });
}, err => {
  emit(Object.assign({ event: 'failed' }, failure(err)));
  process.exit(2);
});
