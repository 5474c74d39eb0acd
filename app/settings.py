"""Settings: Kafka-named properties from a ``.properties`` file, then environment
variables (``FRANZ_LOG_RETENTION_HOURS=24`` -> ``log.retention.hours``), then CLI flags
(``--override`` and the named ones), merged and checked once into a
``core.broker.admin.broker_config.BrokerConfig``.

``listeners`` is kept whole (``app.listeners`` serves them all); ``host`` and ``port``
are its first listener's unless given as overrides (``--host``/``--port``), which then
replace that listener's: the command line wins only when it is given.

Every key must be one franz reads (``known_properties``): the broker table
(``BROKER_PROPERTIES``), the broker synonyms of topic configs (``log.retention.hours``,
``log.segment.bytes``, ...: ``core.storage.config``) and ``STORAGE_EXTRAS``. There is no
passthrough prefix. Kafka broker keys with no meaning here (``IGNORED_KAFKA_PROPERTIES``,
found in Kafka's stock ``server.properties``) are accepted with one warning, so that
file can be reused. Anything else stops the start with a ``ConfigError``, one line
naming the key, where it was set and the closest known key; a value that does not parse
names the key, the value and what is allowed. Environment variables are read only for
names that are properties: ``FRANZ_`` also prefixes the client tools' variables
(``FRANZ_BOOTSTRAP_SERVER``, ``FRANZ_CLIENT_*``).

``parse_properties`` reads Java's ``.properties`` format (``java.util.Properties.load``):
``#`` and ``!`` comment lines, ``=``, ``:`` or whitespace between key and value, a line
ending in an odd number of backslashes continued on the next (whose leading whitespace is
dropped), escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\<any>`` for that character (``\\:``,
``\\=``, ``\\\\``, ``\\ ``). Unlike Java, the file is read as UTF-8 and a value's trailing
whitespace is dropped unless escaped.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path

from api.forwarded import forwarded_header, trusted_networks
from app import kafka_listeners, properties
from app.listeners import Listener, parse_listeners
from app.properties import Property
from core.broker.admin.broker_config import BROKER_PROPERTIES, BrokerConfig
from core.storage.config import TOPIC_CONFIG_DEFS, LogConfig, server_synonyms
from core.storage.errors import InvalidConfigError

log = logging.getLogger(__name__)

ENV_PREFIX = "FRANZ_"

#: Broker log properties the storage reads that are neither in the broker table nor a
#: topic config's synonym.
STORAGE_EXTRAS: Mapping[str, str] = {
    "log.cleaner.dedupe.buffer.size": "bytes of the cleaner's key map",
}

#: Kafka broker properties franz accepts and does not use, and why.
IGNORED_KAFKA_PROPERTIES: Mapping[str, str] = {
    "num.network.threads": "one event loop serves every connection",
    "num.io.threads": "one event loop serves every connection",
    "socket.send.buffer.bytes": "the operating system's defaults apply",
    "socket.receive.buffer.bytes": "the operating system's defaults apply",
    "num.recovery.threads.per.data.dir": "recovery runs on the storage thread pool",
    "transaction.state.log.replication.factor": "franz has no transactions",
    "transaction.state.log.min.isr": "franz has no transactions",
    "zookeeper.connection.timeout.ms": "see zookeeper.session.timeout.ms",
}

#: Kafka broker properties franz reads per topic only: refused with this hint.
TOPIC_ONLY: Mapping[str, str] = {
    name: f"franz reads {name} per topic only: set it on the topic "
          f"(franz topics --alter --topic T --config {name}=...)"
    for name in ("compression.gzip.level", "compression.lz4.level", "compression.zstd.level")
}

_TABLE = {p.name for p in BROKER_PROPERTIES}


class ConfigError(Exception):
    """A configuration franz cannot start with; the message is one line naming the key,
    where it was set and what would be accepted."""




# --- the .properties format (app.properties) --------------------------------------


def parse_properties(text: str, *, source: str = "<properties>") -> list[Property]:
    """``app.properties.parse_properties``; ConfigError for what it refuses."""
    try:
        return properties.parse_properties(text, source=source)
    except properties.PropertiesSyntaxError as exc:
        raise ConfigError(str(exc)) from None


def read_properties(path: Path) -> dict[str, str]:
    """The file's properties (the last of a repeated key wins)."""
    return {p.key: p.value for p in _read(path)}


def _read(path: Path) -> list[Property]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 ({exc.reason})"
        raise ConfigError(f"cannot read {path}: {reason}") from None
    return parse_properties(text, source=str(path))


def env_properties(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``FRANZ_<NAME>`` variables whose name is a property (``FRANZ_NUM_PARTITIONS`` ->
    ``num.partitions``); other ``FRANZ_`` variables belong to other tools."""
    env = os.environ if environ is None else environ
    known = known_properties()
    found = {k[len(ENV_PREFIX):].lower().replace("_", "."): v
             for k, v in env.items() if k.startswith(ENV_PREFIX) and len(k) > len(ENV_PREFIX)}
    return {k: v for k, v in found.items() if k in known}


# --- checks ------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _synonyms() -> frozenset[str]:
    """The broker properties that default a topic config (``log.retention.hours``...)."""
    return frozenset(s.name for k in TOPIC_CONFIG_DEFS for s in server_synonyms(k.name))


@lru_cache(maxsize=1)
def known_properties() -> frozenset[str]:
    """Every key a properties file or ``--override`` may set."""
    return frozenset(_TABLE | _synonyms() | set(STORAGE_EXTRAS) | set(IGNORED_KAFKA_PROPERTIES)
                     ) - set(TOPIC_ONLY)


def check_key(key: str, origin: str) -> None:
    """ConfigError unless ``key`` is known: the message names the closest known key."""
    if key in known_properties():
        return
    if key in TOPIC_ONLY:
        raise ConfigError(f"{origin}: {TOPIC_ONLY[key]}")
    close = difflib.get_close_matches(key, sorted(known_properties()), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else " (docs/cli.md lists the properties)"
    raise ConfigError(f"{origin}: unknown property {key!r}{hint}")


#: Integer broker properties with a bounded range: (least, most; None: no ceiling).
RANGES: dict[str, tuple[int, int | None]] = {
    "api.v3.produce.batch.maximum.entries": (1, 50),  # Confluent's range
    "http.gzip.min.bytes": (0, None),
    "authentication.failures.max": (0, 1_000_000),
    "authentication.failures.address.max": (0, 1_000_000),
    "authentication.failures.window.ms": (1, 86_400_000),
    "authentication.failures.lockout.ms": (1, 86_400_000),
    "authentication.failures.tracked.max": (1, 10_000_000),
    "socket.request.max.bytes": (1, 2_147_483_647),  # Kafka's: an INT, at least 1
    "group.min.session.timeout.ms": (1, 2_147_483_647),  # a JoinGroup's INT32
    "group.max.session.timeout.ms": (1, 2_147_483_647),
}

#: Pairs of integer broker properties where the first must be at most the second.
ORDERED: tuple[tuple[str, str], ...] = (
    ("group.min.session.timeout.ms", "group.max.session.timeout.ms"),
)

#: String broker properties with a parser of their own (ValueError names the property).
PARSERS: dict[str, Callable[[str], object]] = {
    "http.forwarded.trusted.addresses": trusted_networks,
    "http.forwarded.header": forwarded_header,
    "kafka.listeners": kafka_listeners.check_listeners_text,
    "kafka.advertised.listeners": kafka_listeners.check_listeners_text,
    "listener.security.protocol.map": kafka_listeners.parse_protocol_map,
    "sasl.enabled.mechanisms": kafka_listeners.check_sasl_mechanisms,
    "ssl.client.auth": lambda raw: raw.strip() and kafka_listeners.check_client_auth(raw),
}


#: String broker properties that take one of a few values.
CHOICES: dict[str, tuple[str, ...]] = {"log.format": ("text", "json")}


def _check_choice(key: str, raw: str) -> None:
    if raw.strip() not in CHOICES[key]:
        raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: "
                                 f"String must be one of: {', '.join(CHOICES[key])}")


def _check_range(key: str, raw: str) -> None:
    low, high = RANGES[key]
    value = int(raw.strip())
    if value < low or (high is not None and value > high):
        allowed = f"[{low}, {high}]" if high is not None else f"[{low}, ...]"
        raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: "
                                 f"Value must be in {allowed}")


def _check_parsed(key: str, raw: str) -> None:
    try:
        PARSERS[key](raw)
    except ValueError as exc:
        raise InvalidConfigError(f"Invalid value {raw[:200]} for configuration {key}: "
                                 f"{str(exc).removeprefix(key + ': ')}") from None


def check_value(key: str, raw: object, origin: str) -> None:
    """ConfigError when ``raw`` is not a value ``key`` takes, in Kafka's wording (the key,
    the value, what is allowed)."""
    if not isinstance(raw, str) or key in IGNORED_KAFKA_PROPERTIES:
        return  # not a string: typed by argparse (--port, --broker-id)
    try:
        if key in _TABLE:
            BrokerConfig.from_properties({key: raw})
            if key in RANGES:
                _check_range(key, raw)
            if key in CHOICES:
                _check_choice(key, raw)
            if key in PARSERS:
                _check_parsed(key, raw)
        if key in STORAGE_EXTRAS and not raw.strip().isdigit():
            raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: "
                                     "Not a number of type LONG (allowed: [0, ...])")
        if key in _synonyms():
            LogConfig.from_overrides({}, {key: raw})
    except InvalidConfigError as exc:
        raise ConfigError(f"{origin}: {exc.message}") from None


def _check_ordered(props: Mapping[str, object], origins: Mapping[str, str]) -> None:
    """ConfigError when a pair of ``ORDERED`` is the wrong way round, naming both values
    and where each was set (or that it is the default)."""
    for low, high in ORDERED:
        if low not in props and high not in props:
            continue
        values = BrokerConfig.from_properties({k: props[k] for k in (low, high) if k in props})
        if values[low] > values[high]:
            said = {k: f"{values[k]} ({origins[k] if k in props else 'the default'})"
                    for k in (low, high)}
            raise ConfigError(f"{low} {said[low]} must be at most {high} {said[high]}")


# --- loading -----------------------------------------------------------------------------


def load_config(
    *, properties_file: Path | None = None, overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """The merged, checked configuration; ConfigError for an unknown key or a bad value."""
    props: dict[str, object] = {}
    origins: dict[str, str] = {}
    if properties_file is not None:
        for prop in _read(properties_file):
            props[prop.key] = prop.value
            origins[prop.key] = f"{properties_file}:{prop.line}"
    for key, value in env_properties(environ).items():
        props[key] = value
        origins[key] = f"${ENV_PREFIX}{key.upper().replace('.', '_')}"
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    props.update(given)
    origins.update({k: f"--override {k}" for k in given})
    for key, value in props.items():
        check_key(key, origins[key])
        check_value(key, value, origins[key])
    _check_ordered(props, origins)
    ignored = sorted(k for k in props if k in IGNORED_KAFKA_PROPERTIES)
    if ignored:
        log.warning("ignoring Kafka properties franz has no use for: %s", ", ".join(
            f"{k} ({IGNORED_KAFKA_PROPERTIES[k]})" for k in ignored))
    first = _first_listener(props.get("listeners"))
    if first is not None:  # host/port mean the first listener, unless given as overrides
        if "host" not in given:
            props["host"] = first.host
        if "port" not in given:
            props["port"] = first.port
    return BrokerConfig.from_properties(props)


def _first_listener(listeners: object) -> Listener | None:
    if not isinstance(listeners, str):
        return None
    try:
        found = parse_listeners(listeners)
    except ValueError:  # reported, naming the property, when the server starts
        return None
    return found[0] if found else None
