"""Turning a list of produce records into appends: partition choice, batching, results.

Partition of each record: its own ``partition``, else the request's, else Kafka's
murmur2 hash of the key (so keyed records land where a Java producer puts them), else
one partition per request chosen round-robin (``UnkeyedPartitioner``). Records of one
partition become v2 batches no larger than the topic's ``max.message.bytes`` (a record
that cannot fit alone fails by itself with MESSAGE_TOO_LARGE); all batches of a
partition go to the log in one append. A keyed request's records are grouped by
partition and each partition's batch written in one pass in C (``key_partitions``,
``build_batch_at``); its partitions are appended together (``append_many``: those led
here one after the other with no event-loop step between them, acks=all waits
overlapping). One result per input record, in input order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from itertools import repeat
from typing import Protocol, TypeVar

from core.broker.errors import UnknownPartitionError
from core.broker.metadata.cache import TopicMetadata
from core.broker.produce.idempotence import GatewayProducers
from core.broker.produce.partitioner import (
    UnkeyedPartitioner,
    key_partitions,
    partition_for_key,
)
from core.broker.types import ProduceColumns, ProduceRecord, ProduceResults, TopicPartition
from core.errors import FranzError
from core.storage.batch import HEADER_SIZE, set_producer
from core.storage.errors import MessageTooLargeError
from core.storage.log import AppendInfo
from core.storage.native import NO_PRODUCER
from core.storage.records import (
    build_batch_at,
    build_batch_from_columns,
    build_batch_from_tuples,
)

T = TypeVar("T")
# Upper bound of a record's framing inside a batch (length, attributes, deltas, key and
# value lengths, header count), so size estimates never undershoot.
_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_OVERHEAD = 10
_consume: Callable[[object], object] = partial(deque, maxlen=0)  # drain an iterator, in C


class ProducerLease(Protocol):
    """One append's producer id, epoch and first sequence (``idempotence.Lease``)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int

    def done(self, records: int) -> None: ...

    def failed(self) -> None: ...


class LeaseSource(Protocol):
    """Producer ids for appends: the broker's pool (``GatewayProducers``) or one
    Idempotency-Key claim's (``core.broker.idempotency.producer``)."""

    async def lease(self, tp: TopicPartition) -> ProducerLease: ...


class PartitionRotation(Protocol):
    """The partition of a request's records without key or partition
    (``UnkeyedPartitioner``)."""

    def next_partition(self, topic: str, num_partitions: int) -> int: ...


class AppendTarget(Protocol):
    """Where a partition's batches go (``core.broker.cluster.router.Router``)."""

    async def append(self, tp: TopicPartition, data: bytearray, *, acks: int,
                     timeout_ms: int) -> AppendInfo: ...

    async def append_many(self, items: Sequence[tuple[TopicPartition, bytearray]], *,
                          acks: int, timeout_ms: int) -> list[AppendInfo | FranzError]:
        """Several partitions' batches at once; one AppendInfo or error per item."""
        ...


class Producer:
    """One broker's produce path. It keeps the round-robin state of unkeyed records per
    topic (``UnkeyedPartitioner``), so two brokers in one process never share it."""

    def __init__(self, target: AppendTarget, *,
                 unkeyed: UnkeyedPartitioner | None = None,
                 producers: GatewayProducers | None = None) -> None:
        self._target = target
        self._unkeyed = unkeyed or UnkeyedPartitioner()
        self._producers = producers

    async def produce(
        self, topic: str, meta: TopicMetadata, records: Sequence[ProduceRecord], *,
        default_partition: int | None, acks: int, timeout_ms: int, now_ms: int,
    ) -> ProduceResults:
        """One result per record, in input order, as a ``ProduceResults`` (a read-only
        sequence of RecordResult)."""
        return await produce_to_topic(
            self._target, self._unkeyed, topic, meta, records,
            default_partition=default_partition, acks=acks, timeout_ms=timeout_ms,
            now_ms=now_ms, producers=self._producers)


def choose_partitions(
    unkeyed_partitioner: PartitionRotation, topic: str, num_partitions: int,
    records: Sequence[ProduceRecord], default_partition: int | None
) -> dict[int, list[int]]:
    """partition -> indexes of the records going there."""
    cols = ProduceColumns.of(records)
    n = num_partitions
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
    unkeyed: PartitionRotation, topic: str, n: int, cols: ProduceColumns,
    default_partition: int | None
) -> dict[int, Sequence[int]]:
    """``choose_partitions`` over columns (``n`` partitions); no per-record work when no
    record names a partition and either the request does or no record has a key."""
    # one partition: every record goes to it, key or not (no hashing of the keys)
    keyed = n > 1 and cols.keys is not None and any(k is not None for k in cols.keys)
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
    out: dict[int, Sequence[int]]
    if cols.partitions is None and default_partition is None and cols.keys is not None:
        out = dict(key_partitions(cols.keys, n))  # the keyed request: one pass in C
        nulls = out.pop(-1, None)
        if nulls is not None:  # records without a key share this request's partition
            p = unkeyed.next_partition(topic, n)
            same = out.get(p)
            out[p] = nulls if same is None else sorted([*same, *nulls])
    else:
        out = dict(choose_partitions(unkeyed, topic, n, cols, default_partition))
    if len(out) == 1:
        (p,) = out
        out[p] = range(len(cols))
    return out


async def produce_to_topic(
    target: AppendTarget, unkeyed: PartitionRotation, topic: str, meta: TopicMetadata,
    records: Sequence[ProduceRecord], *,
    default_partition: int | None, acks: int, timeout_ms: int, now_ms: int,
    producers: LeaseSource | None = None, num_partitions: int | None = None,
) -> ProduceResults:
    """``Producer.produce`` with its collaborators as arguments. ``num_partitions``: the
    partition count records are spread over (default: the topic's)."""
    cols = ProduceColumns.of(records)
    if not len(cols):
        return ProduceResults(None, [], None)
    n = meta.num_partitions if num_partitions is None else num_partitions
    by_partition = _choose_columns(unkeyed, topic, n, cols, default_partition)
    limit = meta.log_config.max_message_bytes
    parts: list[_PartitionResult] = []
    items: list[tuple[TopicPartition, bytearray]] = []
    leases: list[ProducerLease] = []  # idempotent: a retried append is never written twice
    try:
        for p, idxs in by_partition.items():  # every batch built before anything is appended
            tp = TopicPartition(topic, p)
            lease = None if producers is None else await producers.lease(tp)
            if lease is not None:
                leases.append(lease)
            part, data = _prepare_partition(p, idxs, cols, limit=limit, now_ms=now_ms,
                                            lease=lease)
            parts.append(part)
            if data is not None:
                items.append((tp, data))
            elif lease is not None:  # every record failed alone: no sequence taken
                leases.pop().done(0)
        outcomes = await _append(target, items, acks=acks, timeout_ms=timeout_ms)
    except BaseException:
        for lease in leases:
            lease.failed()
        raise
    appending = [part for part in parts if part.order]
    for i, (part, outcome) in enumerate(zip(appending, outcomes, strict=True)):
        part.finish(outcome, cols, now_ms)
        if leases:
            if isinstance(outcome, FranzError):
                leases[i].failed()
            else:
                leases[i].done(len(part.order))
    total = len(cols)
    if len(parts) == 1:
        only = parts[0]
        if not only.errors and only.order == range(total) and only.first_offset is not None:
            return ProduceResults(only.partition, range(only.first_offset,
                                                        only.first_offset + total),
                                  only.timestamps)
    runs = [(part.partition, part.first_offset, part.order) for part in parts
            if part.first_offset is not None]
    # one timestamp for every record (the usual "now"; failed records read None), or
    # one per record
    stamps = [part.timestamps for part in parts if part.first_offset is not None]
    timestamps: int | list[int | None] | None = [None] * total
    first = stamps[0] if stamps else None
    if (isinstance(first, int) and all(isinstance(ts, int) for ts in stamps)
            and len(set(stamps)) == 1):
        timestamps = first
    errors: dict[int, FranzError] = {}
    for part in parts:
        errors.update(part.errors)
        if type(timestamps) is list and part.first_offset is not None:
            ts, order = part.timestamps, part.order
            _consume(map(timestamps.__setitem__, order,
                         ts if isinstance(ts, list) else repeat(ts, len(order))))
    return ProduceResults.scattered(total, runs, timestamps, errors)


async def _append(target: AppendTarget, items: list[tuple[TopicPartition, bytearray]], *,
                  acks: int, timeout_ms: int) -> list[AppendInfo | FranzError]:
    """One outcome per item: a partition's append, or a keyed request's partitions in
    one pass (``append_many``)."""
    if len(items) == 1:
        try:
            return [await target.append(*items[0], acks=acks, timeout_ms=timeout_ms)]
        except FranzError as exc:
            return [exc]
    if items:
        return await target.append_many(items, acks=acks, timeout_ms=timeout_ms)
    return []


class _PartitionResult:
    """The outcome of one partition's append: the record indexes in log order from
    ``first_offset`` (None when nothing was appended), their timestamps (one for all, or
    one per record in ``order``), and the records that failed."""

    __slots__ = ("errors", "first_offset", "order", "partition", "timestamps")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.order: Sequence[int] = ()  # the records appended, in log order
        self.first_offset: int | None = None
        self.timestamps: int | list[int] | None = None
        self.errors: dict[int, FranzError] = {}

    def finish(self, outcome: AppendInfo | FranzError, cols: ProduceColumns,
               now_ms: int) -> None:
        """Take the append's outcome: offsets and timestamps, or the error of every
        record of ``order``."""
        if isinstance(outcome, FranzError):
            for i in self.order:
                self.errors[i] = outcome
            self.order = ()
            return
        self.first_offset = outcome.first_offset
        if outcome.log_append_time >= 0:
            self.timestamps = outcome.log_append_time
        elif outcome.duplicate and cols.timestamps is None:  # the original batch's "now"
            self.timestamps = outcome.max_timestamp
        elif cols.timestamps is None:
            self.timestamps = now_ms
        else:
            self.timestamps = list(map(_timestamps(cols, now_ms), self.order))


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


def _prepare_partition(partition: int, idxs: Sequence[int], cols: ProduceColumns, *,
                       limit: int, now_ms: int, lease: ProducerLease | None
                       ) -> tuple[_PartitionResult, bytearray | None]:
    """The batches of one partition's records (None when every record failed alone),
    stamped with ``lease``'s producer id, epoch and sequences, and its result, ``order``
    set to the records in the batches."""
    result = _PartitionResult(partition)
    producer = NO_PRODUCER if lease is None else (
        lease.producer_id, lease.producer_epoch, lease.base_sequence)
    # One pass in C over the columns (keys, headers, timestamps) when the batch fits.
    data = build_batch_at(cols.values, cols.keys, cols.headers, cols.timestamps, now_ms, idxs,
                          max_bytes=limit, producer=producer)
    batches: list[Sequence[int]]
    if data is not None:
        batches = [idxs]
    else:
        batches, data = _general_batches(cols, idxs, limit, now_ms, result)
        if not batches:
            return result, None
        if lease is not None:
            set_producer(data, *producer)
    result.order = batches[0] if len(batches) == 1 else [i for b in batches for i in b]
    return result, data


def _general_batches(cols: ProduceColumns, idxs: Sequence[int], limit: int, now_ms: int,
                     result: _PartitionResult) -> tuple[list[Sequence[int]], bytearray]:
    """The batches of ``idxs`` through the codec's builder: records split into batches of
    at most ``limit`` bytes (a record too large alone fails in ``result``), any column
    content the builder takes. ([], b"") when every record failed."""
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
        data = bytearray()
        v, k, h = cols.values, cols.keys, cols.headers
        ts = _timestamps(cols, now_ms)
        for batch in batches:
            data += build_batch_from_tuples(
                (None if k is None else k[i], v[i], [] if h is None else h[i], ts(i))
                for i in batch)
    return batches, data


def _timestamps(cols: ProduceColumns, now_ms: int) -> Callable[[int], int]:
    """index -> the record's timestamp (its own, else ``now_ms``)."""
    stamps = cols.timestamps

    def timestamp(i: int) -> int:
        t = None if stamps is None else stamps[i]
        return now_ms if t is None else t

    return timestamp
