"""Wiring: which implementation behind each interface, for a given configuration.

The one difference between standalone and cluster (design.md section 1) is the metadata
store: ``zookeeper.connect`` set -> ``ZkMetadataStore`` (Kafka's znode layout; brokers
learn leadership changes from its watches), else the embedded SQLite store in the data
dir. Everything else, including the HTTP client to other brokers, is the same; the
broker's own parts are wired in ``core.broker.assembly``.

Kafka endpoints: the broker registers the Kafka listeners it advertises
(``app.kafka_listeners``: ``kafka.advertised.listeners``, else ``kafka.listeners``) beside
its HTTP address (``BrokerRegistration.kafka_endpoints``); Kafka clients learn them from
Metadata answers, tools from ``/brokers/ids/<id>``.

Calls to other brokers (``inter_broker_client``): a broker registers the scheme of its
first listener with its address (``BrokerRegistration.scheme``, the ZooKeeper store
stamps it: ``listener_scheme``), and the cluster client opens a TLS connection to an
address whose registration says https (``RegisteredSchemes``, read from this broker's
metadata cache when a connection opens). So brokers with http and https first
listeners can share a cluster, and a broker moved to https is called over TLS as soon
as it registers again. TLS connections use ``app.tls.client_context`` (the truststore
checks the other broker, the keystore is this broker's client certificate); with
``authentication.method=BASIC`` every call carries ``inter.broker.basic.auth.user.info``.
"""

from __future__ import annotations

import base64
import logging
import ssl

from app.kafka_listeners import advertised_endpoints
from app.listeners import (
    AUTHENTICATION_METHODS,
    ListenerConfigError,
    choice,
    listeners_of,
    registry_listeners_of,
)
from app.tls import client_context
from core.broker.admin.broker_config import BrokerConfig
from core.broker.assembly import open_broker
from core.broker.broker import Broker
from core.broker.cluster.client import HttpClusterClient
from core.broker.metadata.cache import MetadataCache
from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.metadata.store import Endpoint, MetadataStore
from core.broker.security.sql_store import SqlSecurityStore
from core.broker.security.store import SecurityStore
from core.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

Address = tuple[str, int]


def build_store(config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK) -> MetadataStore:
    connect = str(config["zookeeper.connect"] or "")
    if connect:
        from core.broker.metadata.zk.store import ZkMetadataStore  # noqa: PLC0415  (kazoo only in clusters)

        return ZkMetadataStore(connect, clock=clock,
                               session_timeout_s=config["zookeeper.session.timeout.ms"] / 1000,
                               listener_scheme=listeners_of(config)[0].scheme)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{(config.data_dir / 'metadata.db').resolve()}"
    return EmbeddedMetadataStore(url, clock=clock)


def build_security_store(config: BrokerConfig) -> SecurityStore:
    """Users and ACLs: beside the metadata, in ZooKeeper (Kafka's znodes) or in the
    data dir's SQL catalog."""
    connect = str(config["zookeeper.connect"] or "")
    if connect:
        from core.broker.security.zk_store import ZkSecurityStore  # noqa: PLC0415  (kazoo only in clusters)

        return ZkSecurityStore(connect,
                               session_timeout_s=config["zookeeper.session.timeout.ms"] / 1000)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    return SqlSecurityStore(f"sqlite:///{(config.data_dir / 'metadata.db').resolve()}")


async def build_broker(config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK,
                       kafka_endpoints: tuple[Endpoint, ...] | None = None) -> Broker:
    """A broker over ``config`` with its logs loaded, not started yet. It registers
    ``kafka_endpoints`` (``KafkaDoor.endpoints``) as its Kafka listeners; None: those
    ``kafka.advertised.listeners`` gives (``app.kafka_listeners``)."""
    if kafka_endpoints is None:  # checked before anything is opened
        http = listeners_of(config)
        kafka_endpoints = advertised_endpoints(config, [*http, *registry_listeners_of(config, http)])
    config.data_dir.mkdir(parents=True, exist_ok=True)
    schemes = RegisteredSchemes(default=listeners_of(config)[0].scheme)
    client = inter_broker_client(config, schemes)
    broker = await open_broker(config, build_store(config, clock=clock), clock=clock,
                               cluster_client=client,
                               security_store=build_security_store(config))
    schemes.cache = broker.cache  # before start(): no call to another broker yet
    broker.kafka_endpoints = kafka_endpoints  # registered by start()
    return broker


class RegisteredSchemes:
    """``scheme_of(address)`` of the cluster client: the scheme the broker registered with
    that address, from this broker's metadata cache (``cache``, set once the broker is
    assembled: the client is built before it); ``default`` for an address no
    registration names. Asked only when a connection opens."""

    def __init__(self, *, default: str) -> None:
        self.default = default
        self.cache: MetadataCache | None = None

    def __call__(self, address: Address) -> str:
        if self.cache is not None:
            for reg in self.cache.brokers.values():
                if (reg.host, reg.port) == address:
                    return reg.scheme
        return self.default


def inter_broker_client(config: BrokerConfig, schemes: RegisteredSchemes) -> HttpClusterClient:
    """The cluster client, with TLS and credentials as the module docstring says."""
    tls: ssl.SSLContext | None = None
    if (any(lsn.is_tls for lsn in listeners_of(config)) or config["ssl.truststore.location"]
            or config["ssl.keystore.location"]):
        tls = client_context(config)  # else, if ever needed: the system's CAs
    return HttpClusterClient(timeout_s=config["replica.socket.timeout.ms"] / 1000,
                             ssl_context=tls, scheme_of=schemes,
                             headers=_credentials(config))


def _credentials(config: BrokerConfig) -> dict[str, str]:
    if choice(config, "authentication.method", AUTHENTICATION_METHODS) != "BASIC":
        return {}
    info = str(config["inter.broker.basic.auth.user.info"] or "")
    if not info:
        if config["zookeeper.connect"]:
            log.warning("authentication.method=BASIC without inter.broker.basic.auth.user.info: "
                        "calls to other brokers carry no credentials (only this broker's "
                        "client certificate, if they ask for one, can authenticate them)")
        return {}
    user, sep, password = info.partition(":")
    if not sep or not user:
        raise ListenerConfigError("inter.broker.basic.auth.user.info must be USER:PASSWORD")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return {"Authorization": f"Basic {token}"}
