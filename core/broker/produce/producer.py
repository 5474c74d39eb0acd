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
from itertools import repeat
from typing import Protocol, TypeVar

from core.broker.errors import UnknownPartitionError
from core.broker.metadata.cache import TopicMetadata
from core.broker.produce.partitioner import UnkeyedPartitioner, partition_for_key
from core.broker.types import ProduceColumns, ProduceRecord, ProduceResults, TopicPartition
from core.errors import FranzError
from core.storage.batch import HEADER_SIZE
from core.storage.errors import MessageTooLargeError
from core.storage.log import AppendInfo
from core.storage.records import build_batch_from_columns, build_batch_from_tuples

T = TypeVar("T")
# Upper bound of a record's framing inside a batch (length, attributes, deltas, key and
# value lengths, header count), so size estimates never undershoot.
_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_OVERHEAD = 10


class AppendTarget(Protocol):
    """Where a partition's batches go (``core.broker.cluster.router.Router``)."""

    async def append(self, tp: TopicPartition, data: bytearray, *, acks: int,
                     timeout_ms: int) -> AppendInfo: ...


class Producer:
    """One broker's produce path. It keeps the round-robin state of unkeyed records per
    topic (``UnkeyedPartitioner``), so two brokers in one process never share it."""

    def __init__(self, target: AppendTarget, *,
                 unkeyed: UnkeyedPartitioner | None = None) -> None:
        self._target = target
        self._unkeyed = unkeyed or UnkeyedPartitioner()

    async def produce(
        self, topic: str, meta: TopicMetadata, records: Sequence[ProduceRecord], *,
        default_partition: int | None, acks: int, timeout_ms: int, now_ms: int,
    ) -> ProduceResults:
        """One result per record, in input order, as a ``ProduceResults`` (a read-only
        sequence of RecordResult)."""
        return await produce_to_topic(
            self._target.append, self._unkeyed, topic, meta, records,
            default_partition=default_partition, acks=acks, timeout_ms=timeout_ms,
            now_ms=now_ms)


AppendFn = Callable[..., Awaitable[AppendInfo]]  # Router.append's signature


def choose_partitions(
    unkeyed_partitioner: UnkeyedPartitioner, topic: str, meta: TopicMetadata,
    records: Sequence[ProduceRecord], default_partition: int | None
) -> dict[int, list[int]]:
    """partition -> indexes of the records going there."""
    cols = ProduceColumns.of(records)
    n = meta.num_partitions
    unkeyed: int | None = None
    hashed: dict[bytes, int] = {}
    out: dict[int, list[int]] = {}
    count = len(cols)
    own = repeat(None, count) if cols.partitions is None else cols.partitions
    keys = repeat(None, count) if cols.keys is None else cols.keys
    for i, (p, key) in enumerate(zip(own, keys, strict=True)):
        if p is None:
            p = default_partition
        if p is None:
            if key is not None:
                p = hashed.get(key)
                if p is None:
                    p = hashed[key] = partition_for_key(key, n)
            else:
                if unkeyed is None:
                    unkeyed = unkeyed_partitioner.next_partition(topic, n)
                p = unkeyed
        elif p < 0 or p >= n:
            raise UnknownPartitionError(
                f"Partition {p} of topic '{topic}' not found: the topic has {n} partition(s)")
        idxs = out.get(p)
        if idxs is None:
            out[p] = [i]
        else:
            idxs.append(i)
    return out


def _choose_columns(
    unkeyed: UnkeyedPartitioner, topic: str, meta: TopicMetadata, cols: ProduceColumns,
    default_partition: int | None
) -> dict[int, Sequence[int]]:
    """``choose_partitions`` over columns; no per-record work when no record names a
    partition and either the request does or no record has a key."""
    n = meta.num_partitions
    keyed = cols.keys is not None and any(k is not None for k in cols.keys)
    if cols.partitions is None and (default_partition is not None or not keyed):
        if default_partition is None:
            p = unkeyed.next_partition(topic, n)
        elif 0 <= default_partition < n:
            p = default_partition
        else:
            raise UnknownPartitionError(
                f"Partition {default_partition} of topic '{topic}' not found: the topic has "
                f"{n} partition(s)")
        return {p: range(len(cols))}
    out: dict[int, Sequence[int]] = dict(
        choose_partitions(unkeyed, topic, meta, cols, default_partition))
    if len(out) == 1:
        (p,) = out
        out[p] = range(len(cols))
    return out


async def produce_to_topic(
    append: AppendFn, unkeyed: UnkeyedPartitioner, topic: str, meta: TopicMetadata,
    records: Sequence[ProduceRecord], *,
    default_partition: int | None, acks: int, timeout_ms: int, now_ms: int,
) -> ProduceResults:
    """``Producer.produce`` with its collaborators as arguments."""
    cols = ProduceColumns.of(records)
    if not len(cols):
        return ProduceResults(None, [], None)
    by_partition = _choose_columns(unkeyed, topic, meta, cols, default_partition)
    limit = meta.log_config.max_message_bytes
    jobs = [
        _produce_partition(append, TopicPartition(topic, p), idxs, cols,
                           limit=limit, acks=acks, timeout_ms=timeout_ms, now_ms=now_ms)
        for p, idxs in by_partition.items()
    ]
    parts = [await jobs[0]] if len(jobs) == 1 else list(await asyncio.gather(*jobs))
    total = len(cols)
    if len(parts) == 1:
        only = parts[0]
        if not only.errors and only.order == range(total) and only.first_offset is not None:
            return ProduceResults(only.partition, range(only.first_offset,
                                                        only.first_offset + total),
                                  only.timestamps)
    partitions: list[int | None] = [None] * total
    offsets: list[int | None] = [None] * total
    timestamps: list[int | None] = [None] * total
    errors: dict[int, FranzError] = {}
    for part in parts:
        errors.update(part.errors)
        if part.first_offset is None:
            continue
        ts = part.timestamps
        for k, i in enumerate(part.order):
            partitions[i] = part.partition
            offsets[i] = part.first_offset + k
            timestamps[i] = ts if ts is None or isinstance(ts, int) else ts[k]
    return ProduceResults(partitions, offsets, timestamps, errors)


class _PartitionResult:
    """The outcome of one partition's append: the record indexes in log order from
    ``first_offset`` (None when nothing was appended), their timestamps (one for all, or
    one per record in ``order``), and the records that failed."""

    __slots__ = ("errors", "first_offset", "order", "partition", "timestamps")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.order: Sequence[int] = ()
        self.first_offset: int | None = None
        self.timestamps: int | list[int] | None = None
        self.errors: dict[int, FranzError] = {}


def _pick(column: Sequence[T], idxs: Sequence[int]) -> Sequence[T]:
    """``[column[i] for i in idxs]`` without a Python loop when idxs is a range."""
    if isinstance(idxs, range):
        if idxs.step == 1 and idxs.start == 0 and idxs.stop == len(column):
            return column
        return column[idxs.start:idxs.stop:idxs.step]
    return [column[i] for i in idxs]


def _estimated_sizes(cols: ProduceColumns, idxs: Sequence[int]) -> list[int]:
    values, keys, headers = cols.values, cols.keys, cols.headers
    out = []
    for i in idxs:
        v = values[i]
        k = None if keys is None else keys[i]
        size = _RECORD_OVERHEAD + (len(k) if k else 0) + (len(v) if v else 0)
        if headers is not None:
            for hk, hv in headers[i]:
                size += _HEADER_OVERHEAD + len(hk.encode()) + (len(hv) if hv else 0)
        out.append(size)
    return out


def _split(idxs: Sequence[int], sizes: list[int], limit: int, result: _PartitionResult
           ) -> list[list[int]]:
    """Batches of at most ``limit`` estimated bytes; records too large alone fail."""
    batches: list[list[int]] = []
    current: list[int] = []
    size = HEADER_SIZE
    for i, est in zip(idxs, sizes, strict=True):
        if HEADER_SIZE + est > limit:
            result.errors[i] = MessageTooLargeError(
                f"The record is about {HEADER_SIZE + est} bytes, larger than the topic's "
                f"max.message.bytes={limit}")
            continue
        if current and size + est > limit:
            batches.append(current)
            current, size = [], HEADER_SIZE
        current.append(i)
        size += est
    if current:
        batches.append(current)
    return batches


async def _produce_partition(
    append: AppendFn, tp: TopicPartition, idxs: Sequence[int], cols: ProduceColumns, *,
    limit: int, acks: int, timeout_ms: int, now_ms: int,
) -> _PartitionResult:
    result = _PartitionResult(tp.partition)
    values = _pick(cols.values, idxs)
    keys = None if cols.keys is None else _pick(cols.keys, idxs)
    headers = None if cols.headers is None else _pick(cols.headers, idxs)
    stamps = None if cols.timestamps is None else _pick(cols.timestamps, idxs)
    if stamps is not None and all(t is None for t in stamps):
        stamps = None
    # Fast estimate: the sum of key and value sizes plus the framing bound of each record.
    kv = sum(map(len, filter(None, values))) + (0 if keys is None else sum(map(len, filter(None, keys))))
    if headers is None and HEADER_SIZE + kv + _RECORD_OVERHEAD * len(values) <= limit:
        batches: list[Sequence[int]] = [idxs]
        data = build_batch_from_columns(values, keys, None, now_ms if stamps is None else [
            now_ms if t is None else t for t in stamps])
    else:
        batches = list(_split(idxs, _estimated_sizes(cols, idxs), limit, result))
        if not batches:
            return result
        data = bytearray()
        v, k, h = cols.values, cols.keys, cols.headers
        ts = _timestamps(cols, now_ms)
        for batch in batches:
            data += build_batch_from_tuples(
                (None if k is None else k[i], v[i], [] if h is None else h[i], ts(i))
                for i in batch)
    order: Sequence[int] = batches[0] if len(batches) == 1 else [i for b in batches for i in b]
    try:
        info = await append(tp, data, acks=acks, timeout_ms=timeout_ms)
    except FranzError as exc:
        for i in order:
            result.errors[i] = exc
        return result
    result.order = order
    result.first_offset = info.first_offset
    if info.log_append_time >= 0:
        result.timestamps = info.log_append_time
    elif cols.timestamps is None:
        result.timestamps = now_ms
    else:
        result.timestamps = list(map(_timestamps(cols, now_ms), order))
    return result


def _timestamps(cols: ProduceColumns, now_ms: int) -> Callable[[int], int]:
    """index -> the record's timestamp (its own, else ``now_ms``)."""
    stamps = cols.timestamps

    def timestamp(i: int) -> int:
        t = None if stamps is None else stamps[i]
        return now_ms if t is None else t

    return timestamp
