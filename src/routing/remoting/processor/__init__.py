"""The processor part of `routing.remoting`: requests in, `Outcome` out, no I/O.

``_request`` (what every handler shares: typed fields, `Outcome`, `Notification`, the
manager and context protocols), one module of handlers per kind of request
(``_register_broker`` with the REGISTER_BROKER fast path and its caches,
``_broker_requests``, ``_route_requests``, ``_operator_requests``), ``_processor``
(`NameServerProcessor`: the dispatch table and the settings), and the state the handlers
read: ``_kv`` (`KVStore`) and ``_namesrv_config`` (`NamesrvConfig`). Imports the wire part
only. Import the names from `routing.remoting`.
"""
