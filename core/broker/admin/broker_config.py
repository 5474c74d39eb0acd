"""Broker configuration: Kafka's property names and defaults, declared once, and the
same properties as v3 broker configs.

``BROKER_PROPERTIES`` is the table (name, type, default, doc), like Kafka's ConfigDef.
``BrokerConfig.from_properties`` turns a string map (properties file, environment, CLI
flags, merged by ``app/settings.py``) into a frozen object handed to the broker. Log
properties (``log.*``, ``message.max.bytes``, ``min.insync.replicas``, ...) are kept as
strings in ``log_defaults`` and become topic defaults through
``core.storage.config.LogConfig.from_overrides``. ``broker_config_entries`` describes
them all for ``GET /v3/clusters/{id}/brokers/{id}/configs`` (read-only: franz has no
dynamic broker configs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.storage.config import (
    TOPIC_CONFIG_DEFS,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    server_synonyms,
)
from core.storage.errors import InvalidConfigError


@dataclass(frozen=True, slots=True)
class PropertyDef:
    name: str
    type: type
    default: Any
    doc: str
    sensitive: bool = False  # described without its value (passwords)


def _p(name: str, typ: type, default: Any, doc: str, *, sensitive: bool = False) -> PropertyDef:
    return PropertyDef(name, typ, default, doc, sensitive)


BROKER_PROPERTIES: tuple[PropertyDef, ...] = (
    _p("broker.id", int, 0, "id of this broker"),
    _p("host", str, "127.0.0.1", "address the HTTP listener binds to"),
    _p("port", int, 8082, "port of the HTTP listener"),
    _p("advertised.host", str, "", "host used in base_uri and links (default: the request's)"),
    _p("log.dirs", str, "./data", "data directory"),
    _p("num.partitions", int, 1, "partitions of auto-created topics and of topics created without a count"),
    _p("default.replication.factor", int, 1, "replication factor of auto-created topics"),
    _p("auto.create.topics.enable", bool, True, "create a topic on first produce or subscribe"),
    _p("delete.topic.enable", bool, True, "allow deleting topics"),
    _p("offsets.topic.num.partitions", int, 50, "partitions of __consumer_offsets"),
    _p("offsets.topic.replication.factor", int, 3, "replication factor of __consumer_offsets (capped at live brokers)"),
    _p("offsets.topic.segment.bytes", int, 104857600, "segment size of __consumer_offsets"),
    _p("offset.metadata.max.bytes", int, 4096, "max length of commit metadata"),
    _p("offsets.commit.timeout.ms", int, 5000, "acks=all wait of an offset commit"),
    _p("group.initial.rebalance.delay.ms", int, 0, "delay of the first rebalance of an empty group"),
    _p("group.min.session.timeout.ms", int, 6000, "shortest session timeout a Kafka client's JoinGroup may ask for (1 to group.max.session.timeout.ms); a shorter one is refused with INVALID_SESSION_TIMEOUT (26). Shorter timeouts find a dead consumer sooner at the cost of more frequent heartbeats; Kafka's"),
    _p("group.max.session.timeout.ms", int, 1800000, "longest session timeout a Kafka client's JoinGroup may ask for (at least group.min.session.timeout.ms); a longer one is refused with INVALID_SESSION_TIMEOUT (26). Longer timeouts give a consumer more time between heartbeats at the cost of finding a dead one later; Kafka's"),
    _p("offsets.retention.minutes", int, 10080, "a consumer group without members for this long (since it became empty, or its last commit if later) loses its committed offsets and is deleted (Kafka's, KIP-211)"),
    _p("offsets.retention.check.interval.ms", int, 600000, "how often empty groups are checked against offsets.retention.minutes"),
    _p("group.max.size", int, 1000, "most members (REST consumer instances) of one consumer group; a join past it is refused (409 / 40903). Kafka's default is 2^31-1; every join rewrites the whole group's record on the event loop, so the cost of a join grows with the group"),
    _p("consumer.instance.timeout.ms", int, 300000, "idle expiry of a REST consumer instance"),
    _p("consumer.request.timeout.ms", int, 1000, "default and max wait of a GET .../records"),
    _p("consumer.request.max.bytes", int, 67108864, "cap on bytes per GET .../records"),
    _p("max.request.size", int, 67108864, "largest accepted HTTP produce body"),
    _p("api.v3.produce.batch.maximum.entries", int, 10, "most entries of one v3 POST .../records:batch (1 to 50); Confluent's"),
    _p("request.body.max.bytes", int, 1048576, "largest accepted HTTP body on every route but produce"),
    _p("consumer.request.timeout.max.ms", int, 300000, "ceiling on any wait a request or a consumer instance asks for"),
    _p("connections.max.idle.ms", int, 600000, "an HTTP or Kafka connection waiting this long on its client (no request, or a request that stopped arriving) is closed; a request being answered, such as a long-poll, is not idle"),
    _p("max.connections", int, 10000, "open connections per listener, HTTP or Kafka; more HTTP ones are answered 503 and closed, more Kafka ones closed (lowered, with a warning, to what the open-files limit leaves)"),
    _p("max.partitions.per.topic", int, 10000, "largest partition count a topic may be created with or grown to"),
    _p("max.partitions.per.broker", int, 50000, "partition replicas one broker may host; creations past it are refused"),
    _p("log.segment.open.files.max", int, 0, "segment .log files kept open at once (an LRU: others are opened on demand); 0: half the soft open-files limit; lowered, with a warning, to what the limit leaves"),
    _p("replica.lag.time.max.ms", int, 30000, "time a follower may stay behind before leaving the ISR"),
    _p("log.retention.check.interval.ms", int, 300000, "how often retention runs"),
    _p("producer.id.expiration.ms", int, 86400000, "how long a partition keeps an idle producer id's state (its last sequences: what lets a retried batch be recognised); Kafka's"),
    _p("idempotency.key.retention.ms", int, 86400000, "how long a produce's Idempotency-Key answers a retry with the original result (docs/delivery.md)"),
    _p("idempotency.keys.max", int, 5000000, "live Idempotency-Keys one broker holds (~300 bytes each); a request with a new key past it is 429 until older keys expire"),
    _p("idempotency.key.claim.timeout.ms", int, 60000, "how long a produce holding an Idempotency-Key may take before a retry with that key may resume it (its broker is presumed gone)"),
    _p("idempotency.producer.id.expiration.ms", int, 600000, "how long a partition keeps the producer id of one Idempotency-Key request after its write; an unfinished request (its broker died, or it failed retriably) is recognised when retried within this time, later retries get 422"),
    _p("idempotency.topic.num.partitions", int, 16, "partitions of __franz_idempotency"),
    _p("idempotency.topic.replication.factor", int, 3, "replication factor of __franz_idempotency (capped at live brokers)"),
    _p("producer.id.expiration.check.interval.ms", int, 600000, "how often expired producer ids are removed (with the retention pass, at most that often)"),
    _p("log.flush.scheduler.interval.ms", int, 1000, "how often the flush policy is checked"),
    _p("log.flush.offset.checkpoint.interval.ms", int, 60000, "recovery-point checkpoint interval"),
    _p("log.flush.start.offset.checkpoint.interval.ms", int, 60000, "log-start-offset checkpoint interval"),
    _p("replica.high.watermark.checkpoint.interval.ms", int, 5000, "HW checkpoint interval"),
    _p("log.cleaner.enable", bool, True, "run log compaction"),
    _p("log.cleaner.backoff.ms", int, 15000, "sleep of the cleaner when nothing is dirty"),
    _p("request.timeout.ms", int, 30000, "acks=all wait of a produce"),
    _p("zookeeper.connect", str, "", "host:port[,host:port][/chroot] of ZooKeeper; empty = standalone"),
    _p("zookeeper.session.timeout.ms", int, 18000, "ZooKeeper session timeout (failure detection)"),
    _p("replica.fetch.wait.max.ms", int, 500, "long-poll wait of a follower's fetch"),
    _p("replica.fetch.max.bytes", int, 1048576, "bytes per partition of a follower's fetch"),
    _p("replica.fetch.response.max.bytes", int, 10485760, "bytes per follower fetch response"),
    _p("replica.fetch.backoff.ms", int, 1000, "sleep of a fetcher after an error"),
    _p("replica.socket.timeout.ms", int, 30000, "timeout of broker-to-broker HTTP calls"),
    _p("controlled.shutdown.enable", bool, True, "move leadership away before a clean exit"),
    _p("controlled.shutdown.timeout.ms", int, 5000, "how long a clean exit waits for leadership to move"),
    _p("auto.leader.rebalance.enable", bool, True, "move leadership back to preferred replicas when imbalanced"),
    _p("leader.imbalance.check.interval.seconds", int, 300, "how often the controller checks leader imbalance"),
    _p("leader.imbalance.per.broker.percentage", int, 10, "share of a broker's preferred partitions led elsewhere that triggers a rebalance"),
    # --- security (docs/security.md) ---
    _p("listeners", str, "", "comma-separated http://HOST:PORT and https://HOST:PORT listeners; empty: http://host:port; the first is the one other brokers call"),
    _p("schema.registry.listeners", str, "", "comma-separated http://HOST:PORT and https://HOST:PORT listeners that serve the Schema Registry alone (and the health probes), e.g. http://127.0.0.1:8081; empty: none (the registry is served on the listeners)"),
    _p("ssl.keystore.type", str, "PEM", "format of ssl.keystore.location (PEM only)"),
    _p("ssl.keystore.location", str, "", "PEM file with this broker's certificate chain and private key (https listeners; its client certificate to other brokers)"),
    _p("ssl.key.password", str, "", "password of the private key in ssl.keystore.location, if encrypted", sensitive=True),
    _p("ssl.truststore.location", str, "", "PEM bundle of the CAs trusted for client certificates and for other brokers' certificates"),
    _p("ssl.client.authentication", str, "NONE", "client certificates on https listeners: NONE, REQUESTED or REQUIRED"),
    _p("ssl.principal.mapping.rules", str, "DEFAULT", "rules mapping a client certificate's subject to a principal name (Kafka's syntax)"),
    _p("authentication.method", str, "NONE", "NONE or BASIC (HTTP Basic against the stored users)"),
    _p("authentication.cache.ttl.ms", int, 300000, "how long a verified credential is remembered (changes to the user clear it at once)"),
    _p("authorizer.class.name", str, "", "AclAuthorizer (or kafka.security.authorizer.AclAuthorizer) to enforce ACLs; empty: no authorization"),
    _p("super.users", str, "", "principals allowed everything, e.g. User:admin;User:broker"),
    _p("allow.everyone.if.no.acl.found", bool, False, "allow an operation on a resource no ACL names"),
    _p("inter.broker.basic.auth.user.info", str, "", "USER:PASSWORD this broker sends to other brokers when authentication.method=BASIC", sensitive=True),
    _p("listeners.unauthenticated.allow", bool, False, "allow a listener on a non-loopback address without authentication"),
    _p("authentication.failures.max", int, 5, "failed HTTP Basic authentications of one principal within authentication.failures.window.ms after which its attempts are refused (429, Retry-After) for authentication.failures.lockout.ms without checking the password; 0: never"),
    _p("authentication.failures.address.max", int, 20, "failed HTTP Basic authentications from one client address within authentication.failures.window.ms after which its attempts are refused the same way; 0: never"),
    _p("authentication.failures.window.ms", int, 60000, "the window failed authentications are counted in"),
    _p("authentication.failures.lockout.ms", int, 60000, "how long a principal or address past its failure count is refused"),
    _p("authentication.failures.tracked.max", int, 10000, "principals, and separately client addresses, whose failures are remembered (the oldest is forgotten past it)"),
    _p("http.forwarded.trusted.addresses", str, "", "comma-separated IPs and CIDRs of reverse proxies whose forwarded headers name the client (ACL host, audit, access log, login throttle); empty: forwarded headers are never trusted"),
    _p("http.forwarded.header", str, "X-Forwarded-For", "the header the trusted proxies write: X-Forwarded-For (with X-Forwarded-Proto) or Forwarded (RFC 7239); the other is ignored"),
    # --- Kafka front door: Kafka's own protocol (docs/cli.md "Kafka listeners") ---
    _p("kafka.listeners", str, None, "comma-separated NAME://HOST:PORT listeners that speak Kafka's protocol; NAME is PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or a name of listener.security.protocol.map; default: PLAINTEXT://127.0.0.1:9092 for franz serve, none for franz broker; empty: the Kafka protocol off"),
    _p("kafka.advertised.listeners", str, "", "the NAME://HOST:PORT of kafka.listeners (some or all of their names) that Kafka clients are told in Metadata and /brokers/ids/<id> lists; empty: kafka.listeners, a wildcard host (empty, 0.0.0.0, ::) replaced by advertised.host, else this machine's canonical host name"),
    _p("listener.security.protocol.map", str, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "comma-separated NAME:PROTOCOL pairs: the security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) of each Kafka listener name; Kafka's"),
    _p("sasl.enabled.mechanisms", str, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms offered on SASL_PLAINTEXT and SASL_SSL Kafka listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, and OAUTHBEARER are not supported)"),
    _p("ssl.client.auth", str, "", "client certificates on SSL Kafka listeners: none, requested or required (Kafka's); empty: as ssl.client.authentication. SASL_SSL listeners ask for none, as Kafka's without a listener prefix"),
    _p("socket.request.max.bytes", int, 104857600, "largest Kafka request a connection may send (its size prefix); a larger one closes the connection; Kafka's"),
    _p("queued.max.request.bytes", int, 536870912, "bytes of Kafka requests being read or served at once, over every connection (a request waits for its share); Kafka's, whose default -1 is unbounded"),
    # --- HTTP front door (docs/http.md) ---
    _p("access.control.allow.origin", str, "", "CORS: comma-separated origins allowed to call the API from a browser (* any; a * inside an origin matches any text there); empty: CORS off; Confluent's"),
    _p("access.control.allow.methods", str, "", "CORS: comma-separated methods allowed to cross-origin callers; empty: GET,POST,HEAD; Confluent's"),
    _p("access.control.allow.headers", str, "", "CORS: comma-separated request headers allowed to cross-origin callers; empty: X-Requested-With,Content-Type,Accept,Origin; Confluent's"),
    _p("http.gzip.min.bytes", int, 0, "gzip an answer of at least this many bytes when the client sends Accept-Encoding: gzip; 0: never (off)"),
    _p("http.access.log", bool, False, "log one line per HTTP request (method, path, status, bytes, duration, principal) at INFO on the logger api.access_log"),
    _p("log.format", str, "text", "text: one line per log record; json: one JSON object per log record"),
)

_BY_NAME = {p.name: p for p in BROKER_PROPERTIES}

# Broker properties the log manager reads from the log defaults it is given, though
# the table declares them (typed, described); handed over as strings too.
STORAGE_PROPERTIES = frozenset({"log.segment.open.files.max", "producer.id.expiration.ms",
                                "producer.id.expiration.check.interval.ms",
                                "idempotency.producer.id.expiration.ms"})

# Broker properties that are topic defaults; handed to LogConfig as strings.
LOG_DEFAULT_PREFIXES = ("log.", "message.", "min.insync.replicas", "unclean.leader.election.enable",
                        "compression.type")


def _parse(defn: PropertyDef, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        if defn.type is bool:
            if raw.strip().lower() not in ("true", "false"):
                raise ValueError
            return raw.strip().lower() == "true"
        return defn.type(raw.strip())
    except ValueError as exc:
        raise InvalidConfigError(
            f"Invalid value {raw!r} for configuration {defn.name}: expected {defn.type.__name__}"
        ) from exc


@dataclass(frozen=True)
class BrokerConfig:
    """The settings one broker runs with. Attribute names follow the Kafka property names."""

    values: Mapping[str, Any]
    log_defaults: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | None = None) -> BrokerConfig:
        props = dict(props or {})
        values = {p.name: p.default for p in BROKER_PROPERTIES}
        log_defaults: dict[str, str] = {}
        for key, raw in props.items():
            if key in _BY_NAME:
                values[key] = _parse(_BY_NAME[key], raw)
                if key in STORAGE_PROPERTIES:
                    log_defaults[key] = str(values[key])
            elif key.startswith(LOG_DEFAULT_PREFIXES) and key != "log.dirs":
                log_defaults[key] = str(raw)
        return cls(values, log_defaults)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    @property
    def data_dir(self) -> Path:
        return Path(str(self.values["log.dirs"]).split(",")[0])


# --- the properties as v3 broker configs ------------------------------------------

_PROPERTY_TYPES = {bool: ConfigType.BOOLEAN, int: ConfigType.INT, str: ConfigType.STRING}


def _broker_entry(name: str, value: str | None, default: str | None, *, set_here: bool,
                  type_: ConfigType, doc: str) -> ConfigEntry:
    source = ConfigSource.STATIC_BROKER_CONFIG if set_here else ConfigSource.DEFAULT_CONFIG
    syns = [ConfigSynonym(name, value, source)] if set_here else []
    syns.append(ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG))
    return ConfigEntry(name, value, source, not set_here, True, False, tuple(syns), type_, doc)


def _hidden(entry: ConfigEntry) -> ConfigEntry:
    """A sensitive property, described as Kafka describes one: no value, is_sensitive."""
    synonyms = tuple(ConfigSynonym(s.name, None, s.source) for s in entry.synonyms)
    return dataclasses.replace(entry, value=None, is_sensitive=True, synonyms=synonyms)


def broker_config_entries(config: BrokerConfig) -> list[ConfigEntry]:
    """The broker property table, then the log properties that default topic keys
    (``log.retention.hours``, ``message.max.bytes``, ...), then any other log property
    set; STATIC_BROKER_CONFIG when set (or, for the table, differing from the default)."""
    def text(v: object) -> str | None:
        if v is None:  # no default of its own (kafka.listeners: the command's)
            return None
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    entries: dict[str, ConfigEntry] = {}
    for prop in BROKER_PROPERTIES:
        value = config[prop.name]
        entry = _broker_entry(
            prop.name, text(value), text(prop.default), set_here=value != prop.default,
            type_=_PROPERTY_TYPES.get(prop.type, ConfigType.STRING), doc=prop.doc)
        if prop.sensitive:
            entry = _hidden(entry)
        entries[prop.name] = entry
    log_defaults = config.log_defaults
    for key in TOPIC_CONFIG_DEFS:
        for syn in server_synonyms(key.name):
            raw = log_defaults.get(syn.name)
            entries.setdefault(syn.name, _broker_entry(
                syn.name, raw if raw is not None else syn.default, syn.default,
                set_here=raw is not None, type_=key.type,
                doc=f"Broker default of the topic config {key.name}."))
    for name, raw in log_defaults.items():
        entries.setdefault(name, _broker_entry(name, raw, None, set_here=True,
                                               type_=ConfigType.STRING, doc="Log property."))
    return [entries[name] for name in sorted(entries)]
