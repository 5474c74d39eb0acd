"""Options of the ``franz`` data source: names, defaults, parsing and validation.

Spark hands options over as strings in a case-insensitive mapping (its iteration yields
lower-cased keys). Everything here is plain Python: no Spark, no HTTP, so every rule is
checked where the DataFrame is defined (``load()`` / ``save()`` / ``start()``), before
any job runs. Unknown option names are an error that names the option and lists the
supported ones (Spark's Kafka source silently ignores a misspelt option).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Kafka's special offsets in per-partition JSON.
EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]


class FranzOptionError(ValueError):
    """A bad, unknown or conflicting option of the ``franz`` data source."""


# --- option names --------------------------------------------------------------------
# Canonical spelling of every option; lookups are by the lower-cased name.

#: Kafka's client TLS settings, PEM files (as franz's broker reads them); also accepted
#: with Spark's ``kafka.`` prefix (``kafka.ssl.truststore.location``), as Spark's Kafka
#: source users write them.
SSL_OPTIONS = ("ssl.truststore.location", "ssl.keystore.location", "ssl.key.password")
KAFKA_PREFIX = "kafka."

HTTP_OPTIONS = (
    "url",
    "kafka.bootstrap.servers",
    "auth.bearerToken",
    "auth.basic",
    "tls.verify",
    *SSL_OPTIONS,
    *(KAFKA_PREFIX + name for name in SSL_OPTIONS),
    "requestTimeoutMs",
    "http.maxRetries",
    "http.retryBackoffMs",
)
#: ``http.header.<Name>``: an extra request header.
HEADER_PREFIX = "http.header."

READER_OPTIONS = (
    *HTTP_OPTIONS,
    "subscribe",
    "subscribePattern",
    "assign",
    "path",  # load("topic") = subscribe
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "failOnDataLoss",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "includeHeaders",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "longPollTimeoutMs",
    "maxBytesPerRequest",
    "maxRecordsPerRequest",
    "arrow",
    "commitOffsetsToGroup",
    "commitToGroup",  # alias of commitOffsetsToGroup
    "keyFormat",
    "valueFormat",
)

WRITER_OPTIONS = (
    *HTTP_OPTIONS,
    "topic",
    "path",  # save("topic") = topic
    "batchSize",
    "maxBytesPerRequest",
    "acks",
    "exactlyOnce",
    "idempotencyKeyPrefix",
    "write.maxRetries",
    "write.retryBackoffMs",
    "write.maxRetryBackoffMs",
    "write.retryTimeoutMs",
    "keyFormat",
    "valueFormat",
    "keySchemaId",
    "valueSchemaId",
    "keySubject",
    "valueSubject",
    "keySchema",
    "valueSchema",
)

#: Options of the batch reader only (an error on a stream).
BATCH_ONLY = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
#: Options of the stream reader only (ignored, as by Spark's Kafka source, on a batch read).
STREAM_ONLY = (
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "commitOffsetsToGroup",
    "commitToGroup",
)

#: Kafka client options that mean something else here: a pointed error instead of the
#: generic "unknown option".
_REDIRECTS = {
    "kafka.auto.offset.reset": "use startingOffsets",
    "kafka.group.id": "franz reads without consumer groups; commitOffsetsToGroup commits "
    "processed offsets to a group for lag tools",
    "groupidprefix": "franz reads without consumer groups",
    "kafka.key.deserializer": "keys are bytes, or decoded by franz with keyFormat",
    "kafka.value.deserializer": "values are bytes, or decoded by franz with valueFormat",
    "kafka.key.serializer": "keys are bytes or strings, or written by franz with keyFormat",
    "kafka.value.serializer": "values are bytes or strings, or written by franz with "
    "valueFormat",
    "kafka.enable.auto.commit": "use commitOffsetsToGroup",
    "kafka.security.protocol": "the url's scheme decides: https:// for TLS",
    "kafka.sasl.jaas.config": "use auth.basic (user:password)",
    **{
        prefix + name: "franz reads PEM files: ssl.keystore.location holds the client "
        "certificate and its key, ssl.key.password the key's password"
        for prefix in ("", KAFKA_PREFIX)
        for name in (
            "ssl.keystore.type",
            "ssl.truststore.type",
            "ssl.keystore.password",
            "ssl.truststore.password",
        )
    },
}

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {
    None: 1,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


#: Options Spark itself sets or reads (``writeStream.option("checkpointLocation", ..)``
#: reaches the sink's options too); accepted and ignored.
SPARK_OWN = frozenset({"checkpointlocation"})


def _canonical(names: Iterable[str]) -> dict[str, str]:
    return {n.lower(): n for n in names}


_READER_NAMES = _canonical(READER_OPTIONS)
_WRITER_NAMES = _canonical(WRITER_OPTIONS)


def normalize(options: Mapping[str, Any], allowed: Mapping[str, str], kind: str) -> dict[str, str]:
    """``{canonical name: value}``; unknown names raise ``FranzOptionError``."""
    out: dict[str, str] = {}
    for raw_key, value in options.items():
        key = str(raw_key)
        low = key.lower()
        if low in SPARK_OWN:
            continue
        if low.startswith(HEADER_PREFIX):
            name = key[len(HEADER_PREFIX) :]
            if not name:
                raise FranzOptionError(f"Option {key!r}: the header name is empty")
            out[HEADER_PREFIX + name] = str(value)
            continue
        canonical = allowed.get(low)
        if canonical is None:
            hint = _REDIRECTS.get(low)
            if hint is None:
                close = difflib.get_close_matches(low, list(allowed), n=1, cutoff=0.75)
                hint = f"did you mean {allowed[close[0]]!r}?" if close else None
            supported = ", ".join(sorted(set(allowed.values()))) + f", {HEADER_PREFIX}<Name>"
            why = f" ({hint})" if hint else ""
            raise FranzOptionError(
                f"Unknown option {key!r} for the franz {kind}{why}. Supported options: {supported}"
            )
        out[canonical] = "" if value is None else str(value)
    return out


#: ``keyFormat`` / ``valueFormat``: ``binary`` (the bytes) or a Schema Registry format,
#: decoded by franz with the schema the bytes name into a JSON string column.
BINARY_FORMAT = "binary"
SCHEMA_FORMATS = ("avro", "jsonschema", "protobuf")


# --- scalar parsers ------------------------------------------------------------------


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise FranzOptionError(f"Option {name}={raw!r} is not a boolean (true or false)")


def _int(
    opts: Mapping[str, str], name: str, default: int | None, *, minimum: int | None = None
) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise FranzOptionError(f"Option {name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise FranzOptionError(f"Option {name}={raw!r} must be >= {minimum}")
    return value


def _format(opts: Mapping[str, str], name: str) -> str:
    raw = opts.get(name)
    if raw is None:
        return BINARY_FORMAT
    low = raw.strip().lower()
    if low != BINARY_FORMAT and low not in SCHEMA_FORMATS:
        raise FranzOptionError(
            f"Option {name}={raw!r} is not one of {BINARY_FORMAT}, {', '.join(SCHEMA_FORMATS)}"
        )
    return low


def _duration_ms(opts: Mapping[str, str], name: str, default: int) -> int:
    raw = opts.get(name)
    if raw is None:
        return default
    m = _DURATION.match(raw)
    if not m:
        raise FranzOptionError(
            f"Option {name}={raw!r} is not a duration (milliseconds, or a number with "
            "ms, s, m, h or d)"
        )
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _DURATION_UNITS[unit]


def _json(opts: Mapping[str, str], name: str) -> Any:
    raw = opts[name]
    try:
        return json.loads(raw)
    except ValueError as e:
        raise FranzOptionError(f"Option {name}: not valid JSON ({e}): {raw!r}") from None


def _partition_map(opts: Mapping[str, str], name: str, what: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": n, ...}, ...}`` -> ``{(topic, 0): n}``."""
    doc = _json(opts, name)
    shape = f'Option {name} must be JSON like {{"topicA":{{"0":{what},"1":{what}}}}}'
    if not isinstance(doc, dict) or not doc:
        raise FranzOptionError(f"{shape}; got {opts[name]!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict) or not parts:
            raise FranzOptionError(f"{shape}; topic {topic!r} has {parts!r}")
        for p, value in parts.items():
            try:
                partition = int(p)
            except (TypeError, ValueError):
                raise FranzOptionError(
                    f"{shape}; partition {p!r} of topic {topic!r} is not a number"
                ) from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise FranzOptionError(
                    f"{shape}; {topic}-{partition} has {value!r}, not an integer"
                )
            if partition < 0:
                raise FranzOptionError(f"Option {name}: negative partition {topic}-{partition}")
            out[(topic, partition)] = value
    return out


# --- connection ----------------------------------------------------------------------


@dataclass(frozen=True)
class HttpConf:
    """How to reach franz: travels (pickled) to every executor. TLS files are paths,
    read where the client runs (the SSL context is built there, ``client.py``)."""

    urls: tuple[str, ...]
    headers: tuple[tuple[str, str], ...] = ()
    basic_auth: tuple[str, str] | None = None
    verify: bool | str = True
    request_timeout_ms: int = 30_000
    max_retries: int = 3
    retry_backoff_ms: int = 100
    truststore: str | None = None  # PEM CA bundle verifying https servers
    keystore: str | None = None  # PEM client certificate and key (mutual TLS)
    key_password: str | None = field(default=None, repr=False)


def _urls(opts: Mapping[str, str]) -> tuple[str, ...]:
    raw = opts.get("url")
    if raw is None and opts.get("kafka.bootstrap.servers") is not None:
        raw = ",".join(
            s if "://" in s else f"http://{s}"
            for s in (x.strip() for x in opts["kafka.bootstrap.servers"].split(","))
            if s
        )
    if raw is None or not raw.strip():
        raise FranzOptionError(
            "Option url is required: the base URL of a franz server, e.g. "
            "http://127.0.0.1:8082 (a comma-separated list is tried in order)"
        )
    urls = tuple(u.strip().rstrip("/") for u in raw.split(",") if u.strip())
    for u in urls:
        if not re.match(r"^https?://[^/\s]+", u):
            raise FranzOptionError(f"Option url: {u!r} is not an http:// or https:// URL")
    return urls


def http_conf(opts: Mapping[str, str]) -> HttpConf:
    headers = [
        (k[len(HEADER_PREFIX) :], v) for k, v in sorted(opts.items()) if k.startswith(HEADER_PREFIX)
    ]
    token = opts.get("auth.bearerToken")
    if token:
        headers.append(("Authorization", f"Bearer {token}"))
    basic = None
    if opts.get("auth.basic"):
        user, sep, password = opts["auth.basic"].partition(":")
        if not sep:
            raise FranzOptionError("Option auth.basic must be user:password")
        basic = (user, password)
    if token and basic:
        raise FranzOptionError("Options auth.bearerToken and auth.basic exclude each other")
    verify: bool | str = True
    raw_verify = opts.get("tls.verify")
    if raw_verify is not None:
        low = raw_verify.strip().lower()
        verify = True if low == "true" else False if low == "false" else raw_verify.strip()
    truststore, keystore, key_password = (_ssl_option(opts, n) for n in SSL_OPTIONS)
    if truststore is not None and verify is not True:
        raise FranzOptionError(
            "Options tls.verify and ssl.truststore.location exclude each other "
            "(ssl.truststore.location is the CA bundle that verifies the server)"
        )
    if key_password is not None and keystore is None:
        raise FranzOptionError("Option ssl.key.password needs ssl.keystore.location")
    return HttpConf(
        urls=_urls(opts),
        headers=tuple(headers),
        basic_auth=basic,
        verify=verify,
        request_timeout_ms=_int(opts, "requestTimeoutMs", 30_000, minimum=1) or 30_000,
        max_retries=_int(opts, "http.maxRetries", 3, minimum=0) or 0,
        retry_backoff_ms=_int(opts, "http.retryBackoffMs", 100, minimum=0) or 0,
        truststore=truststore,
        keystore=keystore,
        key_password=key_password,
    )


def _ssl_option(opts: Mapping[str, str], name: str) -> str | None:
    """``name`` or its ``kafka.``-prefixed alias (they must agree); None when unset. A
    path is not checked here: it names a file on the executors, not on the driver."""
    values = {
        n: opts[n].strip() for n in (name, KAFKA_PREFIX + name) if opts.get(n) is not None
    }
    if len(set(values.values())) > 1:
        raise FranzOptionError(f"Options {name} and {KAFKA_PREFIX}{name} disagree")
    value = next(iter(values.values()), None)
    if value == "":
        raise FranzOptionError(f"Option {name} is empty")
    return value


# --- reader --------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSpec:
    """``earliest`` / ``latest`` or a per-partition map (values may be -2 / -1)."""

    kind: str  # "earliest" | "latest" | "specific"
    offsets: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TimestampSpec:
    """One timestamp for every partition (``at_all``) or one per partition."""

    at_all: int | None = None
    per_partition: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReaderConf:
    http: HttpConf
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec | None = None  # None: the default of batch / stream
    ending: OffsetSpec = OffsetSpec("latest")
    starting_ts: TimestampSpec | None = None
    starting_ts_strategy: str = "error"
    ending_ts: TimestampSpec | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 100
    long_poll_timeout_ms: int = 500
    max_bytes_per_request: int = 4 * 1024 * 1024
    max_records_per_request: int = 10_000
    arrow: bool = True
    commit_group: str | None = None
    key_format: str = BINARY_FORMAT
    value_format: str = BINARY_FORMAT
    given: tuple[str, ...] = ()  # canonical names the user set

    def describe_subscription(self) -> str:
        if self.subscribe:
            return f"subscribe={','.join(self.subscribe)}"
        if self.pattern is not None:
            return f"subscribePattern={self.pattern}"
        return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assign)


def _starting(opts: Mapping[str, str], name: str) -> OffsetSpec | None:
    raw = opts.get(name)
    if raw is None:
        return None
    low = raw.strip().lower()
    if low in ("earliest", "latest"):
        return OffsetSpec(low)
    offsets = _partition_map(opts, name, "offset")
    for tp, off in offsets.items():
        if off < EARLIEST:
            raise FranzOptionError(
                f"Option {name}: {tp[0]}-{tp[1]} has {off}; use an offset >= 0, "
                "-2 (earliest) or -1 (latest)"
            )
    return OffsetSpec("specific", offsets)


def _timestamps(opts: Mapping[str, str], single: str, per: str) -> TimestampSpec | None:
    if opts.get(single) is not None:
        value = _int(opts, single, None, minimum=0)
        return TimestampSpec(at_all=value)
    if opts.get(per) is not None:
        stamps = _partition_map(opts, per, "epochMs")
        for tp, ts in stamps.items():
            if ts < 0:
                raise FranzOptionError(f"Option {per}: {tp[0]}-{tp[1]} has a negative timestamp")
        return TimestampSpec(per_partition=stamps)
    return None


def _subscription(
    opts: Mapping[str, str],
) -> tuple[tuple[str, ...], str | None, tuple[TopicPartition, ...]]:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if opts.get(n) is not None]
    if not given and opts.get("path"):
        opts = {**opts, "subscribe": opts["path"]}
        given = ["subscribe"]
    if len(given) != 1:
        raise FranzOptionError(
            "Exactly one of the options subscribe, subscribePattern, assign must be given"
            + (f" (got {', '.join(given)})" if given else "")
        )
    which = given[0]
    raw = opts[which]
    if which == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise FranzOptionError("Option subscribe is empty: give comma-separated topic names")
        return topics, None, ()
    if which == "subscribePattern":
        if not raw.strip():
            raise FranzOptionError("Option subscribePattern is empty")
        try:
            re.compile(raw)
        except re.error as e:
            raise FranzOptionError(f"Option subscribePattern={raw!r} is not a regex: {e}") from None
        return (), raw, ()
    doc = _json(opts, "assign")
    shape = 'Option assign must be JSON like {"topicA":[0,1],"topicB":[2,4]}'
    if not isinstance(doc, dict) or not doc:
        raise FranzOptionError(f"{shape}; got {raw!r}")
    tps: list[TopicPartition] = []
    for topic, parts in doc.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise FranzOptionError(f"{shape}; topic {topic!r} has {parts!r}")
        tps += [(topic, p) for p in parts]
    if not tps:
        raise FranzOptionError(f"{shape}; no partitions given")
    return (), None, tuple(sorted(set(tps)))


def reader_conf(options: Mapping[str, Any]) -> ReaderConf:
    """Parse and validate the reader options (batch and stream alike)."""
    opts = normalize(options, _READER_NAMES, "reader")
    subscribe, pattern, assign = _subscription(opts)
    starting = _starting(opts, "startingOffsets")
    ending = _starting(opts, "endingOffsets") or OffsetSpec("latest")
    if ending.kind == "earliest":
        raise FranzOptionError("Option endingOffsets=earliest is not allowed; use latest or JSON")
    for tp, off in ending.offsets.items():
        if off == EARLIEST:
            raise FranzOptionError(
                f"Option endingOffsets: {tp[0]}-{tp[1]} is -2 (earliest), which is not allowed "
                "as an end"
            )
    strategy = (opts.get("startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise FranzOptionError(
            f"Option startingOffsetsByTimestampStrategy={strategy!r} is not error or latest"
        )
    max_per_trigger = _int(opts, "maxOffsetsPerTrigger", None, minimum=1)
    min_per_trigger = _int(opts, "minOffsetsPerTrigger", None, minimum=1)
    if (
        max_per_trigger is not None
        and min_per_trigger is not None
        and (min_per_trigger > max_per_trigger)
    ):
        raise FranzOptionError(
            f"Option minOffsetsPerTrigger={min_per_trigger} is larger than "
            f"maxOffsetsPerTrigger={max_per_trigger}"
        )
    group = opts.get("commitOffsetsToGroup") or opts.get("commitToGroup")
    if (
        opts.get("commitOffsetsToGroup")
        and opts.get("commitToGroup")
        and (opts["commitOffsetsToGroup"] != opts["commitToGroup"])
    ):
        raise FranzOptionError("Options commitOffsetsToGroup and commitToGroup disagree")
    if group is not None and ("/" in group or not group.strip()):
        raise FranzOptionError(f"Option commitOffsetsToGroup={group!r} is not a group name")
    http = http_conf(opts)
    long_poll = _int(opts, "longPollTimeoutMs", 500, minimum=0) or 0
    if long_poll > 300_000:
        raise FranzOptionError("Option longPollTimeoutMs must be <= 300000 (the server's cap)")
    if http.request_timeout_ms <= long_poll:
        raise FranzOptionError(
            f"Option requestTimeoutMs={http.request_timeout_ms} must exceed "
            f"longPollTimeoutMs={long_poll}"
        )
    return ReaderConf(
        http=http,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_ts=_timestamps(opts, "startingTimestamp", "startingOffsetsByTimestamp"),
        starting_ts_strategy=strategy,
        ending_ts=_timestamps(opts, "endingTimestamp", "endingOffsetsByTimestamp"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60_000),
        min_partitions=_int(opts, "minPartitions", None, minimum=1),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", None, minimum=1),
        include_headers=_bool(opts, "includeHeaders", False),
        poll_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs", 120_000, minimum=0) or 0,
        fetch_offset_retries=_int(opts, "fetchOffset.numRetries", 3, minimum=0) or 0,
        fetch_offset_retry_interval_ms=_int(opts, "fetchOffset.retryIntervalMs", 100, minimum=0)
        or 0,
        long_poll_timeout_ms=long_poll,
        max_bytes_per_request=_int(opts, "maxBytesPerRequest", 4 * 1024 * 1024, minimum=1) or 1,
        max_records_per_request=_int(opts, "maxRecordsPerRequest", 10_000, minimum=1) or 1,
        arrow=_bool(opts, "arrow", True),
        commit_group=group,
        key_format=_format(opts, "keyFormat"),
        value_format=_format(opts, "valueFormat"),
        given=tuple(sorted(opts)),
    )


def batch_checks(conf: ReaderConf) -> None:
    """Rules of ``spark.read``: start may not be latest, start <= end where both are given."""
    start = conf.starting
    if start is not None and start.kind == "latest":
        raise FranzOptionError(
            "Option startingOffsets=latest is not allowed for a batch read (it would read "
            "nothing); use earliest or JSON"
        )
    if start is not None and start.kind == "specific":
        for tp, off in start.offsets.items():
            if off == LATEST:
                raise FranzOptionError(
                    f"Option startingOffsets: {tp[0]}-{tp[1]} is -1 (latest), which is not "
                    "allowed for a batch read"
                )
    end = conf.ending
    if start is not None and start.kind == "specific" and end.kind == "specific":
        if set(start.offsets) != set(end.offsets):
            raise FranzOptionError(
                "Options startingOffsets and endingOffsets must name the same partitions"
            )
        for tp, s in start.offsets.items():
            e = end.offsets[tp]
            if s >= 0 and e >= 0 and s > e:
                raise FranzOptionError(
                    f"Option startingOffsets for {tp[0]}-{tp[1]} is {s}, after its "
                    f"endingOffsets {e}"
                )


def stream_checks(conf: ReaderConf) -> None:
    """Rules of ``spark.readStream``: no end options."""
    for name in BATCH_ONLY:
        if name in conf.given:
            raise FranzOptionError(f"Option {name} is for batch reads only, not for a stream")


# --- writer --------------------------------------------------------------------------


#: Longest ``idempotencyKeyPrefix``: with the rest of a key (micro-batch, Spark
#: partition, topic or its digest, chunk number) a key stays within franz's 255 characters.
MAX_KEY_PREFIX_LENGTH = 100


#: A Schema Registry format's schema type in the registry's answers (``schemaType``,
#: absent for AVRO) and its ``type`` in a v3 produce record.
REGISTRY_TYPES = {"avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}
V3_TYPES = {"avro": "AVRO", "jsonschema": "JSONSCHEMA", "protobuf": "PROTOBUF"}


@dataclass(frozen=True)
class SchemaSpec:
    """How a write encodes one side (``key`` or ``value``) of its records: ``binary``
    (the column's bytes as they are) or a Schema Registry format, the column then being a
    string of JSON that franz writes with a schema (Confluent's wire format). The schema:
    ``schema`` (a text, registered by franz under the subject when new), ``schema_id``,
    or neither (``latest``: the subject's latest version, turned into its id on the
    driver, ``writer.resolve_schemas``). ``subject`` is only set when the option named
    one; franz's default is TopicNameStrategy, ``<topic>-key`` / ``<topic>-value``."""

    side: str  # "key" | "value"
    format: str = BINARY_FORMAT
    schema_id: int | None = None
    subject: str | None = None
    schema: str | None = None

    @property
    def encoded(self) -> bool:
        """Written by franz with a schema (not binary)."""
        return self.format != BINARY_FORMAT

    @property
    def latest(self) -> bool:
        """The subject's latest version, not resolved to an id yet."""
        return self.encoded and self.schema_id is None and self.schema is None

    def option(self, what: str) -> str:
        """The option's name, e.g. ``option("SchemaId")`` -> ``valueSchemaId``."""
        return self.side + what

    def default_subject(self, topic: str) -> str:
        return self.subject or f"{topic}-{self.side}"


def _schema_spec(opts: Mapping[str, str], side: str) -> SchemaSpec:
    fmt = _format(opts, side + "Format")
    given = [n for n in ("SchemaId", "Subject", "Schema") if opts.get(side + n) is not None]
    if fmt == BINARY_FORMAT:
        if given:
            raise FranzOptionError(
                f"Option {side}{given[0]} needs {side}Format=avro, jsonschema or protobuf "
                f"({side}Format is binary: the {side} column's bytes are written as they are)"
            )
        return SchemaSpec(side)
    if opts.get(side + "SchemaId") is not None and opts.get(side + "Schema") is not None:
        raise FranzOptionError(
            f"Options {side}SchemaId and {side}Schema exclude each other: give the id of a "
            f"registered schema, or a schema text for franz to register"
        )
    subject = opts.get(side + "Subject")
    if subject is not None:
        subject = subject.strip()
        if not subject:
            raise FranzOptionError(f"Option {side}Subject is empty")
    schema = opts.get(side + "Schema")
    if schema is not None and not schema.strip():
        raise FranzOptionError(f"Option {side}Schema is empty: give the schema's text")
    return SchemaSpec(
        side,
        fmt,
        schema_id=_int(opts, side + "SchemaId", None, minimum=0),
        subject=subject,
        schema=schema,
    )


@dataclass(frozen=True)
class WriterConf:
    http: HttpConf
    topic: str | None = None
    batch_size: int = 500
    max_bytes_per_request: int = 4 * 1024 * 1024
    acks: str = "all"
    #: Every produce carries an ``Idempotency-Key`` derived from what the request is
    #: (writer.py): a retried request, task or micro-batch writes nothing twice.
    exactly_once: bool = True
    #: Replaces ``spark:<write id or query id>`` at the start of every key.
    idempotency_key_prefix: str | None = None
    #: Retries of one produce request with its key (exactly-once writes only): at most
    #: ``max_retries`` resends and ``retry_timeout_ms`` in all, the pause doubling from
    #: ``retry_backoff_ms`` up to ``max_retry_backoff_ms``.
    max_retries: int = 20
    retry_backoff_ms: int = 200
    max_retry_backoff_ms: int = 10_000
    retry_timeout_ms: int = 180_000
    #: ``keyFormat`` / ``valueFormat`` and their schemas.
    key_schema: SchemaSpec = SchemaSpec("key")
    value_schema: SchemaSpec = SchemaSpec("value")
    #: The cluster id of the v3 produce path, found on the driver when a side is
    #: written with a schema (``writer.resolve_schemas``).
    cluster_id: str | None = None

    @property
    def with_schemas(self) -> bool:
        """A side is written with a schema: the write goes through franz's v3 produce
        (``POST /v3/clusters/{c}/topics/{t}/records``, a ``type`` per key and value),
        binary writes through v2's ``POST /topics/{t}``."""
        return self.key_schema.encoded or self.value_schema.encoded


def _key_prefix(opts: Mapping[str, str]) -> str | None:
    raw = opts.get("idempotencyKeyPrefix")
    if raw is None:
        return None
    prefix = raw.strip()
    if not prefix:
        raise FranzOptionError("Option idempotencyKeyPrefix is empty")
    if len(prefix) > MAX_KEY_PREFIX_LENGTH:
        raise FranzOptionError(
            f"Option idempotencyKeyPrefix is {len(prefix)} characters long, at most "
            f"{MAX_KEY_PREFIX_LENGTH} (franz's Idempotency-Key holds 255)"
        )
    if not prefix.isascii() or not prefix.isprintable():
        raise FranzOptionError(
            f"Option idempotencyKeyPrefix={raw!r} must be printable ASCII (it starts every "
            "Idempotency-Key header)"
        )
    return prefix


def writer_conf(options: Mapping[str, Any]) -> WriterConf:
    opts = normalize(options, _WRITER_NAMES, "writer")
    topic = opts.get("topic") or opts.get("path") or None
    if topic is not None and not topic.strip():
        topic = None
    acks = (opts.get("acks") or "all").strip().lower()
    if acks not in ("0", "1", "all", "-1"):
        raise FranzOptionError(f"Option acks={acks!r} is not 0, 1 or all")
    # exactly once by default, except with acks=0: franz answers such a produce before
    # the append, so there is no answer a retry could be given (it refuses the header)
    exactly_once = _bool(opts, "exactlyOnce", acks != "0")
    if exactly_once and acks == "0":
        raise FranzOptionError(
            "Option exactlyOnce=true needs acks=1 or acks=all: with acks=0 franz answers "
            "before the records are written, so a retry cannot be given the first answer "
            "(leave exactlyOnce unset, or set it to false, for acks=0 writes)"
        )
    prefix = _key_prefix(opts)
    if prefix is not None and not exactly_once:
        raise FranzOptionError(
            "Option idempotencyKeyPrefix needs exactly-once writes (exactlyOnce=true and "
            "acks=1 or all)"
        )
    backoff = _int(opts, "write.retryBackoffMs", 200, minimum=0) or 0
    max_backoff = _int(opts, "write.maxRetryBackoffMs", 10_000, minimum=0) or 0
    if max_backoff < backoff:
        raise FranzOptionError(
            f"Option write.maxRetryBackoffMs={max_backoff} is smaller than "
            f"write.retryBackoffMs={backoff}"
        )
    key_schema, value_schema = _schema_spec(opts, "key"), _schema_spec(opts, "value")
    encoded = [s for s in (key_schema, value_schema) if s.encoded]
    if encoded and acks not in ("all", "-1"):
        raise FranzOptionError(
            f"Option acks={acks} cannot be used with {encoded[0].option('Format')}="
            f"{encoded[0].format}: records written with a schema go through franz's v3 "
            "produce, which always waits for every in-sync replica (leave acks unset, or "
            "set it to all)"
        )
    for spec in encoded:
        if spec.latest and topic is None:
            raise FranzOptionError(
                f"Option {spec.option('Format')}={spec.format} without "
                f"{spec.option('SchemaId')}, {spec.option('Schema')} or "
                f"{spec.option('Subject')} writes with the latest version of the subject "
                f"<topic>-{spec.side}, which needs the topic option (the schema is looked "
                "up once when the write starts, before any row's topic is known)"
            )
    return WriterConf(
        http=http_conf(opts),
        topic=topic.strip() if topic else None,
        batch_size=_int(opts, "batchSize", 500, minimum=1) or 1,
        max_bytes_per_request=_int(opts, "maxBytesPerRequest", 4 * 1024 * 1024, minimum=1) or 1,
        acks=acks,
        exactly_once=exactly_once,
        idempotency_key_prefix=prefix,
        max_retries=_int(opts, "write.maxRetries", 20, minimum=0) or 0,
        retry_backoff_ms=backoff,
        max_retry_backoff_ms=max_backoff,
        retry_timeout_ms=_int(opts, "write.retryTimeoutMs", 180_000, minimum=0) or 0,
        key_schema=key_schema,
        value_schema=value_schema,
    )
