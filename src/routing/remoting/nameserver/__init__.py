"""The name-server host part of `routing.remoting`: `NameServerHost` and ``routing serve``.

``_connection`` (one accepted connection and its `Channel`), ``_admission`` (the bounded
queue per request class, SYSTEM_BUSY, the fair share of the workers), ``_logs`` (the
operator's structured log lines), ``_host`` (`NameServerHost`), ``_metrics`` (Prometheus,
typed against a small protocol of the host) and ``_serve`` (`serve`/`run_server`: the
process). Imports the wire and processor parts. Import the names from `routing.remoting`.
"""
