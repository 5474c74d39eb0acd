"""Topic-level configuration: Kafka's ``LogConfig`` definitions, validation and describe.

Every topic key Kafka 3.x knows is declared once in ``TOPIC_CONFIG_DEFS`` (name, type,
default, validator, doc, the broker property that supplies its default), like Kafka's
``ConfigDef``. Values arrive as strings, as they do over Kafka's admin API, and are
parsed the way ``ConfigDef.parseType`` does: trimmed; INT/LONG as decimal integers in
32/64-bit range; BOOLEAN as true/false in any case; LIST split on commas with
surrounding blanks ("" is the empty list).

A topic's effective value comes from, highest first: its own override
(DYNAMIC_TOPIC_CONFIG), the first broker synonym that is set (STATIC_BROKER_CONFIG, e.g.
``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours``, converted to
the topic key's unit), then Kafka's default (DEFAULT_CONFIG).

Topic-name rules (``validate_topic_name``) live here too, because the same create and
alter paths check names and configs together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from types import MappingProxyType

from core.storage.errors import InvalidConfigError, InvalidTopicError

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_INT_RANGE = (-(2**31), INT_MAX)
_LONG_RANGE = (-(2**63), LONG_MAX)
HOUR_MS = 3_600_000
MINUTE_MS = 60_000


class ConfigType(StrEnum):
    """Kafka's ``ConfigDef.Type`` names, as DescribeConfigs reports them."""

    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    LIST = "LIST"
    CLASS = "CLASS"


class ConfigSource(StrEnum):
    """Where an effective value came from (Kafka's DescribeConfigs source names)."""

    DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
    STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"


ConfigValue = int | float | bool | str | tuple[str, ...]
Validator = Callable[[str, ConfigValue, str], None]  # (name, parsed value, raw text)


def _invalid(name: str, raw: object, why: str) -> InvalidConfigError:
    # Kafka's ConfigException wording, so messages match what Kafka tools print.
    return InvalidConfigError(f"Invalid value {raw} for configuration {name}: {why}")


# --- validators --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Range:
    """Numeric bounds, inclusive; ``also`` lists out-of-range values that are allowed."""

    min: float | None = None
    max: float | None = None
    also: tuple[int, ...] = ()

    def __call__(self, name: str, value: ConfigValue, raw: str) -> None:
        assert isinstance(value, int | float)
        if value in self.also:
            return
        extra = f" or one of {list(self.also)}" if self.also else ""
        if self.min is not None and value < self.min:
            raise _invalid(name, raw, f"Value must be at least {self.min}{extra}")
        if self.max is not None and value > self.max:
            raise _invalid(name, raw, f"Value must be no more than {self.max}{extra}")


@dataclass(frozen=True, slots=True)
class OneOf:
    """The value, or each element of a LIST value, must be one of ``values`` (case-sensitive)."""

    values: tuple[str, ...]

    def __call__(self, name: str, value: ConfigValue, raw: str) -> None:
        for item in value if isinstance(value, tuple) else (value,):
            if item not in self.values:
                raise _invalid(name, item, f"String must be one of: {', '.join(self.values)}")


def _throttled_replicas(name: str, value: ConfigValue, raw: str) -> None:
    assert isinstance(value, tuple)
    if "".join(value) == "*" or all(re.fullmatch(r"([0-9]+:[0-9]+)?", v) for v in value):
        return
    why = f"{name} must be the literal '*' or a list of replicas in the format [partitionId]:[brokerId],..."
    raise _invalid(name, raw, why)


def _metadata_version(name: str, value: ConfigValue, raw: str) -> None:
    # Kafka accepts release strings such as 0.10.2, 2.8, 3.0-IV1; deprecated and ignored
    # since 3.0, but still validated.
    if not re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?(-IV[0-9]+)?", str(value)):
        raise _invalid(name, raw, f"Version {value} is not a valid version")


# --- definitions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One topic-level key: type, Kafka default, validator, doc and its broker default."""

    name: str
    type: ConfigType
    default: ConfigValue
    validator: Validator | None
    doc: str
    server_default_property: str | None


@dataclass(frozen=True, slots=True)
class ServerSynonym:
    """A broker property that supplies a topic key's default, in the broker's own unit."""

    name: str
    default: str | None  # the broker's own default, None when unset by default
    unit_ms: int = 1  # multiplier from the broker's unit to the topic key's (hours -> ms)


_I, _L, _D, _B, _S, _LIST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
)
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_WEEK_MS = 7 * 24 * HOUR_MS

# Kafka 3.9 values (4.0 raised segment.bytes' minimum to 1 MiB and dropped the deprecated
# message.format.version, message.timestamp.difference.max.ms, message.downconversion.enable).
TOPIC_CONFIG_DEFS: tuple[ConfigKey, ...] = (
    ConfigKey("cleanup.policy", _LIST, ("delete",), OneOf(("compact", "delete")), "Retention policy: delete old segments, compact by key, or both.", "log.cleanup.policy"),
    ConfigKey("compression.gzip.level", _I, -1, Range(1, 9, also=(-1,)), "Gzip level when compression.type is gzip.", "compression.gzip.level"),
    ConfigKey("compression.lz4.level", _I, 9, Range(1, 17), "LZ4 level when compression.type is lz4.", "compression.lz4.level"),
    ConfigKey("compression.type", _S, "producer", OneOf(_COMPRESSION_TYPES), "Codec for stored batches; 'producer' keeps the producer's codec.", "compression.type"),
    ConfigKey("compression.zstd.level", _I, 3, Range(-131072, 22), "Zstd level when compression.type is zstd.", "compression.zstd.level"),
    ConfigKey("delete.retention.ms", _L, 24 * HOUR_MS, Range(0), "How long tombstones stay readable after compaction.", "log.cleaner.delete.retention.ms"),
    ConfigKey("file.delete.delay.ms", _L, 60_000, Range(0), "Delay before a deleted segment's files are removed.", "log.segment.delete.delay.ms"),
    ConfigKey("flush.messages", _L, LONG_MAX, Range(1), "Fsync after this many appended messages.", "log.flush.interval.messages"),
    ConfigKey("flush.ms", _L, LONG_MAX, Range(0), "Fsync when the oldest unflushed message is this old.", "log.flush.interval.ms"),
    ConfigKey("follower.replication.throttled.replicas", _LIST, (), _throttled_replicas, "Replicas throttled on the follower side ('*' or partition:broker).", None),
    ConfigKey("index.interval.bytes", _I, 4096, Range(0), "Bytes of log between offset index entries.", "log.index.interval.bytes"),
    ConfigKey("leader.replication.throttled.replicas", _LIST, (), _throttled_replicas, "Replicas throttled on the leader side ('*' or partition:broker).", None),
    ConfigKey("local.retention.bytes", _L, -2, Range(-2), "Local bytes kept with tiered storage; -2 means retention.bytes.", "log.local.retention.bytes"),
    ConfigKey("local.retention.ms", _L, -2, Range(-2), "Local time kept with tiered storage; -2 means retention.ms.", "log.local.retention.ms"),
    ConfigKey("max.compaction.lag.ms", _L, LONG_MAX, Range(1), "Longest a message may stay uncompacted.", "log.cleaner.max.compaction.lag.ms"),
    ConfigKey("max.message.bytes", _I, 1_048_588, Range(0), "Largest record batch the log accepts, after compression.", "message.max.bytes"),
    ConfigKey("message.downconversion.enable", _B, True, None, "Whether old fetch versions get down-converted batches.", "log.message.downconversion.enable"),
    ConfigKey("message.format.version", _S, "3.0-IV1", _metadata_version, "Deprecated: message format for appended batches.", "log.message.format.version"),
    ConfigKey("message.timestamp.after.max.ms", _L, LONG_MAX, Range(0), "How far a CreateTime timestamp may lie in the future.", "log.message.timestamp.after.max.ms"),
    ConfigKey("message.timestamp.before.max.ms", _L, LONG_MAX, Range(0), "How far a CreateTime timestamp may lie in the past.", "log.message.timestamp.before.max.ms"),
    ConfigKey("message.timestamp.difference.max.ms", _L, LONG_MAX, Range(0), "Deprecated: bound on |timestamp - now| for CreateTime.", "log.message.timestamp.difference.max.ms"),
    ConfigKey("message.timestamp.type", _S, "CreateTime", OneOf(("CreateTime", "LogAppendTime")), "Keep the producer's timestamp or stamp the append time.", "log.message.timestamp.type"),
    ConfigKey("min.cleanable.dirty.ratio", _D, 0.5, Range(0, 1), "Dirty share of the log that makes it eligible for compaction.", "log.cleaner.min.cleanable.ratio"),
    ConfigKey("min.compaction.lag.ms", _L, 0, Range(0), "Shortest time a message stays uncompacted.", "log.cleaner.min.compaction.lag.ms"),
    ConfigKey("min.insync.replicas", _I, 1, Range(1), "Replicas that must acknowledge an acks=all write.", "min.insync.replicas"),
    ConfigKey("preallocate", _B, False, None, "Preallocate segment files at roll.", "log.preallocate"),
    ConfigKey("remote.log.copy.disable", _B, False, None, "Stop copying segments to tiered storage.", None),
    ConfigKey("remote.log.delete.on.disable", _B, False, None, "Delete remote data when tiered storage is turned off.", None),
    ConfigKey("remote.storage.enable", _B, False, None, "Tier this topic's segments to remote storage.", None),
    ConfigKey("retention.bytes", _L, -1, None, "Bytes kept per partition before old segments go; -1 is no limit.", "log.retention.bytes"),
    ConfigKey("retention.ms", _L, _WEEK_MS, Range(-1), "How long segments are kept; -1 is forever.", "log.retention.ms"),
    ConfigKey("segment.bytes", _I, 1 << 30, Range(14), "Size at which the active segment rolls.", "log.segment.bytes"),
    ConfigKey("segment.index.bytes", _I, 10 << 20, Range(4), "Maximum size of a segment's offset and time index.", "log.index.size.max.bytes"),
    ConfigKey("segment.jitter.ms", _L, 0, Range(0), "Random reduction of segment.ms, to spread rolls.", "log.roll.jitter.ms"),
    ConfigKey("segment.ms", _L, _WEEK_MS, Range(1), "Age at which the active segment rolls.", "log.roll.ms"),
    ConfigKey("unclean.leader.election.enable", _B, False, None, "Allow an out-of-sync replica to become leader (may lose data).", "unclean.leader.election.enable"),
)  # fmt: skip
CONFIG_KEYS: Mapping[str, ConfigKey] = MappingProxyType({k.name: k for k in TOPIC_CONFIG_DEFS})

# Keys with several broker synonyms, highest priority first (ServerTopicConfigSynonyms).
_MULTI_SYNONYMS: Mapping[str, tuple[ServerSynonym, ...]] = MappingProxyType({
    "segment.ms": (ServerSynonym("log.roll.ms", None), ServerSynonym("log.roll.hours", "168", HOUR_MS)),
    "segment.jitter.ms": (ServerSynonym("log.roll.jitter.ms", None), ServerSynonym("log.roll.jitter.hours", "0", HOUR_MS)),
    "flush.ms": (ServerSynonym("log.flush.interval.ms", None), ServerSynonym("log.flush.scheduler.interval.ms", str(LONG_MAX))),
    "retention.ms": (
        ServerSynonym("log.retention.ms", None),
        ServerSynonym("log.retention.minutes", None, MINUTE_MS),
        ServerSynonym("log.retention.hours", "168", HOUR_MS),
    ),
})  # fmt: skip


def server_synonyms(name: str) -> tuple[ServerSynonym, ...]:
    """The broker properties that supply ``name``'s default, highest priority first."""
    key = CONFIG_KEYS[name]
    if name in _MULTI_SYNONYMS:
        return _MULTI_SYNONYMS[name]
    if key.server_default_property is None:
        return ()
    return (ServerSynonym(key.server_default_property, format_value(key.type, key.default)),)


# --- parsing -----------------------------------------------------------------------


def _parse_integer(name: str, raw: str, type_: ConfigType, bounds: tuple[int, int]) -> int:
    text = raw.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not bounds[0] <= int(text) <= bounds[1]:
        raise _invalid(name, raw, f"Not a number of type {type_}")
    return int(text)


def _parse_typed(name: str, type_: ConfigType, raw: str) -> ConfigValue:
    text = raw.strip()
    if type_ is ConfigType.INT:
        return _parse_integer(name, raw, type_, _INT_RANGE)
    if type_ is ConfigType.LONG:
        return _parse_integer(name, raw, type_, _LONG_RANGE)
    if type_ is ConfigType.DOUBLE:
        # Decimal or exponent notation only: Python's float() would also take nan/inf.
        if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text):
            raise _invalid(name, raw, "Not a number of type DOUBLE")
        return float(text)
    if type_ is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(name, raw, "Expected value to be either true or false")
        return text.lower() == "true"
    if type_ is ConfigType.LIST:
        return tuple(re.split(r"\s*,\s*", text)) if text else ()
    if type_ is ConfigType.CLASS and not re.fullmatch(
        r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*", text, re.ASCII
    ):
        raise _invalid(name, raw, "Not a valid class name")
    return text


def allowed_values(key: ConfigKey) -> str | None:
    """What ``key`` takes, for messages: ``[min, max]`` of a number (its type's bounds
    where Kafka sets none), the list of a choice; None for other keys."""
    if key.type in (ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE):
        low: float | None
        high: float | None
        low, high = {ConfigType.INT: _INT_RANGE, ConfigType.LONG: _LONG_RANGE}.get(
            key.type, (None, None))
        v = key.validator
        if isinstance(v, Range):
            low = v.min if v.min is not None else low
            high = v.max if v.max is not None else high
            also = f" or one of {list(v.also)}" if v.also else ""
        else:
            also = ""
        return f"[{_bound(low)}, {_bound(high)}]{also}"
    if isinstance(key.validator, OneOf):
        return ", ".join(key.validator.values)
    return None


def _bound(value: float | None) -> str:
    if value is None:
        return "..."
    return str(int(value)) if float(value).is_integer() else str(value)


def parse_value(key: ConfigKey, raw: str, *, source_name: str | None = None) -> ConfigValue:
    """Parse and validate one string value; errors name ``source_name`` (default the key)
    and, for a numeric key, its allowed range (``allowed_values``)."""
    name = source_name or key.name
    if not isinstance(raw, str):
        raise _invalid(name, repr(raw), "Expected a string value")
    try:
        value = _parse_typed(name, key.type, raw)
    except InvalidConfigError as exc:
        allowed = allowed_values(key)
        if allowed is None:
            raise
        raise InvalidConfigError(f"{exc.message} (allowed: {allowed})") from None
    if isinstance(key.validator, Range):
        try:
            key.validator(name, value, raw)
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"{exc.message} (allowed: {allowed_values(key)})") from None
    elif key.validator is not None:
        key.validator(name, value, raw)
    return value


def format_value(type_: ConfigType, value: ConfigValue) -> str:
    """A parsed value as Kafka prints it (``ConfigDef.convertToString``)."""
    if type_ is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if type_ is ConfigType.LIST:
        assert isinstance(value, tuple)
        return ",".join(value)
    if type_ is ConfigType.DOUBLE:
        assert isinstance(value, int | float)
        return repr(float(value))
    return str(value)


def _from_server(key: ConfigKey, server: Mapping[str, str]) -> tuple[ConfigValue, str] | None:
    """The value the first set broker synonym supplies, with that synonym's name."""
    for syn in server_synonyms(key.name):
        raw = server.get(syn.name)
        if raw is None:
            continue
        text = raw
        if syn.unit_ms != 1 or key.name == "retention.ms":
            number = _parse_integer(syn.name, raw, ConfigType.LONG, _LONG_RANGE) * syn.unit_ms
            # KafkaConfig: any negative broker retention time means "keep forever".
            text = str(-1 if key.name == "retention.ms" and number < 0 else number)
        return parse_value(key, text, source_name=syn.name), syn.name
    return None


def _resolve(
    key: ConfigKey, overrides: Mapping[str, str], server: Mapping[str, str]
) -> tuple[ConfigValue, ConfigSource]:
    if key.name in overrides:
        return parse_value(key, overrides[key.name]), ConfigSource.DYNAMIC_TOPIC_CONFIG
    found = _from_server(key, server)
    if found is not None:
        return found[0], ConfigSource.STATIC_BROKER_CONFIG
    return key.default, ConfigSource.DEFAULT_CONFIG


# --- validation --------------------------------------------------------------------


def validate_topic_configs(
    overrides: Mapping[str, str], *, server_defaults: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Check topic overrides as CreateTopics/AlterConfigs would; return them normalized.

    Raises ``InvalidConfigError`` naming the key: unknown key, unparsable value, out of
    range, not an allowed value, min.compaction.lag.ms above max.compaction.lag.ms, or
    remote.storage.enable=true (franz has no tiered storage).
    """
    for name in overrides:
        if name not in CONFIG_KEYS:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
    normalized = {
        name: format_value(CONFIG_KEYS[name].type, parse_value(CONFIG_KEYS[name], raw))
        for name, raw in overrides.items()
    }
    server = server_defaults or {}
    lag_min, _ = _resolve(CONFIG_KEYS["min.compaction.lag.ms"], normalized, server)
    lag_max, _ = _resolve(CONFIG_KEYS["max.compaction.lag.ms"], normalized, server)
    assert isinstance(lag_min, int) and isinstance(lag_max, int)
    if lag_min > lag_max:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({lag_min}) > "
            f"max.compaction.lag.ms ({lag_max})"
        )
    if normalized.get("remote.storage.enable") == "true":
        raise _invalid(
            "remote.storage.enable",
            "true",
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
        )
    return normalized


# --- the effective configuration ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective topic configuration one partition log runs with; immutable.

    Attribute names are the Kafka keys with '.' as '_'; defaults are Kafka's. Build one
    with ``from_overrides``; a config change means a new object handed to the log.
    ``message_timestamp_before/after_max_ms`` are effective values: left at their
    default they fall back to ``message.timestamp.difference.max.ms`` (KIP-937).
    """

    segment_bytes: int = 1 << 30
    segment_ms: int = _WEEK_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 << 20
    index_interval_bytes: int = 4096
    retention_ms: int = _WEEK_MS
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * HOUR_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Roll age: segment.ms, capped by max.compaction.lag.ms on compacted topics."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @classmethod
    def from_overrides(
        cls, overrides: Mapping[str, str], server_defaults: Mapping[str, str] | None = None
    ) -> LogConfig:
        """Kafka defaults, then broker properties, then the topic's overrides.

        Malformed values raise ``InvalidConfigError``; override keys this version does
        not know are ignored, as Kafka's ``LogConfig`` does.
        """
        server = server_defaults or {}
        values = {
            f.name: _resolve(CONFIG_KEYS[f.name.replace("_", ".")], overrides, server)[0]
            for f in fields(cls)
        }
        diff = values["message_timestamp_difference_max_ms"]
        for attr in ("message_timestamp_before_max_ms", "message_timestamp_after_max_ms"):
            if values[attr] == LONG_MAX:
                values[attr] = diff
        return cls(**values)  # type: ignore[arg-type]


# --- broker properties of the storage layer ------------------------------------------

PRODUCER_ID_EXPIRATION_MS = "producer.id.expiration.ms"
PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = "producer.id.expiration.check.interval.ms"
TRANSIENT_PRODUCER_ID_EXPIRATION_MS = "idempotency.producer.id.expiration.ms"

# Broker-wide, not topic configs (Kafka's ProducerStateManagerConfig / TransactionLogConfigs:
# CreateTopics refuses them as topic keys), so they are not in TOPIC_CONFIG_DEFS and not
# LogConfig fields: the log manager reads them from its broker properties and hands the
# value to each log (``PartitionLog.open(producer_id_expiration_ms=...)``).
BROKER_STORAGE_DEFS: tuple[ConfigKey, ...] = (
    ConfigKey(PRODUCER_ID_EXPIRATION_MS, _I, 86_400_000, Range(1), "How long a producer id stays in a partition's producer state after its last write: its retries are recognised as duplicates meanwhile.", None),
    ConfigKey(PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, _I, 600_000, Range(1), "How often producer ids idle for producer.id.expiration.ms are removed.", None),
    ConfigKey(TRANSIENT_PRODUCER_ID_EXPIRATION_MS, _I, 600_000, Range(1), "How long a partition keeps the producer id of one Idempotency-Key request (transient: one per request) after its write; a request left unfinished is recognised when resumed within this time.", None),
)  # fmt: skip
BROKER_STORAGE_KEYS: Mapping[str, ConfigKey] = MappingProxyType(
    {k.name: k for k in BROKER_STORAGE_DEFS}
)


def broker_storage_value(name: str, server_defaults: Mapping[str, str] | None) -> int:
    """The broker property ``name`` (a key of ``BROKER_STORAGE_DEFS``) as set in
    ``server_defaults``, parsed and range-checked as Kafka does, else Kafka's default.
    ``InvalidConfigError`` names the property and its allowed range."""
    key = BROKER_STORAGE_KEYS[name]
    raw = (server_defaults or {}).get(name)
    value = key.default if raw is None else parse_value(key, raw)
    assert isinstance(value, int)
    return value


# --- describe ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One place a value could come from, in DescribeConfigs' ``synonyms``."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a topic's DescribeConfigs answer (and of Confluent's v3 configs API)."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    is_read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    type: ConfigType
    documentation: str


def describe_configs(
    overrides: Mapping[str, str], server_defaults: Mapping[str, str] | None = None
) -> list[ConfigEntry]:
    """Every topic key with its effective value, source and synonyms, sorted by name.

    Synonyms follow Kafka's order: the topic override, then each broker synonym that is
    set, then each broker synonym's own default. Unknown override keys are skipped.
    """
    server = server_defaults or {}
    entries = []
    for key in sorted(TOPIC_CONFIG_DEFS, key=lambda k: k.name):
        value, source = _resolve(key, overrides, server)
        syns = (
            [ConfigSynonym(key.name, overrides[key.name], source)] if key.name in overrides else []
        )
        for syn in server_synonyms(key.name):
            if syn.name in server:
                syns.append(
                    ConfigSynonym(syn.name, server[syn.name], ConfigSource.STATIC_BROKER_CONFIG)
                )
        for syn in server_synonyms(key.name):
            if syn.default is not None:
                syns.append(ConfigSynonym(syn.name, syn.default, ConfigSource.DEFAULT_CONFIG))
        shown = overrides[key.name] if key.name in overrides else format_value(key.type, value)
        entries.append(
            ConfigEntry(
                name=key.name,
                value=shown,
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                is_read_only=False,
                is_sensitive=False,
                synonyms=tuple(syns),
                type=key.type,
                documentation=key.doc,
            )
        )
    return entries


# --- topic names -------------------------------------------------------------------

MAX_TOPIC_NAME_LENGTH = 249


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is (Kafka's ``Topic``)."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
        )
    if not re.fullmatch(r"[a-zA-Z0-9._-]+", name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def is_valid_topic_name(name: str) -> bool:
    return topic_name_problem(name) is None


def validate_topic_name(name: str) -> None:
    """Raise ``InvalidTopicError`` ("Topic name is invalid: ...") for an illegal name."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise InvalidTopicError(f"Topic name is invalid: {problem}")


def topic_collides(a: str, b: str) -> bool:
    """True when the names are equal once '.' and '_' are unified (Kafka's metric names
    cannot tell them apart); identical names count as colliding, as in Kafka."""
    return a.replace(".", "_") == b.replace(".", "_")
