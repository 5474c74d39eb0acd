"""The broker's own idempotent producer: every batch it writes on a client's behalf carries
a producer id, an epoch and sequence numbers, so an append it retries (the router's
retry after a leader failover, a forwarded call abandoned and sent again) is answered
by the leader's producer state with the original offsets instead of being written twice.

Kafka's producer keeps up to 5 batches in flight per partition and relies on the
broker caching the last 5. This broker may have many produce requests for one partition
in flight at once (one per HTTP connection), so it holds a pool of producer ids and
gives each in-flight append of a partition a producer id of its own (``Lease``): a
retried batch is then always the last batch of its producer id on that partition, the
one the leader's state is sure to recognise, whatever else was appended meanwhile.

Per (producer id, partition) the pool keeps the epoch and the next sequence. A lease
ends with ``done(records)`` (the append succeeded: the sequence moves on) or
``failed()`` (its outcome is unknown: the epoch of that partition is bumped, so the next
batch starts a new sequence at 0 whether or not the failed one was written; Kafka's
KIP-360 epoch bump). Producer ids come from the metadata store in blocks of 1000
(``ProducerIdSource``: ``/latest_producer_id_block`` in ZooKeeper, a row of the SQL
catalog standalone), never reused, also across restarts. Event-loop only.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from core.broker.types import TopicPartition

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_PRODUCERS = 64  # in-flight appends of one partition at once, at most
MAX_EPOCH = 32767  # int16; past it the producer id is retired
MAX_SEQUENCE = 2**31 - 1


class ProducerIdSource:
    """This broker's producer ids, a block at a time from ``allocate(count)`` (the
    metadata store's ``allocate_producer_ids`` bound to this broker)."""

    def __init__(self, allocate: Callable[[int], Awaitable[tuple[int, int]]], *,
                 block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self._allocate = allocate
        self._block_size = block_size
        self._next = 0
        self._end = -1  # inclusive
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                self._next, self._end = await self._allocate(self._block_size)
            pid = self._next
            self._next += 1
            return pid


@dataclass(slots=True)
class _PartitionSequence:
    epoch: int = 0
    next_sequence: int = 0


@dataclass(slots=True, eq=False)
class _Producer:
    producer_id: int
    partitions: dict[TopicPartition, _PartitionSequence] = field(default_factory=dict)
    busy: set[TopicPartition] = field(default_factory=set)


class Lease:
    """One append's producer id, epoch and first sequence on one partition."""

    __slots__ = ("_pool", "_producer", "_state", "_tp", "base_sequence", "producer_epoch",
                 "producer_id")

    def __init__(self, pool: GatewayProducers, producer: _Producer, tp: TopicPartition,
                 state: _PartitionSequence) -> None:
        self._pool = pool
        self._producer = producer
        self._tp = tp
        self._state = state
        self.producer_id = producer.producer_id
        self.producer_epoch = state.epoch
        self.base_sequence = state.next_sequence

    def done(self, records: int) -> None:
        """The append succeeded (or was a duplicate of one that did): ``records`` took
        sequences from ``base_sequence`` on."""
        self._state.next_sequence = (self.base_sequence + records) % (MAX_SEQUENCE + 1)
        self._pool._release(self._producer, self._tp)

    def failed(self) -> None:
        """The append's outcome is unknown or it failed: a new epoch for this partition
        (its sequence restarts at 0), so the next batch is accepted either way."""
        if self._state.epoch >= MAX_EPOCH:
            self._pool._retire(self._producer, self._tp)
        else:
            self._state.epoch += 1
            self._state.next_sequence = 0
            self._pool._release(self._producer, self._tp)


class GatewayProducers:
    """The pool of this broker's producer ids (module docstring)."""

    def __init__(self, source: ProducerIdSource, *, max_producers: int = MAX_PRODUCERS) -> None:
        self._source = source
        self._max = max_producers
        self._producers: list[_Producer] = []
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._retired: set[_Producer] = set()
        self._creating = 0

    @property
    def producer_ids(self) -> list[int]:
        return [p.producer_id for p in self._producers]

    async def lease(self, tp: TopicPartition) -> Lease:
        """A producer id with no append in flight on ``tp``; waits while all are busy."""
        while True:
            for producer in self._producers:
                if tp not in producer.busy and producer not in self._retired:
                    return self._take(producer, tp)
            if len(self._producers) + self._creating < self._max:
                self._creating += 1
                try:
                    producer = _Producer(await self._source.next_id())
                finally:
                    self._creating -= 1
                self._producers.append(producer)
                return self._take(producer, tp)
            freed = asyncio.get_running_loop().create_future()
            self._waiters.append(freed)
            await freed

    def _take(self, producer: _Producer, tp: TopicPartition) -> Lease:
        producer.busy.add(tp)
        state = producer.partitions.get(tp)
        if state is None:
            state = producer.partitions[tp] = _PartitionSequence()
        return Lease(self, producer, tp, state)

    def _release(self, producer: _Producer, tp: TopicPartition) -> None:
        producer.busy.discard(tp)
        if producer in self._retired and not producer.busy:
            self._producers.remove(producer)
            self._retired.discard(producer)
        while self._waiters:  # every waiter looks again (each wants its own partition)
            freed = self._waiters.popleft()
            if not freed.done():
                freed.set_result(None)

    def _retire(self, producer: _Producer, tp: TopicPartition) -> None:
        """The producer id ran out of epochs on a partition: no new leases; it leaves
        the pool once its last lease ends, and a fresh id takes its place."""
        self._retired.add(producer)
        self._release(producer, tp)
