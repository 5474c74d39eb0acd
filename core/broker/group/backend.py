"""What the group coordinator and the consumer manager need from the broker.

:class:`GroupBackend` is the whole surface: the offsets topic (append with acks=all,
read a partition for loading), topic metadata, and reads of data partitions.
:class:`BrokerGroupBackend` implements it over :class:`core.broker.broker.Broker`'s
public methods; unit tests use a small fake over real partition logs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from core.broker.cluster.router import Router
from core.broker.coordination.partition_log import InternalTopicLog
from core.broker.metadata.cache import MetadataCache
from core.broker.replica.batch_cache import BatchCache, FetchResult
from core.broker.replica.delayed import DataWatch
from core.broker.replica.manager import ReplicaManager
from core.broker.types import OFFSETS_TOPIC, PartitionOffsets, TopicPartition
from core.storage.records import Record


class GroupBackend(Protocol):
    """The broker as the group coordinator sees it. Event-loop only.

    Errors are the domain ones: ``NotLeaderOrFollowerError`` when this broker does not
    lead the offsets partition (the coordinator then answers NOT_COORDINATOR),
    ``UnknownTopicOrPartitionError`` for data partitions that do not exist,
    ``core.storage.errors.OffsetOutOfRangeError`` from ``fetch``.
    """

    offsets_topic_partitions: int  # offsets.topic.num.partitions (50)

    def offsets_leader_epoch(self, partition: int) -> int:
        """The leader epoch at which this broker leads ``__consumer_offsets``-``partition``
        (``NotLeaderOrFollowerError`` where it does not)."""
        ...

    def offsets_leader(self, partition: int) -> int:
        """The broker id leading ``__consumer_offsets``-``partition`` as this broker's
        metadata names it (-1: none known); FindCoordinator answers it."""
        ...

    async def append_offsets(self, partition: int, batch: bytes, *,
                             leader_epoch: int | None = None) -> int:
        """Append one v2 batch to ``__consumer_offsets``-``partition`` with acks=all;
        the base offset once the high watermark has passed it. With ``leader_epoch``:
        ``NotLeaderOrFollowerError`` unless led here at that epoch."""
        ...

    def read_offsets(self, partition: int) -> AsyncIterator[Record]:
        """Every record of ``__consumer_offsets``-``partition`` from the log start to the
        high watermark, in order (for loading)."""
        ...

    async def list_topics(self) -> list[str]:
        """Every topic name, internal ones included."""
        ...

    async def partition_count(self, topic: str) -> int | None:
        """Partitions of ``topic``; None if it does not exist."""
        ...

    async def fetch(
        self, topic: str, partition: int, offset: int, *, max_bytes: int, max_wait_ms: int,
    ) -> FetchResult:
        """Records from ``offset`` below the HW, at least one if any is there even above
        ``max_bytes``, as ranges of fetched batches (decoded only when a reader asks for
        ``records``); waits up to ``max_wait_ms`` for data."""
        ...

    def data_watch(self, topic: str, partition: int) -> DataWatch | None:
        """What a read waiting for data of a partition this broker leads parks on (no
        long-poll ``fetch`` needed); None for partitions led elsewhere."""
        ...

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> int | None:
        """The first offset whose timestamp >= ``timestamp_ms`` (-1 latest, -2 earliest)."""
        ...

    async def partition_offsets(self, topic: str, partition: int) -> PartitionOffsets:
        """Log start offset, high watermark and log end offset."""
        ...


class ReplicaGroupBackend:
    """:class:`GroupBackend` over the replica manager, the router and the metadata cache.
    ``offsets_topic_partitions``: offsets.topic.num.partitions; ``commit_timeout_ms``:
    offsets.commit.timeout.ms (the acks=all wait of a commit)."""

    def __init__(self, replicas: ReplicaManager, router: Router, cache: MetadataCache,
                 batches: BatchCache, *, offsets_topic_partitions: int,
                 commit_timeout_ms: int) -> None:
        self._replicas = replicas
        self._router = router
        self._cache = cache
        self._batches = batches
        self.offsets_topic_partitions = offsets_topic_partitions
        self._commit_timeout_ms = commit_timeout_ms
        self._offsets_log = InternalTopicLog(replicas, batches, OFFSETS_TOPIC)

    def offsets_leader_epoch(self, partition: int) -> int:
        return self._offsets_log.leader_epoch(partition)

    def offsets_leader(self, partition: int) -> int:
        return self._cache.leader_of(OFFSETS_TOPIC, partition)

    async def append_offsets(self, partition: int, batch: bytes, *,
                             leader_epoch: int | None = None) -> int:
        return await self._offsets_log.append(partition, batch, acks=-1,
                                              timeout_ms=self._commit_timeout_ms,
                                              leader_epoch=leader_epoch)

    def read_offsets(self, partition: int) -> AsyncIterator[Record]:
        return self._offsets_log.read(partition)

    async def list_topics(self) -> list[str]:
        return sorted(self._cache.topics)

    async def partition_count(self, topic: str) -> int | None:
        meta = self._cache.topic(topic)
        return None if meta is None else meta.num_partitions

    async def fetch(
        self, topic: str, partition: int, offset: int, *, max_bytes: int, max_wait_ms: int,
    ) -> FetchResult:
        tp = self._cache.existing_partition(topic, partition)
        got = await self._router.fetch(tp, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms)
        return self._batches.fetch_result(
            topic, partition, offset, got.data, high_watermark=got.offsets.high_watermark,
            log_start_offset=got.offsets.log_start_offset)

    def data_watch(self, topic: str, partition: int) -> DataWatch | None:
        return self._replicas.data_watch(TopicPartition(topic, partition))

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> int | None:
        tp = self._cache.existing_partition(topic, partition)
        return await self._replicas.offset_for_timestamp(tp, timestamp_ms)

    async def partition_offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return await self._router.partition_offsets(
            self._cache.existing_partition(topic, partition))
