"""Turning a list of produce records into appends: partition choice, batching, results.

Partition of each record: its own ``partition``, else the request's, else Kafka's
murmur2 hash of the key (so keyed records land where a Java producer puts them), else
one partition per request chosen round-robin (``UnkeyedPartitioner``). Records of one
partition become v2 batches no larger than the topic's ``max.message.bytes`` (a record
that cannot fit alone fails by itself with MESSAGE_TOO_LARGE); all batches of a
partition go to the log in one append. Partitions are appended concurrently, so
acks=all waits overlap. One result per input record, in input order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from core.broker.errors import UnknownPartitionError
from core.broker.metadata_cache import TopicMetadata
from core.broker.partitioner import UnkeyedPartitioner, partition_for_key
from core.broker.types import ProduceRecord, RecordResult, TopicPartition
from core.errors import FranzError
from core.storage.batch import HEADER_SIZE
from core.storage.errors import MessageTooLargeError
from core.storage.log import AppendInfo
from core.storage.records import build_batch_from_tuples

AppendFn = Callable[[TopicPartition, bytearray, int, int], Awaitable[AppendInfo]]

_unkeyed = UnkeyedPartitioner()
# Upper bound of a record's framing inside a batch (length, attributes, deltas, key and
# value lengths, header count), so size estimates never undershoot.
_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_OVERHEAD = 10


def _estimated_size(r: ProduceRecord) -> int:
    size = _RECORD_OVERHEAD + (len(r.key) if r.key else 0) + (len(r.value) if r.value else 0)
    for k, v in r.headers:
        size += _HEADER_OVERHEAD + len(k.encode()) + (len(v) if v else 0)
    return size


def choose_partitions(
    topic: str, meta: TopicMetadata, records: Sequence[ProduceRecord], default_partition: int | None
) -> dict[int, list[int]]:
    """partition -> indexes of the records going there."""
    n = meta.num_partitions
    unkeyed: int | None = None
    out: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        p = r.partition if r.partition is not None else default_partition
        if p is None:
            if r.key is not None:
                p = partition_for_key(r.key, n)
            else:
                if unkeyed is None:
                    unkeyed = _unkeyed.next_partition(topic, n)
                p = unkeyed
        elif p < 0 or p >= n:
            raise UnknownPartitionError(
                f"Partition {p} of topic '{topic}' not found: the topic has {n} partition(s)")
        out.setdefault(p, []).append(i)
    return out


async def produce_to_topic(
    append: AppendFn, topic: str, meta: TopicMetadata, records: Sequence[ProduceRecord], *,
    default_partition: int | None, acks: int, timeout_ms: int, now_ms: int,
) -> list[RecordResult]:
    by_partition = choose_partitions(topic, meta, records, default_partition)
    results: list[RecordResult | None] = [None] * len(records)
    limit = meta.log_config.max_message_bytes
    jobs = [
        _produce_partition(append, TopicPartition(topic, p), idxs, records, results,
                           limit=limit, acks=acks, timeout_ms=timeout_ms, now_ms=now_ms)
        for p, idxs in by_partition.items()
    ]
    if len(jobs) == 1:
        await jobs[0]
    else:
        await asyncio.gather(*jobs)
    return results  # type: ignore[return-value]


async def _produce_partition(
    append: AppendFn, tp: TopicPartition, idxs: list[int], records: Sequence[ProduceRecord],
    results: list[RecordResult | None], *, limit: int, acks: int, timeout_ms: int, now_ms: int,
) -> None:
    batches: list[list[int]] = []
    current: list[int] = []
    size = HEADER_SIZE
    for i in idxs:
        est = _estimated_size(records[i])
        if HEADER_SIZE + est > limit:
            results[i] = RecordResult(None, None, None, MessageTooLargeError(
                f"The record is about {HEADER_SIZE + est} bytes, larger than the topic's "
                f"max.message.bytes={limit}"))
            continue
        if current and size + est > limit:
            batches.append(current)
            current, size = [], HEADER_SIZE
        current.append(i)
        size += est
    if current:
        batches.append(current)
    if not batches:
        return
    data = bytearray()
    for batch in batches:
        data += build_batch_from_tuples(
            (records[i].key, records[i].value, records[i].headers,
             now_ms if records[i].timestamp is None else records[i].timestamp) for i in batch)
    order = [i for batch in batches for i in batch]
    try:
        info = await append(tp, data, acks, timeout_ms)
    except FranzError as exc:
        for i in order:
            results[i] = RecordResult(None, None, None, exc)
        return
    append_time = info.log_append_time if info.log_append_time >= 0 else None
    for k, i in enumerate(order):
        ts = append_time if append_time is not None else (
            now_ms if records[i].timestamp is None else records[i].timestamp)
        results[i] = RecordResult(tp.partition, info.first_offset + k, ts)
