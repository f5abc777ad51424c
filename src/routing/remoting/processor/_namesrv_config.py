"""The name server's settings by their Java names: ``namesrv.properties``, 318 and 319.

Java counterparts: ``NamesrvConfig`` and ``NettyServerConfig`` (the objects Java's
``Configuration`` reports), ``MixAll.string2Properties``/``properties2String`` and
``java.util.Properties.load``. `NamesrvConfig` holds every setting a Java name server has:

- *live* keys take effect here at once: `RoutingConfig`'s fields by their Java names, the
  processor's switches, and two routing-only keys (``defaultHeartbeatTimeoutMillis``,
  ``maxQueueNums``);
- *kept* keys are Java's, which routing does not use (thread pools, Netty tuning, ...): they
  are validated by their Java type, stored and reported, so tools written against Java work;
- any other key is ignored by an update (Java's ``Configuration.update`` only updates keys
  that exist); a ``--config`` file's unknown keys are kept, as Java registers the file.

An update is all or nothing: a value that does not parse raises `ConfigError` naming the
key and the value, and nothing changes.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, cast

import attrs

from ..._errors import InvalidRequest, RoutingError
from ..._messages import RoutingConfig

__all__ = ["ALWAYS_BLACK_LISTED", "KEYS", "ConfigError", "ConfigKey", "NamesrvConfig",
           "from_routing", "help_text", "load_properties_file", "parse_properties"]

_INT_MAX, _LONG_MAX = 2**31 - 1, 2**63 - 1

#: Keys 318 can never change, whatever ``configBlackList`` says (Java's processor adds
#: these four to the configured list).
ALWAYS_BLACK_LISTED = frozenset({"configBlackList", "configStorePath", "kvConfigPath",
                                 "rocketmqHome"})


class ConfigError(RoutingError, ValueError):
    """A setting that does not parse: names the key, the value and, from a file, where.
    Raised by the O(pairs) checks before anything changes."""

    def __init__(self, message: str, *, key: str | None = None, value: str | None = None,
                 source: str | None = None, line: int | None = None) -> None:
        where = f"{source}:{line}: " if source is not None and line is not None else (
            f"{source}: " if source is not None else "")
        super().__init__(where + message)
        self.key, self.value, self.source, self.line = key, value, source, line


Kind = Literal["bool", "int", "long", "str"]


@attrs.frozen
class ConfigKey:
    """One setting: its Java name and type, whether it takes effect here, and its help."""

    name: str
    kind: Kind
    live: bool
    help: str
    low: int = 0


#: The keys that take effect here or are read at start, in help order (`KEYS` adds Java's).
_OWN_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("scanNotActiveBrokerInterval", "long", True,
              "expiry scan period, ms (from the next scan)", 1),
    ConfigKey("supportActingMaster", "bool", True, "acting-master rewrite of routes"),
    ConfigKey("deleteTopicWithBrokerRegistration", "bool", True, "delete topics by omission"),
    ConfigKey("notifyMinBrokerIdChanged", "bool", True, "send NOTIFY_MIN_BROKER_ID_CHANGE"),
    ConfigKey("orderMessageEnable", "bool", True, "orderTopicConf in routes from the KV"),
    ConfigKey("needWaitForService", "bool", True, "readiness gate after start"),
    ConfigKey("waitSecondsForService", "int", True, "length of the readiness gate, s"),
    ConfigKey("enableAllTopicList", "bool", True, "answer GET_ALL_TOPIC_LIST"),
    ConfigKey("enableTopicList", "bool", True, "answer topic lists by cluster and unit"),
    ConfigKey("returnOrderTopicConfigToBroker", "bool", True,
              "ORDER_TOPIC_CONFIG in registration answers"),
    ConfigKey("defaultHeartbeatTimeoutMillis", "long", True,
              "routing: broker timeout if registration has none", 1),
    ConfigKey("maxQueueNums", "int", True, "routing: cap on queue numbers (0-65535)"),
    ConfigKey("clientRequestThreadPoolQueueCapacity", "int", True,
              "route-read queue; SYSTEM_BUSY past it (next scan)", 1),
    ConfigKey("defaultThreadPoolQueueCapacity", "int", True,
              "queue of other requests; SYSTEM_BUSY past it (next scan)", 1),
    ConfigKey("serverChannelMaxIdleTimeSeconds", "int", True,
              "close silent connections after this, s (0: never; next scan)"),
    ConfigKey("configBlackList", "str", False, "';'-separated keys 318 may not change"),
    ConfigKey("kvConfigPath", "str", False, "the KV file (as --kv-config)"),
    ConfigKey("configStorePath", "str", False, "the --config file"),
)

#: Java's keys that routing keeps and reports without using them (``NamesrvConfig`` and
#: ``NettyServerConfig`` with the name server's port 9876): name, Java type, Java's
#: default (``-``: reported only once set), and a note for the help.
_JAVA_KEYS = """
rocketmqHome                        str   -        never changed by 318
productEnvName                      str   center
clusterTest                         bool  false
clientRequestThreadPoolNums         int   8
defaultThreadPoolNums               int   16
unRegisterBrokerQueueCapacity       int   3000
enableControllerInNamesrv           bool  false
bindAddress                         str   0.0.0.0  use --listen
listenPort                          int   9876     use --listen
serverWorkerThreads                 int   8
serverCallbackExecutorThreads       int   0
serverSelectorThreads               int   3
serverOnewaySemaphoreValue          int   256
serverAsyncSemaphoreValue           int   64
serverSocketSndBufSize              int   0
serverSocketRcvBufSize              int   0
writeBufferHighWaterMark            int   0
writeBufferLowWaterMark             int   0
serverSocketBacklog                 int   1024
serverNettyWorkerGroupEnable        bool  true
serverPooledByteBufAllocatorEnable  bool  true
enableShutdownGracefully            bool  false
shutdownWaitTimeSeconds             int   30
useEpollNativeSelector              bool  false
"""


def _java_keys() -> tuple[list[ConfigKey], dict[str, str]]:
    keys, defaults = [], {}
    for row in _JAVA_KEYS.strip().splitlines():
        name, kind, default, *note = row.split(maxsplit=3)
        keys.append(ConfigKey(name, cast(Kind, kind), False,
                              f"Java only ({note[0]})" if note else "Java only"))
        if default != "-":
            defaults[name] = default
    return keys, defaults


_JAVA_ONLY, _JAVA_DEFAULTS = _java_keys()
#: Every key a Java 5.x name server reports, plus routing's own, in help order.
KEYS: tuple[ConfigKey, ...] = (*_OWN_KEYS, *_JAVA_ONLY)
_BY_NAME = {k.name: k for k in KEYS}

#: The defaults of the kept keys: Java's (paths are reported only once set), and those of
#: the host's settings, which the host reads (`NameServerHost`).
_KEPT_DEFAULTS: dict[str, str] = {
    "configBlackList": "configBlackList;configStorePath;kvConfigPath",
    "clientRequestThreadPoolQueueCapacity": "50000", "defaultThreadPoolQueueCapacity": "10000",
    "serverChannelMaxIdleTimeSeconds": "120", **_JAVA_DEFAULTS,
}

_ROUTING_BOOLS = {"supportActingMaster": "support_acting_master",
                  "deleteTopicWithBrokerRegistration": "delete_topic_with_broker_registration",
                  "notifyMinBrokerIdChanged": "notify_min_broker_id_changed",
                  "orderMessageEnable": "order_message_enable"}
_ROUTING_INTS = {"scanNotActiveBrokerInterval": "scan_interval_ms",
                 "defaultHeartbeatTimeoutMillis": "default_heartbeat_timeout_ms",
                 "maxQueueNums": "max_queue_nums"}
_SWITCHES = {"enableAllTopicList": "enable_all_topic_list",
             "enableTopicList": "enable_topic_list",
             "returnOrderTopicConfigToBroker": "return_order_topic_config_to_broker"}


def _parse(key: str, kind: Kind, raw: str, low: int = 0) -> bool | int | str:
    """A value as Java's ``properties2Object`` reads it, but strict: a boolean is
    ``true``/``false`` (any case; Java reads anything else as false), a number a decimal
    that fits the Java type."""
    text = raw.strip()
    if kind == "str":
        return text
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{key}={raw!r:.80} is not a boolean (true or false)",
                              key=key, value=raw)
        return text.lower() == "true"
    digits = text[1:] if text[:1] in "+-" else text
    high = _INT_MAX if kind == "int" else _LONG_MAX
    if not (digits.isascii() and digits.isdigit()) or not low <= int(text) <= high:
        raise ConfigError(f"{key}={raw!r:.80} is not an integer in {low}..{high}",
                          key=key, value=raw)
    return int(text)


def _text(value: bool | int | str) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@attrs.frozen(kw_only=True)
class NamesrvConfig:
    """Every name-server setting; immutable, `update` returns a new one.

    ``routing`` and the three switches are live; ``wait_seconds_for_service`` is Java's
    length of the readiness gate, applied when ``needWaitForService`` is true (then
    ``routing.wait_for_service_ms`` is that many seconds). ``kept`` holds the Java-only
    keys (their text) and a file's unknown keys. `update`, `get` and `as_properties`
    cost O(keys) (about 45).
    """

    routing: RoutingConfig = attrs.field(factory=RoutingConfig)
    enable_all_topic_list: bool = True
    enable_topic_list: bool = True
    return_order_topic_config_to_broker: bool = True
    wait_seconds_for_service: int = 45
    kept: Mapping[str, str] = attrs.field(factory=lambda: dict(_KEPT_DEFAULTS))

    @property
    def black_list(self) -> frozenset[str]:
        """Keys 318 refuses: `ALWAYS_BLACK_LISTED` and ``configBlackList``'s entries."""
        listed = self.kept.get("configBlackList", "")
        return ALWAYS_BLACK_LISTED | {k.strip() for k in listed.split(";") if k.strip()}

    def get(self, key: str) -> str | None:
        """The text of one setting, or None if it is not set."""
        return self.as_properties().get(key)

    def as_properties(self) -> dict[str, str]:
        """Every setting as Java's 319 reports it: key → text, sorted by key."""
        cfg = self.routing
        out = dict(self.kept)
        for key, field in (*_ROUTING_BOOLS.items(), *_ROUTING_INTS.items()):
            out[key] = _text(getattr(cfg, field))
        for key, field in _SWITCHES.items():
            out[key] = _text(getattr(self, field))
        out["needWaitForService"] = _text(cfg.wait_for_service_ms is not None)
        out["waitSecondsForService"] = str(self.wait_seconds_for_service)
        return dict(sorted(out.items()))

    def to_properties(self) -> str:
        """GET_NAMESRV_CONFIG's body: one ``key=value`` line per setting, sorted."""
        return "".join(f"{k}={v}\n" for k, v in self.as_properties().items())

    def update(self, props: Iterable[tuple[str, str]], *, keep_unknown: bool = False,
               source: str | None = None, lines: Mapping[str, int] | None = None
               ) -> tuple[NamesrvConfig, tuple[str, ...]]:
        """Apply ``(key, value)`` pairs (a later pair wins); return the new settings and
        the keys ignored (unknown to Java and routing, and not kept). ``keep_unknown``
        keeps those instead (a ``--config`` file). Raises `ConfigError` naming the key,
        the value and, with ``source``/``lines``, the file and line; nothing changes."""
        lines = lines or {}
        pairs = list(props)
        routing: dict[str, Any] = {}
        own: dict[str, Any] = {}
        kept = dict(self.kept)
        ignored: list[str] = []
        need_wait: bool | None = None
        for key, raw in pairs:
            spec = _BY_NAME.get(key)
            if spec is None:
                if key in kept or keep_unknown:
                    kept[key] = raw.strip()
                else:
                    ignored.append(key)
                continue
            try:
                value = _parse(key, spec.kind, raw, spec.low)
            except ConfigError as exc:
                raise ConfigError(str(exc), key=key, value=raw, source=source,
                                  line=lines.get(key)) from None
            if key in _ROUTING_BOOLS:
                routing[_ROUTING_BOOLS[key]] = value
            elif key in _ROUTING_INTS:
                routing[_ROUTING_INTS[key]] = value
            elif key in _SWITCHES:
                own[_SWITCHES[key]] = value
            elif key == "needWaitForService":
                need_wait = bool(value)
            elif key == "waitSecondsForService":
                own["wait_seconds_for_service"] = value
            else:
                kept[key] = _text(value)
        if need_wait is not None or "wait_seconds_for_service" in own:
            if need_wait is None:
                need_wait = self.routing.wait_for_service_ms is not None
            seconds = own.get("wait_seconds_for_service", self.wait_seconds_for_service)
            assert isinstance(seconds, int)
            routing["wait_for_service_ms"] = seconds * 1000 if need_wait else None
        try:
            new_routing = attrs.evolve(self.routing, **routing)
        except InvalidRequest as exc:
            field = str(exc.field or "").rpartition(".")[2]
            key = next((k for k, f in (*_ROUTING_BOOLS.items(), *_ROUTING_INTS.items())
                        if f == field), field)
            raw = next((v for k, v in pairs if k == key), str(exc.value))
            raise ConfigError(f"{key}={raw!r:.80} is out of range ({exc})", key=key, value=raw,
                              source=source,
                              line=lines.get(key)) from None
        new = attrs.evolve(self, routing=new_routing, kept=kept, **own)
        return new, tuple(ignored)


def from_routing(config: RoutingConfig, *, enable_all_topic_list: bool = True,
                 enable_topic_list: bool = True,
                 return_order_topic_config_to_broker: bool = True) -> NamesrvConfig:
    """Settings around an existing `RoutingConfig` (its readiness wait kept exactly;
    ``waitSecondsForService`` reports it rounded up to whole seconds)."""
    wait = config.wait_for_service_ms
    seconds = 45 if wait is None else -(-wait // 1000)
    return NamesrvConfig(routing=config, wait_seconds_for_service=seconds,
                         enable_all_topic_list=enable_all_topic_list,
                         enable_topic_list=enable_topic_list,
                         return_order_topic_config_to_broker=return_order_topic_config_to_broker)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, *, source: str | None = None
                     ) -> list[tuple[int, str, str]]:
    """``java.util.Properties.load``: ``(line, key, value)`` for each entry, in order.

    Comments (``#``, ``!``), blank lines, ``key=value``, ``key: value`` and ``key value``,
    backslash continuations, and the escapes ``\\t \\n \\r \\f \\uXXXX``. A malformed
    ``\\u`` escape raises `ConfigError` naming the line. O(len(text)).
    """
    out: list[tuple[int, str, str]] = []
    physical = text.splitlines()
    i = 0
    while i < len(physical):
        start = i
        line = physical[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(physical):
            line = line[:-1] + physical[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key_end = _key_end(line)
        rest = line[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        try:
            key, value = _unescape(line[:key_end]), _unescape(rest)
        except ValueError as exc:
            raise ConfigError(str(exc), source=source, line=start + 1) from None
        out.append((start + 1, key, value))
    return out


def _continues(line: str) -> bool:
    slashes = len(line) - len(line.rstrip("\\"))
    return slashes % 2 == 1


def _key_end(line: str) -> int:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            return i
        i += 1
    return len(line)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            hex_ = text[i + 2:i + 6]
            if len(hex_) != 4 or any(h not in "0123456789abcdefABCDEF" for h in hex_):
                raise ConfigError(f"malformed \\uxxxx escape: {text[i:i + 6]!r}")
            out.append(chr(int(hex_, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def load_properties_file(path: str | Path, base: NamesrvConfig | None = None
                         ) -> tuple[NamesrvConfig, tuple[str, ...]]:
    """Read a ``namesrv.properties`` file over ``base`` (Java's ``-c``): the settings and
    the keys neither Java nor routing knows (kept and reported, as Java does; worth a
    warning). ``configStorePath`` becomes the file. Raises `ConfigError` naming the file,
    the line and the key for a bad value, and for a file that cannot be read. O(file
    size)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config file: {exc}", source=source) from None
    entries = parse_properties(text, source=source)
    lines = {key: line for line, key, _ in entries}
    pairs = [(key, value) for _, key, value in entries]
    unknown = tuple(dict.fromkeys(k for k in (key for key, _ in pairs) if k not in _BY_NAME))
    settings, _ = (base or NamesrvConfig()).update(pairs, keep_unknown=True, source=source,
                                                   lines=lines)
    kept = dict(settings.kept)
    kept["configStorePath"] = source
    return attrs.evolve(settings, kept=kept), unknown


def help_text() -> str:
    """The keys for ``routing serve --help``: live ones first. O(keys), about 45."""
    live = [k for k in KEYS if k.live]
    start = [k for k in KEYS if not k.live and not k.help.startswith("Java only")]
    width = max(len(k.name) for k in live + start)
    rows = [f"  {k.name:<{width}}  {k.kind:<4}  {k.help}" for k in live]
    rows += ["Read at start (318 may not change them):"]
    rows += [f"  {k.name:<{width}}  {k.kind:<4}  {k.help}" for k in start]
    java = ", ".join(k.name for k in KEYS if not k.live and k not in start)
    return ("Keys that take effect at once (Java names; 318 changes them at run time):\n"
            + "\n".join(rows) + "\nKept and reported, no effect here (Java's):\n"
            + textwrap.fill(java, width=78, initial_indent="  ", subsequent_indent="  "))
