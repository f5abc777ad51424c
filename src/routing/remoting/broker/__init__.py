"""The broker host part of `routing.remoting`: `BrokerHost` and ``routing broker``.

``_wire`` (a `routing.heartbeat` action as a request and the response back, sans-I/O),
``_host`` (`BrokerHost`, the asyncio driver) and ``_serve`` (`serve_broker`/`run_broker`
and the admin line protocol). Imports the wire part and `routing.heartbeat`. Import the
names from `routing.remoting`.
"""
