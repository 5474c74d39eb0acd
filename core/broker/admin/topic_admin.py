"""Topic administration on any broker: list, describe, create, delete, add partitions,
describe and alter configs, and the creation of ``__consumer_offsets``.

Decisions go through the ``Controller`` (it validates and writes the store); the answer
is read back after this broker has synced the topic (``MetadataSync``), so a client that
created a topic can produce to it at once. ``on_topics_changed`` tells the consumer
groups that topics came or went (pattern subscriptions, assignments). Internal topics
(``__consumer_offsets``) belong to the broker: no route may delete them, change their
configs or their partition count (InvalidTopicError). Event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NoReturn

from core.broker.controller.controller import Controller
from core.broker.errors import TopicAlreadyExistsError
from core.broker.metadata.cache import MetadataCache, TopicMetadata
from core.broker.replica.metadata_sync import MetadataSync
from core.broker.types import (
    IDEMPOTENCY_TOPIC,
    OFFSETS_TOPIC,
    SCHEMAS_TOPIC,
    PartitionInfo,
    TopicInfo,
    is_internal_topic,
)
from core.storage.config import ConfigEntry, describe_configs, validate_topic_configs
from core.storage.errors import InvalidTopicError, KafkaStorageError, StorageError

log = logging.getLogger(__name__)

#: Every config change to an internal topic is refused: the broker sets them at creation
#: (offsets.topic.*), and most keys could break the topic (cleanup.policy, retention.*,
#: segment.*, max.message.bytes, message.timestamp.*, min.insync.replicas above the
#: replication factor...); no key is needed to operate it.
_CONFIGS_FIXED = "its configs cannot be changed (the broker sets them)"


def _refuse_internal(name: str, what: str) -> None:
    """InvalidTopicError (Kafka's INVALID_TOPIC_EXCEPTION: 400 / 40002 over REST) if
    ``name`` is an internal topic, the state of every consumer group."""
    if is_internal_topic(name):
        raise InvalidTopicError(f"Topic '{name}' is internal and {what}")


@dataclass(frozen=True, slots=True)
class OffsetsTopicSettings:
    """``offsets.topic.*`` as the creation of ``__consumer_offsets`` uses them."""

    num_partitions: int = 50
    replication_factor: int = 3
    segment_bytes: int = 104_857_600
    #: a ZooKeeper cluster: wait until ``replication_factor`` brokers are alive
    wait_for_brokers: bool = False


@dataclass(frozen=True, slots=True)
class IdempotencyTopicSettings:
    """``idempotency.topic.*`` and ``idempotency.key.retention.ms`` as the creation of
    ``__franz_idempotency`` uses them."""

    num_partitions: int = 16
    replication_factor: int = 3
    retention_ms: int = 86_400_000
    segment_bytes: int = 104_857_600


class TopicAdmin:
    """``default_partitions`` / ``default_replication_factor``: num.partitions and
    default.replication.factor; ``log_defaults``: the broker's log properties."""

    def __init__(self, controller: Controller, cache: MetadataCache, sync: MetadataSync, *,
                 log_defaults: Mapping[str, str], default_partitions: int = 1,
                 default_replication_factor: int = 1,
                 offsets_topic: OffsetsTopicSettings = OffsetsTopicSettings(),
                 idempotency_topic: IdempotencyTopicSettings = IdempotencyTopicSettings(),
                 on_topics_changed: Callable[[], None] = lambda: None) -> None:
        self._controller = controller
        self._cache = cache
        self._sync = sync
        self._log_defaults = log_defaults
        self._default_partitions = default_partitions
        self._default_rf = default_replication_factor
        self._offsets = offsets_topic
        self._idempotency = idempotency_topic
        self._on_topics_changed = on_topics_changed
        self._create_lock = asyncio.Lock()
        self._internal_topics_lock = asyncio.Lock()

    # --- reads --------------------------------------------------------------------------

    def list_topics(self) -> list[str]:
        return sorted(self._cache.topics)

    def topic_metadata(self, name: str) -> TopicMetadata:
        return self._cache.existing_topic(name)

    def describe_topic(self, name: str) -> TopicInfo:
        meta = self.topic_metadata(name)
        parts = []
        for p in sorted(meta.assignment.partitions):
            st = meta.states.get(p)
            parts.append(PartitionInfo(
                p, st.leader if st else -1, st.leader_epoch if st else -1,
                tuple(meta.assignment.partitions[p]), tuple(st.isr) if st else ()))
        return TopicInfo(name, meta.assignment.topic_id, is_internal_topic(name), tuple(parts),
                         dict(meta.configs))

    def describe_topic_configs(self, name: str) -> list[ConfigEntry]:
        """Every topic-level key of ``name`` with its effective value, source and
        synonyms, sorted by name (v3 topic configs); UnknownTopicError."""
        return describe_configs(self.topic_metadata(name).configs, self._log_defaults)

    # --- changes ------------------------------------------------------------------------

    async def create_topic(
        self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None, validate_only: bool = False,
        internal: bool = False,
    ) -> TopicInfo:
        if is_internal_topic(name) and not internal:
            raise InvalidTopicError(f"Topic name '{name}' is reserved for internal use")
        async with self._create_lock:
            assignment = await self._controller.create_topic(
                name, partitions=partitions or self._default_partitions,
                replication_factor=replication_factor or self._default_rf,
                configs=configs, validate_only=validate_only)
            if validate_only:
                return TopicInfo(name, assignment.topic_id, is_internal_topic(name), tuple(
                    PartitionInfo(p, r[0], 0, tuple(r), tuple(r))
                    for p, r in sorted(assignment.partitions.items())), dict(configs or {}))
            try:
                await self._sync.sync_topic(name)
            except (OSError, StorageError) as exc:
                await self._undo_creation(name, exc)
            self._on_topics_changed()
        return self.describe_topic(name)

    async def _undo_creation(self, name: str, exc: BaseException) -> NoReturn:
        """A creation whose local logs could not all be made (no space, no descriptors)
        is taken back, store and disk, so no half-created topic is left; then refused."""
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        log.error("creating the logs of topic %s failed (%s): the creation is undone", name, reason)
        try:
            await self._controller.delete_topic(name, force=True)
            await self._sync.sync_topic(name)
        except Exception:  # the restart's stray-log cleanup removes what is left
            log.exception("undoing the creation of topic %s failed", name)
        raise KafkaStorageError(f"Topic '{name}' could not be created: {reason}") from None

    async def delete_topic(self, name: str) -> None:
        self.topic_metadata(name)
        _refuse_internal(name, "cannot be deleted")
        await self._controller.delete_topic(name)
        await self._sync.sync_topic(name)
        self._on_topics_changed()

    async def create_partitions(self, name: str, total: int) -> TopicInfo:
        # groups are mapped to offsets partitions by hash of the group id modulo the count
        _refuse_internal(name, "its partition count cannot be changed")
        await self._controller.create_partitions(name, total)
        await self._sync.sync_topic(name)
        self._on_topics_changed()
        return self.describe_topic(name)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides (validated) and apply them live."""
        _refuse_internal(name, _CONFIGS_FIXED)
        await self._controller.set_topic_configs(name, configs)
        await self._sync.sync_topic(name)

    async def alter_topic_configs(
        self, name: str, *, set_values: Mapping[str, str] | None = None,
        reset: Iterable[str] = (), validate_only: bool = False,
    ) -> dict[str, str]:
        """Set some overrides and drop others (back to the broker default) in one
        validated step, applied live like ``set_topic_configs``; returns the new
        overrides. InvalidConfigError names a bad key or value; nothing changes then."""
        async with self._create_lock:  # read-modify-write of the overrides, serialized
            drop = set(reset)
            current = self.topic_metadata(name).configs
            _refuse_internal(name, _CONFIGS_FIXED)
            overrides = {k: v for k, v in current.items() if k not in drop}
            overrides.update(set_values or {})
            if validate_only:
                return validate_topic_configs(overrides)
            await self.set_topic_configs(name, overrides)
            return dict(self.topic_metadata(name).configs)

    async def ensure_internal_topics(self) -> None:
        """The active controller creates ``__consumer_offsets``, ``__franz_idempotency``
        and ``_schemas`` (the Schema Registry's: one partition, compacted, as Confluent's,
        with the offsets topic's replication factor). In a cluster it waits until their
        replication factor of brokers is alive (Kafka since 0.11: groups answer
        COORDINATOR_NOT_AVAILABLE meanwhile), so the first broker to start does not pin a
        topic to RF=1 on itself; a cluster of one (``franz serve``) caps RF at 1."""
        o, i = self._offsets, self._idempotency
        await self._ensure_internal(
            OFFSETS_TOPIC, o.num_partitions, o.replication_factor,
            {"cleanup.policy": "compact", "compression.type": "producer",
             "segment.bytes": str(o.segment_bytes)})
        await self._ensure_internal(
            IDEMPOTENCY_TOPIC, i.num_partitions, i.replication_factor,
            {"cleanup.policy": "compact,delete", "retention.ms": str(i.retention_ms),
             "compression.type": "producer", "segment.bytes": str(i.segment_bytes)})
        await self._ensure_internal(
            SCHEMAS_TOPIC, 1, o.replication_factor,
            {"cleanup.policy": "compact", "compression.type": "producer"})

    async def _ensure_internal(self, name: str, partitions: int, replication_factor: int,
                               configs: dict[str, str]) -> None:
        if self._cache.topic(name) is not None or not self._controller.is_active:
            return
        live = max(1, len(self._cache.brokers))
        if self._offsets.wait_for_brokers and live < replication_factor:
            log.info("%s waits for %d live brokers (%d now)", name, replication_factor, live)
            return
        async with self._internal_topics_lock:
            if self._cache.topic(name) is not None:
                return
            with contextlib.suppress(TopicAlreadyExistsError):  # a race with another broker
                await self.create_topic(
                    name, partitions=partitions,
                    replication_factor=min(replication_factor, live), configs=configs,
                    internal=True)
