"""Topics in the ZooKeeper store: assignments, configs and partition states.

Each write is one ZooKeeper multi-op unless said otherwise, fenced by the controller epoch
when this store holds the role (``election``).

- ``create_topic``: topic znode, ``partitions`` parents, the given states and the config
  znode together. ``update_partition_state``: ``set_data`` at the expected zkVersion. A
  partition whose state was never written counts as version 0, as in the embedded store:
  its first write creates the state znode and sets it once in the same multi-op, so it
  comes back as version 1 on both backends.
- ``add_partitions`` and ``set_assignment``: ``/brokers/topics/<t>`` at the zkVersion
  read (with the new partitions' znodes and states for ``add_partitions``).
- ``set_topic_configs``: ``/config/topics/<t>`` plus a sequential
  ``/config/changes/config_change_`` notification (not purged here; Kafka purges them
  after 15 minutes).
- ``delete_topic``: writes ``/admin/delete_topics/<t>`` (the durable request), then
  deletes the topic's znodes, its config and the request in one multi-op. Kafka's
  controller deletes only once every replica stopped; here the controller (the only
  caller) deletes at once and brokers drop their replicas on ``TOPIC_DELETED``. A request
  left behind by a crash between the two steps is completed by the next
  ``delete_topic`` of that name; nothing watches ``/admin/delete_topics``.

No state of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kazoo import exceptions as kz

from core.broker.errors import TopicAlreadyExistsError, UnknownPartitionError, UnknownTopicError
from core.broker.metadata.events import (
    config_changed_event,
    state_event,
    topic_changed_event,
    topic_created_event,
    topic_deleted_event,
)
from core.broker.metadata.rules import check_states_within, partitions_to_add
from core.broker.metadata.store import (
    BadVersionError,
    MetadataStoreError,
    PartitionState,
    TopicAssignment,
)
from core.broker.metadata.zk.base import RACE_RETRIES
from core.broker.metadata.zk.client import OpFailed
from core.broker.metadata.zk.election import ZkControllerElection
from core.broker.metadata.zk.paths import (
    TOPIC_CONFIG_ENTITY,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    DeleteTopicsTopicZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
)


class ZkTopics(ZkControllerElection):
    """Topic assignments, configs and partition states (module docstring)."""

    # --- topics -------------------------------------------------------------------------------

    async def create_topic(
        self, assignment: TopicAssignment, configs: Mapping[str, str],
        states: Mapping[int, PartitionState],
    ) -> None:
        check_states_within(states, assignment.partitions, what="create_topic")
        async with self._lock:
            await self._call(self._create_topic, assignment, dict(configs), dict(states))
            self._view.topic_written(assignment, states)
            self._emit(topic_created_event(assignment.name, len(assignment.partitions)))

    async def topic_names(self) -> list[str]:
        return sorted(await self._call(self._client.children, TopicsZNode.path))

    async def get_topic(self, name: str) -> TopicAssignment | None:
        return await self._call(self._get_topic, name)

    async def replicas_per_broker(self) -> dict[int, int]:
        return await self._call(self._replicas_per_broker)

    async def add_partitions(
        self, assignment: TopicAssignment, states: Mapping[int, PartitionState]
    ) -> None:
        """Add the partitions of ``assignment`` the topic does not have yet, with their
        states. Existing partitions must appear unchanged; adding nothing is a no-op."""
        async with self._lock:
            added = await self._call(self._add_partitions, assignment, dict(states))
            if not added:
                return
            self._view.partitions_written(assignment.name, added, states)
            self._emit(topic_changed_event(assignment.name, added))

    async def delete_topic(self, name: str) -> None:
        async with self._lock:
            await self._call(self._delete_topic, name)
            self._view.topic_removed(name)
            self._emit(topic_deleted_event(name))

    async def get_topic_configs(self, name: str) -> dict[str, str]:
        return await self._call(self._get_topic_configs, name)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides with ``configs`` and notify ``/config/changes``."""
        async with self._lock:
            notification = await self._call(self._set_topic_configs, name, dict(configs))
            self._view.config_change_written(notification)
            self._emit(config_changed_event(name))

    async def set_assignment(self, assignment: TopicAssignment) -> None:
        """Replace the replicas (and ``adding``/``removing``) of the topic's existing
        partitions: a reassignment step. Fenced like every controller write."""
        async with self._lock:
            await self._call(self._set_assignment, assignment)
            self._view.assignment_written(assignment)
            self._emit(topic_changed_event(assignment.name, []))

    # --- partition state ----------------------------------------------------------------------

    async def get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        return await self._call(self._get_partition_states, topic)

    async def update_partition_state(
        self, topic: str, partition: int, state: PartitionState, *, expected_version: int
    ) -> PartitionState:
        """Conditional write; returns the state with its new version. BadVersionError on a
        race, NotControllerError if this store's controller epoch was superseded."""
        async with self._lock:
            stored = await self._call(self._update_partition_state, topic, partition, state,
                                      expected_version)
            self._view.state_written(topic, partition, stored.version)
            self._emit(state_event(topic, partition, stored))
        return stored

    async def update_partition_states(
        self, topic: str, updates: Mapping[int, tuple[PartitionState, int]]
    ) -> dict[int, PartitionState]:
        """One ZooKeeper multi-op for every partition (fenced by the controller epoch)."""
        async with self._lock:
            stored = await self._call(self._update_partition_states, topic, dict(updates))
            for p, st in stored.items():
                self._view.state_written(topic, p, st.version)
                self._emit(state_event(topic, p, st))
        return stored

    # --- blocking bodies: topics and configs --------------------------------------------------

    def _create_topic(
        self, assignment: TopicAssignment, configs: dict[str, str],
        states: dict[int, PartitionState],
    ) -> None:
        name = assignment.name
        config_path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        config_exists = self._client.exists(config_path) is not None  # e.g. left by Kafka's admin
        txn = self._txn()
        txn.create(TopicZNode.path(name), TopicZNode.encode(assignment))
        txn.create(TopicPartitionsZNode.path(name))
        for p in sorted(assignment.partitions):
            txn.create(TopicPartitionZNode.path(name, p))
            if p in states:
                txn.create(TopicPartitionStateZNode.path(name, p),
                           TopicPartitionStateZNode.encode(states[p]))
        if config_exists:
            txn.set_data(config_path, ConfigEntityZNode.encode(configs))
        else:
            txn.create(config_path, ConfigEntityZNode.encode(configs))
        try:
            txn.commit()
        except OpFailed as failed:
            if failed.path == TopicZNode.path(name) and isinstance(failed.cause,
                                                                   kz.NodeExistsError):
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from failed.cause
            raise

    def _replicas_per_broker(self) -> dict[int, int]:
        names = self._client.children(TopicsZNode.path)
        found = self._client.get_many(TopicZNode.path(n) for n in names)  # pipelined
        hosted: dict[int, int] = {}
        for name in names:
            got = found.get(TopicZNode.path(name))
            if got is None:
                continue  # deleted meanwhile
            for replicas in TopicZNode.decode(name, got[0]).partitions.values():
                for broker in replicas:
                    hosted[broker] = hosted.get(broker, 0) + 1
        return hosted

    def _get_topic(self, name: str) -> TopicAssignment | None:
        found = self._client.get_or_none(TopicZNode.path(name))
        return None if found is None else TopicZNode.decode(name, found[0])

    def _add_partitions(
        self, assignment: TopicAssignment, states: dict[int, PartitionState]
    ) -> list[int]:
        name = assignment.name
        for _ in range(RACE_RETRIES):
            found = self._client.get_or_none(TopicZNode.path(name))
            if found is None:
                raise UnknownTopicError(f"Topic '{name}' not found.")
            current = TopicZNode.decode(name, found[0])
            added = partitions_to_add(name, current.partitions, assignment.partitions)
            check_states_within(states, added, what="add_partitions")
            if not added:
                return []
            grown = TopicAssignment(name, current.topic_id or assignment.topic_id,
                                    {**current.partitions, **added})
            txn = self._txn()
            txn.set_data(TopicZNode.path(name), TopicZNode.encode(grown), found[1].version)
            if self._client.exists(TopicPartitionsZNode.path(name)) is None:
                txn.create(TopicPartitionsZNode.path(name))
            for p in sorted(added):
                txn.create(TopicPartitionZNode.path(name, p))
                if p in states:
                    txn.create(TopicPartitionStateZNode.path(name, p),
                               TopicPartitionStateZNode.encode(states[p]))
            try:
                txn.commit()
            except OpFailed as failed:
                if failed.path == TopicZNode.path(name):
                    continue  # changed or deleted meanwhile: read again
                raise
            return sorted(added)
        raise MetadataStoreError(f"metadata store: topic '{name}' kept changing while adding "
                                 "partitions")

    def _delete_topic(self, name: str) -> None:
        topic_path = TopicZNode.path(name)
        if self._client.exists(topic_path) is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        try:
            self._client.create(DeleteTopicsTopicZNode.path(name))
        except kz.NodeExistsError:
            pass  # an earlier request, not completed
        config_path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        for _ in range(RACE_RETRIES):
            subtree = self._client.subtree(topic_path)
            if not subtree:
                raise UnknownTopicError(f"Topic '{name}' not found.")
            txn = self._txn()
            for path in subtree:
                txn.delete(path)
            if self._client.exists(config_path) is not None:
                txn.delete(config_path)
            if self._client.exists(DeleteTopicsTopicZNode.path(name)) is not None:
                txn.delete(DeleteTopicsTopicZNode.path(name))
            try:
                txn.commit()
            except OpFailed as failed:
                if isinstance(failed.cause, kz.NotEmptyError | kz.NoNodeError):
                    continue  # a znode appeared or went meanwhile: list again
                raise
            return
        raise MetadataStoreError(f"metadata store: topic '{name}' kept changing while "
                                 "deleting it")

    def _set_assignment(self, assignment: TopicAssignment) -> None:
        name = assignment.name
        found = self._client.get_or_none(TopicZNode.path(name))
        if found is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        current = TopicZNode.decode(name, found[0])
        if set(current.partitions) != set(assignment.partitions):
            raise MetadataStoreError(f"metadata store: set_assignment of '{name}' must keep "
                                     f"its partitions {sorted(current.partitions)}")
        grown = dataclasses.replace(assignment, topic_id=current.topic_id or assignment.topic_id)
        txn = self._txn()
        txn.set_data(TopicZNode.path(name), TopicZNode.encode(grown), found[1].version)
        try:
            txn.commit()
        except OpFailed as failed:
            raise MetadataStoreError(f"metadata store: topic '{name}' changed while moving "
                                     "replicas; try again") from failed.cause

    def _get_topic_configs(self, name: str) -> dict[str, str]:
        found = self._client.get_or_none(ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name))
        return {} if found is None else ConfigEntityZNode.decode(found[0])

    def _set_topic_configs(self, name: str, configs: dict[str, str]) -> str:
        """Returns the name of the change notification written."""
        path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        note = ConfigEntityChangeNotificationSequenceZNode
        for _ in range(RACE_RETRIES):
            exists = self._client.exists(path) is not None
            txn = self._txn()
            txn.check(TopicZNode.path(name), -1)  # the topic must exist
            if exists:
                txn.set_data(path, ConfigEntityZNode.encode(configs))
            else:
                txn.create(path, ConfigEntityZNode.encode(configs))
            txn.create(note.prefix_path, note.encode(TOPIC_CONFIG_ENTITY, name), sequence=True)
            try:
                results = txn.commit()
            except OpFailed as failed:
                if failed.path == TopicZNode.path(name):
                    raise UnknownTopicError(f"Topic '{name}' not found.") from failed.cause
                if failed.path == path:
                    continue  # created or deleted meanwhile
                raise
            return str(results[-1]).rsplit("/", 1)[-1]
        raise MetadataStoreError(f"metadata store: configs of '{name}' kept changing")

    # --- blocking bodies: partition state -----------------------------------------------------

    def _get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        partitions = sorted(int(c) for c in self._client.children(TopicPartitionsZNode.path(topic))
                            if c.isdigit())
        found = self._client.get_many(TopicPartitionStateZNode.path(topic, p) for p in partitions)
        states = {}
        for p in partitions:
            got = found.get(TopicPartitionStateZNode.path(topic, p))
            if got is not None:
                states[p] = TopicPartitionStateZNode.decode(got[0], zk_version=got[1].version)
        return states

    def _update_partition_state(
        self, topic: str, partition: int, state: PartitionState, expected_version: int
    ) -> PartitionState:
        path, data = TopicPartitionStateZNode.path(topic, partition), \
            TopicPartitionStateZNode.encode(state)
        txn = self._txn()
        txn.set_data(path, data, expected_version)
        try:
            (stat,) = txn.commit()
            return dataclasses.replace(state, version=stat.version)
        except OpFailed as failed:
            if isinstance(failed.cause, kz.BadVersionError):
                raise self._bad_version(topic, partition, expected_version) from failed.cause
            if not isinstance(failed.cause, kz.NoNodeError):
                raise
        self._require_partition(topic, partition)  # no state written yet: version 0
        if expected_version != 0:
            raise self._bad_version(topic, partition, expected_version)
        return self._create_first_state(topic, partition, state)

    def _update_partition_states(
        self, topic: str, updates: dict[int, tuple[PartitionState, int]]
    ) -> dict[int, PartitionState]:
        txn = self._txn()
        order = sorted(updates)
        for p in order:
            state, expected = updates[p]
            txn.set_data(TopicPartitionStateZNode.path(topic, p),
                         TopicPartitionStateZNode.encode(state), expected)
        try:
            stats = txn.commit()
        except OpFailed as failed:
            if isinstance(failed.cause, kz.BadVersionError | kz.NoNodeError):
                raise BadVersionError(
                    f"partition states of {topic}: {failed.path} changed or is missing; "
                    "nothing written") from failed.cause
            raise
        return {p: dataclasses.replace(updates[p][0], version=stat.version)
                for p, stat in zip(order, stats, strict=True)}

    def _create_first_state(
        self, topic: str, partition: int, state: PartitionState
    ) -> PartitionState:
        path, data = TopicPartitionStateZNode.path(topic, partition), \
            TopicPartitionStateZNode.encode(state)
        txn = self._txn()
        if self._client.exists(TopicPartitionsZNode.path(topic)) is None:
            txn.create(TopicPartitionsZNode.path(topic))
        if self._client.exists(TopicPartitionZNode.path(topic, partition)) is None:
            txn.create(TopicPartitionZNode.path(topic, partition))
        txn.create(path, data)
        txn.set_data(path, data, 0)  # version 1, as the embedded store's first write
        try:
            results = txn.commit()
        except OpFailed as failed:
            if isinstance(failed.cause, kz.NodeExistsError):  # someone wrote it first
                raise self._bad_version(topic, partition, 0) from failed.cause
            raise
        return dataclasses.replace(state, version=results[-1].version)

    def _require_partition(self, topic: str, partition: int) -> None:
        assignment = self._get_topic(topic)
        if assignment is None:
            raise UnknownTopicError(f"Topic '{topic}' not found.")
        if partition not in assignment.partitions:
            raise UnknownPartitionError(f"Topic '{topic}' has no partition {partition}.")

    def _bad_version(self, topic: str, partition: int, expected: int) -> BadVersionError:
        stat = self._client.exists(TopicPartitionStateZNode.path(topic, partition))
        actual = 0 if stat is None else stat.version
        return BadVersionError(
            f"partition state {topic}-{partition}: expected version {expected}, "
            f"stored version is {actual}")
