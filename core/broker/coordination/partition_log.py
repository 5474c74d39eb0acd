"""The partition writer of the coordinator runtime: a partition of an internal topic as
its leader's coordinator uses it: append a batch (fenced by the leader epoch the
coordinator's state was loaded at), read everything up to the high watermark (loading),
read one record back.

Coordinators (consumer groups over ``__consumer_offsets``, the Schema Registry over
``_schemas``, Idempotency-Keys over ``__franz_idempotency``) serve the partitions this
broker leads and keep an in-memory view built from them; every call here is local and
raises ``NotLeaderOrFollowerError`` when this broker does not lead the partition (the
caller's cue that it is not the coordinator). Event-loop only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from core.broker.errors import RequestTimedOutError
from core.broker.replica.batch_cache import BatchCache, FetchResult
from core.broker.replica.manager import ReplicaManager
from core.broker.types import TopicPartition
from core.storage.records import Record

LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # offsets.load.buffer.size
LOAD_HW_WAIT_MS = 10_000  # how long a load waits for the HW to reach the log end


class InternalTopicLog:
    """``topic``'s partitions led here."""

    def __init__(self, replicas: ReplicaManager, batches: BatchCache, topic: str) -> None:
        self._replicas = replicas
        self._batches = batches
        self.topic = topic

    def leader_epoch(self, partition: int) -> int:
        """The leader epoch of ``partition``, which this broker leads (else
        ``NotLeaderOrFollowerError``): a view loaded under another epoch may have missed
        records another leader wrote meanwhile."""
        return self._replicas.leader_partition(TopicPartition(self.topic, partition)).leader_epoch

    async def append(self, partition: int, batch: bytes, *, acks: int, timeout_ms: int,
                     leader_epoch: int | None = None) -> int:
        """The base offset of ``batch`` once appended (acks=all: once the HW passed it);
        with ``leader_epoch``, refused (``NotLeaderOrFollowerError``) unless this broker
        leads the partition at that epoch."""
        info = await self._replicas.append(TopicPartition(self.topic, partition),
                                           bytearray(batch), acks=acks, timeout_ms=timeout_ms,
                                           leader_epoch=leader_epoch)
        return int(info.first_offset)

    async def _fetch(self, partition: int, offset: int, max_bytes: int) -> FetchResult:
        tp = TopicPartition(self.topic, partition)
        data, p = await self._replicas.fetch(tp, offset, max_bytes=max_bytes, max_wait_ms=0)
        offsets = p.offsets()
        return self._batches.fetch_result(self.topic, partition, offset, data,
                                          high_watermark=offsets.high_watermark,
                                          log_start_offset=offsets.log_start_offset)

    async def read(self, partition: int) -> AsyncIterator[Record]:
        """Every record from the log start to the high watermark, in order.

        A new leader's log may end above its high watermark with records the old leader
        acknowledged: the read first waits (bounded) until the HW reaches the log end it
        has now, as followers fetch, so the last of them are read too (Kafka loads up to
        the log end for the same reason)."""
        rm = self._replicas
        p = rm.leader_partition(TopicPartition(self.topic, partition))
        with contextlib.suppress(RequestTimedOutError):
            await rm.await_high_watermark(p, p.log.log_end_offset, LOAD_HW_WAIT_MS)
        offset = p.offsets().log_start_offset
        while offset < p.offsets().high_watermark:
            res = await self._fetch(partition, offset, LOAD_BUFFER_BYTES)
            for record in res.records:
                yield record
            if res.next_offset <= offset:
                break
            offset = res.next_offset

    async def read_at(self, partition: int, offset: int) -> Record | None:
        """The record at ``offset`` (None when retention or compaction removed it)."""
        res = await self._fetch(partition, offset, 1)
        for record in res.records:
            if record.offset == offset:
                return record
            if record.offset > offset:
                break
        return None
