"""This broker's in-memory view of the cluster metadata, refreshed from the store on
change notifications. The produce and fetch paths read it; they never query the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.broker.metadata.store import BrokerRegistration, PartitionState, TopicAssignment
from core.storage.config import LogConfig


@dataclass(slots=True)
class TopicMetadata:
    assignment: TopicAssignment
    states: dict[int, PartitionState]
    configs: dict[str, str]
    log_config: LogConfig

    @property
    def num_partitions(self) -> int:
        return len(self.assignment.partitions)


@dataclass(slots=True)
class MetadataCache:
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controller_id: int | None = None

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def put_topic(self, name: str, meta: TopicMetadata) -> None:
        self.topics[name] = meta

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)

    def set_brokers(self, regs: Mapping[int, BrokerRegistration]) -> None:
        self.brokers = dict(regs)
