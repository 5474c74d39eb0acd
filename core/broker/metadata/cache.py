"""This broker's in-memory view of the cluster metadata, refreshed from the store on
change notifications. The produce and fetch paths read it; they never query the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.broker.errors import UnknownPartitionError, UnknownTopicError
from core.broker.metadata.store import BrokerRegistration, PartitionState, TopicAssignment
from core.broker.types import TopicPartition
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
    # topic id (as the store holds it: URL-safe base64 of 16 bytes) -> name, kept by
    # put_topic / remove_topic: Kafka's Fetch v13+ names topics by id
    names_by_id: dict[str, str] = field(default_factory=dict)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_name_of(self, topic_id: str) -> str | None:
        """The name of the topic whose id is ``topic_id`` now; None when no topic has
        it (never created, deleted, or the name recreated with another id)."""
        name = self.names_by_id.get(topic_id) if topic_id else None
        meta = None if name is None else self.topics.get(name)
        return name if meta is not None and meta.assignment.topic_id == topic_id else None

    def existing_topic(self, name: str) -> TopicMetadata:
        """The topic's metadata; UnknownTopicError when there is no such topic."""
        meta = self.topics.get(name)
        if meta is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        return meta

    def existing_partition(self, topic: str, partition: int) -> TopicPartition:
        """``TopicPartition`` of an existing partition (UnknownTopic/PartitionError)."""
        if partition not in self.existing_topic(topic).assignment.partitions:
            raise UnknownPartitionError(f"Partition {partition} of topic '{topic}' not found.")
        return TopicPartition(topic, partition)

    def replicas_per_broker(self) -> dict[int, int]:
        """Partition replicas each broker hosts, over every known topic."""
        hosted: dict[int, int] = {}
        for meta in self.topics.values():
            for replicas in meta.assignment.partitions.values():
                for broker in replicas:
                    hosted[broker] = hosted.get(broker, 0) + 1
        return hosted

    def put_topic(self, name: str, meta: TopicMetadata) -> None:
        self._forget_id(self.topics.get(name), name)
        self.topics[name] = meta
        if meta.assignment.topic_id:
            self.names_by_id[meta.assignment.topic_id] = name

    def remove_topic(self, name: str) -> None:
        self._forget_id(self.topics.pop(name, None), name)

    def _forget_id(self, old: TopicMetadata | None, name: str) -> None:
        if old is not None and self.names_by_id.get(old.assignment.topic_id) == name:
            del self.names_by_id[old.assignment.topic_id]

    def set_brokers(self, regs: Mapping[int, BrokerRegistration]) -> None:
        self.brokers = dict(regs)

    def is_live(self, broker_id: int) -> bool:
        """``broker_id`` is registered (its session is alive)."""
        return broker_id in self.brokers

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        """Host and port of a live broker, None for one not registered."""
        reg = self.brokers.get(broker_id)
        return None if reg is None else (reg.host, reg.port)

    def kafka_endpoints_of(self, listener: str) -> list[tuple[int, str, int, str | None]]:
        """(broker id, host, port, rack) of every live broker with a Kafka listener named
        ``listener``, by broker id: what a Metadata request that came in on that listener
        answers (Kafka leaves out the brokers without one)."""
        found = []
        for broker_id in sorted(self.brokers):
            reg = self.brokers[broker_id]
            endpoint = reg.kafka_endpoint(listener)
            if endpoint is not None:
                found.append((broker_id, endpoint.host, endpoint.port, reg.rack))
        return found

    def leader_of(self, topic: str, partition: int) -> int:
        """The leader the metadata names for a partition; -1 when none or unknown."""
        meta = self.topics.get(topic)
        state = None if meta is None else meta.states.get(partition)
        return -1 if state is None else state.leader
