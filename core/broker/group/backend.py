"""What the group coordinator and the consumer manager need from the broker.

:class:`GroupBackend` is the whole surface: the offsets topic (append with acks=all,
read a partition for loading), topic metadata, and reads of data partitions.
:class:`BrokerGroupBackend` implements it over :class:`core.broker.broker.Broker`'s
public methods; unit tests use a small fake over real partition logs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from core.broker.errors import RequestTimedOutError, UnknownTopicOrPartitionError
from core.broker.replica.delayed import DataWatch
from core.broker.types import FetchResult, PartitionOffsets, TopicPartition
from core.storage.records import Record

if TYPE_CHECKING:  # the broker imports this module; no runtime cycle
    from core.broker.broker import Broker

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # offsets.load.buffer.size
LOAD_HW_WAIT_MS = 10_000  # how long a load waits for the HW to reach the log end


class GroupBackend(Protocol):
    """The broker as the group coordinator sees it. Event-loop only.

    Errors are the domain ones: ``NotLeaderOrFollowerError`` when this broker does not
    lead the offsets partition (the coordinator then answers NOT_COORDINATOR),
    ``UnknownTopicOrPartitionError`` for data partitions that do not exist,
    ``core.storage.errors.OffsetOutOfRangeError`` from ``fetch``.
    """

    offsets_topic_partitions: int  # offsets.topic.num.partitions (50)

    async def append_offsets(self, partition: int, batch: bytes) -> int:
        """Append one v2 batch to ``__consumer_offsets``-``partition`` with acks=all;
        the base offset once the high watermark has passed it."""
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
        decode: bool = True,
    ) -> FetchResult:
        """``Broker.fetch``: records from ``offset`` below the HW, at least one if any is
        there even above ``max_bytes``; waits up to ``max_wait_ms`` for data. With
        ``decode=False`` a result whose records carry ``chunks`` may leave them
        undecoded (``core.broker.replica.batch_cache.FetchedRecords``)."""
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


class BrokerGroupBackend:
    """:class:`GroupBackend` over a running :class:`Broker` (its public surface only)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.offsets_topic_partitions = int(broker.config["offsets.topic.num.partitions"])
        self._commit_timeout_ms = int(broker.config["offsets.commit.timeout.ms"])

    async def append_offsets(self, partition: int, batch: bytes) -> int:
        rm = self._broker.replica_manager
        assert rm is not None, "broker not started"
        info = await rm.append(
            TopicPartition(OFFSETS_TOPIC, partition),
            bytearray(batch),
            acks=-1,
            timeout_ms=self._commit_timeout_ms,
        )
        return int(info.first_offset)

    async def read_offsets(self, partition: int) -> AsyncIterator[Record]:
        b = self._broker
        rm = b.replica_manager
        assert rm is not None, "broker not started"
        # A new leader's log may end above its high watermark with commits that were
        # acknowledged by the old leader: wait (bounded) until the HW reaches the log end
        # it has now, as followers fetch, so the last commits are loaded (Kafka loads up
        # to the log end for the same reason).
        p = rm.leader_partition(TopicPartition(OFFSETS_TOPIC, partition))
        with contextlib.suppress(RequestTimedOutError):
            await rm.await_high_watermark(p, p.log.log_end_offset, LOAD_HW_WAIT_MS)
        offsets = await b.partition_offsets(OFFSETS_TOPIC, partition)
        offset = offsets.log_start_offset
        while offset < offsets.high_watermark:
            res = await b.fetch(OFFSETS_TOPIC, partition, offset, max_bytes=LOAD_BUFFER_BYTES)
            for record in res.records:
                yield record
            if res.next_offset <= offset:
                break
            offset = res.next_offset
            offsets = await b.partition_offsets(OFFSETS_TOPIC, partition)

    async def list_topics(self) -> list[str]:
        return await self._broker.list_topics()

    async def partition_count(self, topic: str) -> int | None:
        with contextlib.suppress(UnknownTopicOrPartitionError):
            return len((await self._broker.describe_topic(topic)).partitions)
        return None

    async def fetch(
        self, topic: str, partition: int, offset: int, *, max_bytes: int, max_wait_ms: int,
        decode: bool = True,
    ) -> FetchResult:
        return await self._broker.fetch(
            topic, partition, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
            decode=decode,
        )

    def data_watch(self, topic: str, partition: int) -> DataWatch | None:
        return self._broker.data_watch(topic, partition)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> int | None:
        return await self._broker.offset_for_timestamp(topic, partition, timestamp_ms)

    async def partition_offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return await self._broker.partition_offsets(topic, partition)
