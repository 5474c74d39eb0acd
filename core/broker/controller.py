"""The controller: the one broker that decides topic layout and leadership.

Elected through the metadata store (``try_elect_controller``: ZooKeeper's ephemeral
``/controller`` fenced by ``/controller_epoch`` in a cluster; the embedded store in
standalone, where the single broker always wins). It creates and deletes topics with
Kafka's replica assignment, adds partitions, validates and stores config overrides,
and writes initial partition states (leader = first live replica, ISR = live replicas,
leader epoch 0). Brokers learn the results through store notifications.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Mapping

from core.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    NotControllerError,
    TopicAlreadyExistsError,
    TopicDeletionDisabledError,
    UnknownTopicError,
)
from core.broker.metadata import MetadataStore, PartitionState, TopicAssignment
from core.broker.replica_assignment import assign_replicas
from core.storage.config import validate_topic_configs, validate_topic_name

log = logging.getLogger(__name__)


def new_topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class Controller:
    """Topic and leadership decisions; active only on the elected broker."""

    def __init__(self, broker_id: int, store: MetadataStore, *, delete_topic_enable: bool = True) -> None:
        self.broker_id = broker_id
        self.store = store
        self.epoch: int | None = None
        self.delete_topic_enable = delete_topic_enable

    @property
    def is_active(self) -> bool:
        return self.epoch is not None

    async def maybe_elect(self) -> bool:
        epoch = await self.store.try_elect_controller(self.broker_id)
        if epoch is not None:
            self.epoch = epoch
            log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        return self.is_active

    def _check_active(self) -> int:
        if self.epoch is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        return self.epoch

    async def _live_broker_ids(self) -> list[int]:
        return sorted(r.broker_id for r in await self.store.live_brokers())

    async def create_topic(
        self, name: str, *, partitions: int, replication_factor: int,
        configs: Mapping[str, str] | None = None, validate_only: bool = False,
    ) -> TopicAssignment:
        epoch = self._check_active()
        validate_topic_name(name)
        overrides = validate_topic_configs(configs or {})
        if partitions < 1:
            raise InvalidPartitionsError(f"Number of partitions must be larger than 0, got {partitions}")
        live = await self._live_broker_ids()
        if replication_factor < 1 or replication_factor > len(live):
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication_factor} larger than available brokers: {len(live)}"
                if replication_factor > len(live) else
                f"Replication factor must be larger than 0, got {replication_factor}")
        if await self.store.get_topic(name) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        assignment = TopicAssignment(name, new_topic_id(),
                                     assign_replicas(live, partitions, replication_factor))
        if validate_only:
            return assignment
        states = {p: _initial_state(reps, live, epoch) for p, reps in assignment.partitions.items()}
        await self.store.create_topic(assignment, overrides, states)
        log.info("created topic %s with %d partition(s), replication factor %d",
                 name, partitions, replication_factor)
        return assignment

    async def delete_topic(self, name: str) -> None:
        self._check_active()
        if not self.delete_topic_enable:
            raise TopicDeletionDisabledError("Topic deletion is disabled (delete.topic.enable=false)")
        if await self.store.get_topic(name) is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        await self.store.delete_topic(name)
        log.info("deleted topic %s", name)

    async def create_partitions(self, name: str, total: int) -> TopicAssignment:
        epoch = self._check_active()
        current = await self.store.get_topic(name)
        if current is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        have = len(current.partitions)
        if total < have:
            raise InvalidPartitionsError(
                f"Topic currently has {have} partitions, which is higher than the requested {total}: "
                "the partition count can only be increased")
        if total == have:
            raise InvalidPartitionsError(f"Topic already has {have} partitions.")
        live = await self._live_broker_ids()
        rf = len(current.partitions[0])
        added = assign_replicas(live, total - have, min(rf, len(live)), first_partition=have)
        assignment = TopicAssignment(name, current.topic_id, {**current.partitions, **added})
        states = {p: _initial_state(reps, live, epoch) for p, reps in added.items()}
        await self.store.add_partitions(assignment, states)
        return assignment

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> dict[str, str]:
        self._check_active()
        if await self.store.get_topic(name) is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        overrides = validate_topic_configs(configs)
        await self.store.set_topic_configs(name, overrides)
        return overrides


def _initial_state(replicas: tuple[int, ...], live: list[int], epoch: int) -> PartitionState:
    alive = tuple(r for r in replicas if r in live)
    leader = alive[0] if alive else -1
    return PartitionState(leader=leader, leader_epoch=0, isr=alive or replicas[:1],
                          controller_epoch=epoch)
