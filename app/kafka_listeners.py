"""The Kafka listeners a broker serves (``kafka.listeners=PLAINTEXT://127.0.0.1:9092``),
the endpoints it advertises for them, and the conditions they start under: franz's
second front door, Kafka's own protocol, beside the HTTP listeners of ``app.listeners``.

``kafka.listeners`` is Kafka's ``listeners`` syntax: a comma list of
``NAME://HOST:PORT``. ``NAME`` (case-insensitive, kept upper case) is a security protocol
(``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``) or a name of the operator's
that ``listener.security.protocol.map`` maps to one (Kafka's default map maps each
protocol to itself; a map that is set replaces it, as in Kafka). The host may be empty
(every interface), an address, a name, or an IPv6 address in brackets. Unset, it is
``PLAINTEXT://127.0.0.1:9092`` for ``franz serve`` and nothing for ``franz broker``
(brokers of a cluster are often several per machine, as in tests/cluster, and what
Kafka clients are told must be each broker's own address: the operator names it); set
empty, the Kafka protocol is off. ``HTTP`` and ``HTTPS`` are not Kafka listener names:
``/brokers/ids/<id>`` lists franz's HTTP endpoint under them
(``core.broker.metadata.zk.paths.BrokerIdZNode``).

``kafka.advertised.listeners`` is what Kafka clients are told (Metadata) and what the
broker registers (``BrokerRegistration.kafka_endpoints``): the same syntax, some or all of
the listeners' names. Empty: the listeners themselves, a wildcard host (empty,
``0.0.0.0``, ``::``) replaced by ``advertised.host`` when set, else by this machine's
canonical host name (Kafka's ``InetAddress.getLocalHost.getCanonicalHostName``); a
loopback host stays as it is. An advertised ``0.0.0.0`` or ``::`` is refused (Kafka:
"cannot use the nonroutable meta-address").

``open_kafka_door(config, http_listeners)`` runs every check and binds the sockets, before
the data directory is touched, as ``app.listeners.bind_listener`` does for HTTP:

- a listener's port may not be one an HTTP listener uses (same rule as two HTTP listeners);
- ``check_kafka_exposure``: a listener other hosts can reach must authenticate its clients
  (``SASL_PLAINTEXT`` / ``SASL_SSL``, or ``SSL`` with ``ssl.client.auth=required``) unless
  ``listeners.unauthenticated.allow=true``; HTTP Basic (``authentication.method``) does
  not count, a PLAINTEXT Kafka connection has no credentials;
- TLS (``SSL``, ``SASL_SSL``): the https listeners' ``ssl.keystore.*`` and
  ``ssl.truststore.location`` (``app.tls``); client certificates on ``SSL`` listeners
  per ``ssl.client.auth`` (Kafka's ``none``/``requested``/``required``; empty: as
  ``ssl.client.authentication``); ``SASL_SSL`` listeners ask for none (Kafka's rule for a
  ``ssl.client.auth`` without a listener prefix, KIP-684);
- ``sasl.enabled.mechanisms``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (franz has no GSSAPI,
  Kafka's default, nor OAUTHBEARER), at least one when a SASL listener is configured;
- limits (``kafka_limits_of``): ``queued.max.request.bytes`` (512 MiB: the bytes of
  requests held at once), ``socket.request.max.bytes`` (Kafka's, 100 MiB),
  ``connections.max.idle.ms`` and ``max.connections`` per listener, as for HTTP.

Every refusal is a ``ListenerConfigError`` naming the property.
"""

from __future__ import annotations

import logging
import re
import socket
import ssl
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.listeners import (
    Listener,
    ListenerConfigError,
    bind_listener,
    is_loopback,
)
from app.tls import server_context
from core.broker.admin.broker_config import BrokerConfig
from core.broker.metadata.store import Endpoint
from core.broker.security.sasl import SASL_MECHANISMS

if TYPE_CHECKING:
    from api.kafka.context import ListenerInfo
    from api.kafka.server import Limits

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: ``kafka.listeners`` of ``franz serve`` when unset (``franz broker``: none).
STANDALONE_DEFAULT = "PLAINTEXT://127.0.0.1:9092"
#: Names of franz's HTTP endpoint in ``/brokers/ids/<id>``: no Kafka listener's.
RESERVED_NAMES = ("HTTP", "HTTPS")
CLIENT_AUTH = ("NONE", "REQUESTED", "REQUIRED")
_NAME = re.compile(r"[A-Z0-9_-]+")
_WILDCARD = frozenset({"", "0.0.0.0", "::"})
_UNROUTABLE = frozenset({"0.0.0.0", "::"})


@dataclass(frozen=True, slots=True)
class KafkaListener:
    name: str  # upper case: PLAINTEXT, SASL_SSL, or the operator's own
    security_protocol: str  # one of SECURITY_PROTOCOLS
    host: str  # "" binds every interface
    port: int

    @property
    def is_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def is_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def endpoint(self) -> Endpoint:
        """As registered (``BrokerRegistration.kafka_endpoints``)."""
        return Endpoint(self.name, self.host, self.port, self.security_protocol)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


# --- parsing --------------------------------------------------------------------------------


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs, comma-separated (empty
    entries ignored); ValueError naming the bad pair: no colon, a bad name, an unknown
    protocol, a name given twice."""
    found: dict[str, str] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, colon, protocol = (part.strip().upper() for part in entry.partition(":"))
        if not colon or not name or not protocol:
            raise ValueError(f"{entry.strip()!r} is not NAME:PROTOCOL")
        _check_name(name, entry.strip())
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"{entry.strip()!r}: unknown security protocol {protocol!r} "
                             f"({', '.join(SECURITY_PROTOCOLS)})")
        if name in found:
            raise ValueError(f"{name} is mapped twice")
        found[name] = protocol
    return found


def _check_name(name: str, entry: str) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(f"{entry!r}: bad listener name {name!r} (letters, digits, _ and -)")
    if name in RESERVED_NAMES:
        raise ValueError(f"{entry!r}: {name} is the name of franz's HTTP endpoint in "
                         "/brokers/ids/<id>; give the Kafka listener another name")


def parse_kafka_listener(entry: str, protocols: Mapping[str, str] | None = None) -> KafkaListener:
    """One ``NAME://HOST:PORT``; ValueError naming the entry otherwise. Without
    ``protocols`` (a syntax check) a name outside Kafka's default map gets the security
    protocol ``""``."""
    text = entry.strip()
    name, sep, host_port = text.partition("://")
    name = name.strip().upper()
    if not sep or not name:
        raise ValueError(f"listener {text!r} is not NAME://HOST:PORT")
    _check_name(name, text)
    if protocols is None:
        protocol = name if name in SECURITY_PROTOCOLS else ""
    else:
        protocol = protocols.get(name, "")
        if not protocol:
            raise ValueError(
                f"listener {text!r}: {name} has no security protocol: name it "
                f"{', '.join(SECURITY_PROTOCOLS)}, or map it in listener.security.protocol.map "
                f"(now {','.join(f'{k}:{v}' for k, v in protocols.items()) or 'empty'})")
    if host_port.startswith("["):
        host, bracket, rest = host_port[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise ValueError(f"listener {text!r}: an IPv6 host is written [ADDRESS]:PORT")
        port_text = rest[1:]
        if ":" not in host:
            raise ValueError(f"listener {text!r}: {host!r} is not an IPv6 address")
    else:
        host, colon, port_text = host_port.rpartition(":")
        if not colon or ":" in host:
            raise ValueError(f"listener {text!r} is not NAME://HOST:PORT "
                             "(an IPv6 host goes in brackets)")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"listener {text!r}: bad port {port_text!r} (1 to 65535)")
    if any(c.isspace() or c in "/?#@[]," for c in host):
        raise ValueError(f"listener {text!r}: bad host {host!r}")
    return KafkaListener(name, protocol, host, int(port_text))


def parse_kafka_listeners(text: str, protocols: Mapping[str, str] | None = None, *,
                          one_per_port: bool = True) -> list[KafkaListener]:
    """The listeners of ``text`` (empty entries ignored); ValueError naming the bad entry:
    malformed, a name without a security protocol (given ``protocols``), a name twice, a
    port twice (with ``one_per_port``; advertised listeners may share one)."""
    found: list[KafkaListener] = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        listener = parse_kafka_listener(entry, protocols)
        for other in found:
            if other.name == listener.name:
                raise ValueError(f"listener {listener} has the name of {other} (one listener "
                                 "per name)")
            if one_per_port and _same_socket(other, listener):
                raise ValueError(f"listener {listener} duplicates {other} (one listener "
                                 "per port)")
        found.append(listener)
    return found


def _same_socket(a: KafkaListener | Listener, b: KafkaListener | Listener) -> bool:
    return a.port == b.port and (a.host == b.host or bool(_WILDCARD & {a.host, b.host}))


def check_listeners_text(text: str) -> None:
    """``kafka.listeners`` / ``kafka.advertised.listeners`` syntax, for ``app.settings``
    (the names' protocols are checked at start, with the map)."""
    parse_kafka_listeners(text, one_per_port=False)


def check_sasl_mechanisms(text: str) -> None:
    """``sasl.enabled.mechanisms``, for ``app.settings``."""
    _mechanisms(text)


def check_client_auth(text: str) -> None:
    """``ssl.client.auth``, for ``app.settings``."""
    _client_auth(text)


# --- from the configuration -------------------------------------------------------------


def protocol_map_of(config: BrokerConfig) -> dict[str, str]:
    try:
        return parse_protocol_map(str(config["listener.security.protocol.map"] or ""))
    except ValueError as exc:
        raise ListenerConfigError(f"listener.security.protocol.map: {exc}") from None


def kafka_listeners_of(config: BrokerConfig, http: Sequence[Listener] = ()) -> list[KafkaListener]:
    """The Kafka listeners to serve (module docstring: the default per command, empty:
    none). ``http``: the HTTP listeners (``listeners_of`` and ``registry_listeners_of``),
    whose ports a Kafka listener may not take. ListenerConfigError naming the property."""
    raw = config["kafka.listeners"]
    if raw is None:  # unset: the command's default
        raw = "" if config["zookeeper.connect"] else STANDALONE_DEFAULT
    protocols = protocol_map_of(config)
    try:
        listeners = parse_kafka_listeners(str(raw), protocols)
    except ValueError as exc:
        raise ListenerConfigError(f"kafka.listeners: {exc}") from None
    for listener in listeners:
        for other in http:
            if _same_socket(listener, other):
                raise ListenerConfigError(
                    f"kafka.listeners: listener {listener} takes the port of the HTTP "
                    f"listener {other} (listeners, schema.registry.listeners or --port); "
                    "give it another port")
    return listeners


def kafka_advertised_of(config: BrokerConfig,
                        listeners: Sequence[KafkaListener]) -> list[KafkaListener]:
    """What this broker advertises (module docstring), in the order of
    ``kafka.advertised.listeners`` (else of the listeners). ListenerConfigError naming
    the property: a name that is not one of the listeners', a name twice, an
    unroutable host."""
    text = str(config["kafka.advertised.listeners"] or "")
    if not text.strip():
        return [_routable(config, lsn) for lsn in listeners]
    try:
        found = parse_kafka_listeners(text, protocol_map_of(config), one_per_port=False)
    except ValueError as exc:
        raise ListenerConfigError(f"kafka.advertised.listeners: {exc}") from None
    names = {lsn.name for lsn in listeners}
    for lsn in found:
        if lsn.name not in names:
            raise ListenerConfigError(
                f"kafka.advertised.listeners: {lsn} names no listener of kafka.listeners "
                f"({', '.join(sorted(names)) or 'none: the Kafka protocol is off'}); "
                "advertised names are some or all of the listeners'")
        if lsn.host in _UNROUTABLE:
            raise ListenerConfigError(
                f"kafka.advertised.listeners: {lsn} cannot use the nonroutable "
                f"meta-address {lsn.host}: advertise an address or name clients can reach")
    return [_routable(config, lsn) for lsn in found]


def _routable(config: BrokerConfig, listener: KafkaListener) -> KafkaListener:
    if listener.host not in _WILDCARD:
        return listener
    host = str(config["advertised.host"] or "").strip() or socket.getfqdn()
    return KafkaListener(listener.name, listener.security_protocol, host, listener.port)


def advertised_endpoints(config: BrokerConfig,
                         http: Sequence[Listener] = ()) -> tuple[Endpoint, ...]:
    """The endpoints this broker registers (``BrokerRegistration.kafka_endpoints``)."""
    return tuple(lsn.endpoint()
                 for lsn in kafka_advertised_of(config, kafka_listeners_of(config, http)))


def _mechanisms(text: str) -> tuple[str, ...]:
    found: list[str] = []
    for entry in text.split(","):
        name = entry.strip().upper()
        if not name:
            continue
        if name not in SASL_MECHANISMS:
            hint = " (franz has no Kerberos)" if name == "GSSAPI" else ""
            raise ValueError(f"unknown SASL mechanism {entry.strip()!r}{hint}: franz offers "
                             f"{', '.join(SASL_MECHANISMS)}")
        if name not in found:
            found.append(name)
    return tuple(found)


def sasl_mechanisms_of(config: BrokerConfig,
                       listeners: Sequence[KafkaListener] = ()) -> tuple[str, ...]:
    """``sasl.enabled.mechanisms``, upper case, in its order; ListenerConfigError for an
    unknown one, or none while a SASL listener is configured."""
    try:
        found = _mechanisms(str(config["sasl.enabled.mechanisms"] or ""))
    except ValueError as exc:
        raise ListenerConfigError(f"sasl.enabled.mechanisms: {exc}") from None
    sasl = next((lsn for lsn in listeners if lsn.is_sasl), None)
    if sasl is not None and not found:
        raise ListenerConfigError(f"sasl.enabled.mechanisms is empty: the listener {sasl} of "
                                  "kafka.listeners needs one (PLAIN, SCRAM-SHA-256, "
                                  "SCRAM-SHA-512)")
    return found


def _client_auth(text: str) -> str:
    value = text.strip().upper()
    if value not in CLIENT_AUTH:
        raise ValueError(f"{text!r} is not one of none, requested, required")
    return value


def client_auth_of(config: BrokerConfig) -> str:
    """NONE, REQUESTED or REQUIRED: client certificates on SSL Kafka listeners
    (``ssl.client.auth``; empty: ``ssl.client.authentication``)."""
    raw = str(config["ssl.client.auth"] or "").strip()
    name = "ssl.client.auth" if raw else "ssl.client.authentication"
    try:
        return _client_auth(raw or str(config["ssl.client.authentication"] or ""))
    except ValueError as exc:
        raise ListenerConfigError(f"{name}: {exc}") from None


def check_kafka_exposure(listeners: Sequence[KafkaListener], config: BrokerConfig) -> None:
    """ListenerConfigError for the first listener other hosts can reach without
    authentication, unless ``listeners.unauthenticated.allow=true``; a warning for a
    SASL_PLAINTEXT one offering PLAIN (passwords in the clear)."""
    allow = bool(config["listeners.unauthenticated.allow"])
    for listener in listeners:
        if is_loopback(listener.host):
            continue
        if listener.security_protocol == "SASL_PLAINTEXT" and "PLAIN" in sasl_mechanisms_of(config):
            log.warning("kafka.listeners: %s accepts SASL PLAIN from other hosts without TLS: "
                        "passwords cross the network in the clear (SASL_SSL, or "
                        "sasl.enabled.mechanisms without PLAIN, avoids it)", listener)
        if allow or listener.is_sasl:
            continue
        if listener.security_protocol == "SSL" and client_auth_of(config) == "REQUIRED":
            continue
        raise ListenerConfigError(
            f"kafka.listeners: listener {listener} accepts connections from other hosts "
            "without authentication: use a SASL_PLAINTEXT or SASL_SSL listener (or SSL with "
            "ssl.client.auth=required), bind it to 127.0.0.1, or set "
            "listeners.unauthenticated.allow=true to allow it")


def kafka_tls_contexts(config: BrokerConfig,
                       listeners: Sequence[KafkaListener]) -> list[ssl.SSLContext | None]:
    """One server context per listener (None for PLAINTEXT and SASL_PLAINTEXT): SSL
    listeners share one asking for client certificates per ``client_auth_of``, SASL_SSL
    listeners one asking for none."""
    contexts: dict[str, ssl.SSLContext] = {}
    out: list[ssl.SSLContext | None] = []
    for lsn in listeners:
        if not lsn.is_tls:
            out.append(None)
            continue
        if lsn.security_protocol not in contexts:
            sasl = lsn.is_sasl
            raw = str(config["ssl.client.auth"] or "").strip()
            contexts[lsn.security_protocol] = server_context(
                config, client_auth="NONE" if sasl else client_auth_of(config),
                setting="ssl.client.auth" if raw else "ssl.client.authentication",
                what=f"the {lsn.security_protocol} listener {lsn} of kafka.listeners")
        out.append(contexts[lsn.security_protocol])
    return out


def kafka_limits_of(config: BrokerConfig, *, max_connections: int | None = None) -> Limits:
    """The Kafka server's limits: ``socket.request.max.bytes``,
    ``connections.max.idle.ms``, ``max.connections`` per listener (``max_connections``:
    that value as the open-files limit lowered it, ``app.server._connection_settings``)."""
    from api.kafka.server import Limits  # noqa: PLC0415  (the codec loads with it; not for app.settings)

    values = {name: int(config[name]) for name in
              ("socket.request.max.bytes", "connections.max.idle.ms", "max.connections",
               "queued.max.request.bytes")}
    for name, value in values.items():
        if value < 1:
            raise ListenerConfigError(f"{name}={value} must be at least 1")
    return Limits(max_request_bytes=values["socket.request.max.bytes"],
                  idle_ms=values["connections.max.idle.ms"],
                  queued_request_bytes=values["queued.max.request.bytes"],
                  max_connections=max_connections or values["max.connections"])


# --- the door: checked, bound -------------------------------------------------------------


@dataclass
class KafkaDoor:
    """The Kafka listeners, checked and bound (``open_kafka_door``). ``listeners``,
    ``advertised``, ``sockets`` and ``tls`` are aligned: the i-th listener's advertised
    endpoint (None when ``kafka.advertised.listeners`` leaves its name out), its bound,
    not yet listening sockets (one per address its host resolves to), its SSL context."""

    listeners: list[KafkaListener]
    advertised: list[KafkaListener | None]
    sockets: list[list[socket.socket]]
    tls: list[ssl.SSLContext | None]
    mechanisms: tuple[str, ...]  # sasl.enabled.mechanisms
    endpoints: tuple[Endpoint, ...] = field(default=())  # registered, in advertised order

    def __bool__(self) -> bool:
        return bool(self.listeners)

    def listener_infos(self) -> Iterator[tuple[socket.socket, ListenerInfo, ssl.SSLContext | None]]:
        """(socket, what the server knows of its listener, SSL context or None) for each
        bound socket: ``KafkaServer.start(sock, info, ssl_context=tls)``. A listener not
        advertised answers with its own host and port."""
        from api.kafka.context import ListenerInfo  # noqa: PLC0415

        for lsn, adv, socks, tls in zip(self.listeners, self.advertised, self.sockets,
                                        self.tls, strict=True):
            shown = adv or lsn
            info = ListenerInfo(lsn.name, lsn.security_protocol, shown.host, shown.port)
            for sock in socks:
                yield sock, info, tls

    def close(self) -> None:
        """Close every socket (a start that fails after binding them)."""
        for sock in (s for socks in self.sockets for s in socks):
            sock.close()


def bind_kafka_listeners(listeners: Sequence[KafkaListener]) -> list[list[socket.socket]]:
    """Each listener's sockets, bound and not yet listening; ListenerConfigError naming
    the listener (and ``kafka.listeners``) when one cannot be bound, none left open."""
    bound: list[list[socket.socket]] = []
    try:
        for lsn in listeners:
            bound.append(bind_listener(lsn, setting="kafka.listeners"))
    except ListenerConfigError as exc:
        for sock in (s for socks in bound for s in socks):
            sock.close()
        raise ListenerConfigError(f"kafka.listeners: {exc}") from None
    return bound


def open_kafka_door(config: BrokerConfig, http: Sequence[Listener] = ()) -> KafkaDoor:
    """Every check of the Kafka listeners (module docstring), then their sockets bound:
    call it with the HTTP listeners before the broker is built, so a bad setting or a
    port in use stops the start before the data directory is touched. An empty door
    (no listeners) when the Kafka protocol is off."""
    listeners = kafka_listeners_of(config, http)
    advertised = kafka_advertised_of(config, listeners)
    mechanisms = sasl_mechanisms_of(config, listeners)
    check_kafka_exposure(listeners, config)
    tls = kafka_tls_contexts(config, listeners)
    by_name = {lsn.name: lsn for lsn in advertised}
    sockets = bind_kafka_listeners(listeners)
    return KafkaDoor(listeners, [by_name.get(lsn.name) for lsn in listeners], sockets, tls,
                     mechanisms, tuple(lsn.endpoint() for lsn in advertised))
