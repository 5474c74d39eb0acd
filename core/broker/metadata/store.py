"""The metadata store interface: what the broker and controller need from cluster
coordination, with two backends behind it (``embedded_store`` on SQLite for
standalone, ``zk_store`` on ZooKeeper for a cluster).

Shapes follow Kafka's ZooKeeper layout: a topic's replica assignment
(``/brokers/topics/<t>``), one versioned state per partition
(``/brokers/topics/<t>/partitions/<p>/state``: leader, leader_epoch, isr,
controller_epoch; ``version`` is the zkVersion used for conditional writes), topic
config overrides (``/config/topics/<t>``), ephemeral broker registrations
(``/brokers/ids/<id>``) and the controller election (``/controller``,
``/controller_epoch``). Changes are announced to subscribed listeners.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from core.errors import FranzError


class BadVersionError(FranzError):
    """A conditional update lost a race: the stored version is not the expected one."""


class MetadataStoreError(FranzError):
    """The metadata backend failed: the database (locked past the busy timeout, I/O error,
    bad schema) or ZooKeeper (connection loss, session expiry, timeout, malformed znode).
    Raised by both stores, so callers handle one class for both backends."""

    retriable = True


class BrokerIdInUseError(FranzError):
    """Another live broker holds this broker id's registration."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One Kafka listener a broker advertises to Kafka clients (``kafka.advertised.listeners``;
    ``endpoints`` and ``listener_security_protocol_map`` of ``/brokers/ids/<id>``)."""

    listener: str  # its name, upper case: PLAINTEXT, SASL_SSL or the operator's own
    host: str
    port: int
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker: ``host``/``port``/``scheme`` are its first HTTP listener, the one
    other brokers call; ``kafka_endpoints`` are the Kafka listeners it advertises (none
    when its Kafka door is off, or for a registration written before franz had one)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    timestamp_ms: int = 0
    epoch: int = 0  # broker epoch (czxid in ZooKeeper); set by the store
    scheme: str = "http"  # of its first listener: how other brokers call it ("https": TLS)
    kafka_endpoints: tuple[Endpoint, ...] = ()

    def kafka_endpoint(self, listener: str) -> Endpoint | None:
        """Its endpoint on the Kafka listener of that name, None without one."""
        name = listener.upper()
        return next((e for e in self.kafka_endpoints if e.listener == name), None)


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    name: str
    topic_id: str
    partitions: Mapping[int, tuple[int, ...]]  # partition -> replicas (first = preferred leader)
    # A reassignment in progress (``adding_replicas``/``removing_replicas`` in ZooKeeper).
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = 0  # zkVersion; set by the store


class EventKind(enum.Enum):
    BROKERS_CHANGED = "brokers_changed"
    TOPIC_CREATED = "topic_created"
    TOPIC_DELETED = "topic_deleted"
    TOPIC_CHANGED = "topic_changed"  # assignment (e.g. partitions added)
    CONFIG_CHANGED = "config_changed"
    PARTITION_STATE_CHANGED = "partition_state_changed"
    CONTROLLER_CHANGED = "controller_changed"
    # An admin request znode appeared or changed: extra {"name": "reassign_partitions" or
    # "preferred_replica_election"} (``core.broker.controller.reassignment``).
    ADMIN_REQUEST = "admin_request"
    # This broker's ZooKeeper session expired (its registration and any controller role
    # are gone): stop acting as leader until SESSION_RESTORED (registered again).
    SESSION_EXPIRED = "session_expired"
    SESSION_RESTORED = "session_restored"


@dataclass(frozen=True, slots=True)
class MetadataEvent:
    kind: EventKind
    topic: str | None = None
    partition: int | None = None
    extra: dict[str, object] = field(default_factory=dict)


Listener = Callable[[MetadataEvent], None]


class MetadataStore(Protocol):
    """Cluster metadata. All methods are coroutines safe to call from the event loop;
    listeners are invoked on the event loop."""

    async def start(self) -> None: ...
    async def close(self) -> None: ...

    async def cluster_id(self) -> str:
        """The cluster id, created (22-char base64 UUID) on first call."""
        ...

    # brokers
    async def register_broker(self, reg: BrokerRegistration) -> BrokerRegistration: ...
    async def unregister_broker(self, broker_id: int) -> None: ...
    async def live_brokers(self) -> list[BrokerRegistration]: ...

    # controller
    async def try_elect_controller(self, broker_id: int) -> int | None:
        """Become controller if there is none; returns the new controller epoch, or None."""
        ...

    async def controller_id(self) -> int | None: ...

    # topics
    async def create_topic(
        self, assignment: TopicAssignment, configs: Mapping[str, str],
        states: Mapping[int, PartitionState],
    ) -> None:
        """Atomically create the topic, its config overrides and partition states;
        TopicAlreadyExistsError if it exists."""
        ...

    async def topic_names(self) -> list[str]: ...
    async def replicas_per_broker(self) -> dict[int, int]:
        """Partition replicas each broker is assigned, over every topic, as stored now
        (not as this broker's cache has it: creations elsewhere may be newer)."""
        ...
    async def get_topic(self, name: str) -> TopicAssignment | None: ...
    async def add_partitions(
        self, assignment: TopicAssignment, states: Mapping[int, PartitionState]
    ) -> None: ...
    async def delete_topic(self, name: str) -> None: ...
    async def get_topic_configs(self, name: str) -> dict[str, str]: ...
    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides with ``configs``."""
        ...

    # partition state
    async def get_partition_states(self, topic: str) -> dict[int, PartitionState]: ...
    async def update_partition_state(
        self, topic: str, partition: int, state: PartitionState, *, expected_version: int
    ) -> PartitionState:
        """Conditional write; returns the state with its new version, BadVersionError on a race."""
        ...

    async def update_partition_states(
        self, topic: str, updates: Mapping[int, tuple[PartitionState, int]]
    ) -> dict[int, PartitionState]:
        """``update_partition_state`` of several partitions of ``topic`` (partition ->
        (state, expected version)) in one all-or-nothing write; BadVersionError (or
        UnknownPartitionError) and nothing written when any of them fails."""
        ...

    # reassignment: replace the replicas of existing partitions (same partition set)
    async def set_assignment(self, assignment: TopicAssignment) -> None: ...

    # admin requests (``/admin/<name>`` in ZooKeeper): Kafka's JSON, bytes
    async def get_admin_request(self, name: str) -> bytes | None: ...
    async def create_admin_request(self, name: str, data: bytes) -> bool:
        """False when a request of that name exists already."""
        ...

    async def delete_admin_request(self, name: str) -> None: ...

    # producer ids (``/latest_producer_id_block`` in ZooKeeper)
    async def allocate_producer_ids(self, broker_id: int, count: int) -> tuple[int, int]:
        """A block of ``count`` producer ids for ``broker_id``, (first, last) inclusive,
        never handed out before nor to anyone else (Kafka's ProducerIdManager)."""
        ...

    def subscribe(self, listener: Listener) -> None: ...
