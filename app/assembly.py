"""Wiring: which implementation behind each interface, for a given configuration."""

from __future__ import annotations

from core.broker.broker import Broker
from core.broker.config import BrokerConfig
from core.broker.embedded_store import EmbeddedMetadataStore
from core.clock import SYSTEM_CLOCK, Clock


def build_broker(config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK) -> Broker:
    """Standalone: the embedded SQLite metadata store in the data dir."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{(config.data_dir / 'metadata.db').resolve()}"
    return Broker(config, EmbeddedMetadataStore(url, clock=clock), clock=clock)
