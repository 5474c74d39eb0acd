"""Wiring: which implementation behind each interface, for a given configuration.

The one difference between standalone and cluster (design.md section 1) is the metadata
store: ``zookeeper.connect`` set -> ``ZkMetadataStore`` (Kafka's znode layout; brokers
learn leadership changes from its watches), else the embedded SQLite store in the data
dir. Everything else, including the HTTP client to other brokers, is the same; the
broker's own parts are wired in ``core.broker.assembly``.
"""

from __future__ import annotations

from core.broker.admin.broker_config import BrokerConfig
from core.broker.assembly import open_broker
from core.broker.broker import Broker
from core.broker.cluster.client import HttpClusterClient
from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.metadata.store import MetadataStore
from core.clock import SYSTEM_CLOCK, Clock


def build_store(config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK) -> MetadataStore:
    connect = str(config["zookeeper.connect"] or "")
    if connect:
        from core.broker.metadata.zk.store import ZkMetadataStore  # noqa: PLC0415  (kazoo only in clusters)

        return ZkMetadataStore(connect, clock=clock,
                               session_timeout_s=config["zookeeper.session.timeout.ms"] / 1000)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{(config.data_dir / 'metadata.db').resolve()}"
    return EmbeddedMetadataStore(url, clock=clock)


async def build_broker(config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK) -> Broker:
    """A broker over ``config`` with its logs loaded, not started yet."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    client = HttpClusterClient(timeout_s=config["replica.socket.timeout.ms"] / 1000)
    return await open_broker(config, build_store(config, clock=clock), clock=clock,
                             cluster_client=client)
