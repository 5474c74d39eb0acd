"""Positions and reads of a consumer instance: where positions start (``reset_position``,
``edge_positions``, ``timestamp_positions``) and the long-poll read across partitions.

``read_instance`` gives every assigned partition a position (the committed offset, else
auto.offset.reset), reads with ``collect`` and moves the positions; it starts over when
a seek or a rebalance makes its plan stale, and waits for one when there is nothing to
read. ``collect`` rules (design.md section 10, beyond Confluent):

- First a pass without waiting over the partitions in the order given (the caller
  rotates it per read, so every partition gets to go first); if that finds enough,
  answer at once.
- Otherwise wait on every partition at the same time and wake on the first that has
  data (then read again), or when ``interrupt`` is set (a seek or an assignment
  change), or at the deadline. Partitions this broker leads are watched through their
  wait sets; partitions led elsewhere get one long-poll fetch each.
- Bytes are counted as key + value sizes. A record that would cross ``max_bytes`` is
  left for the next read, except that the first record is always taken, so a consumer
  makes progress whatever its ``max_bytes``.
- "Enough" is ``min_bytes`` (at least one record).

A partition whose position is out of range is reset through ``reset`` (the
instance's auto.offset.reset; it may raise). Partitions that fail with a retriable
error or that vanished are skipped for the rest of this read: the others keep being
served, and the next read tries the skipped one again (the Java consumer logs and
retries likewise). A partition skipped because its replica is offline
(KafkaStorageError: its log directory failed) is counted in ``OfflineSkips`` and
logged once, as a warning, until a read of it succeeds again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from core.broker.consumer.instance import InstanceState, PartitionChunk, PolledRecords
from core.broker.errors import (
    IllegalConsumerStateError,
    NoOffsetForPartitionError,
    UnknownTopicOrPartitionError,
)
from core.broker.group.backend import GroupBackend
from core.broker.group.group import CommittedOffset, Member
from core.broker.replica.batch_cache import FetchResult
from core.broker.replica.delayed import Flag, WaitSet, abandon, wake_or_timeout
from core.broker.types import TopicPartition
from core.errors import FranzError
from core.storage.errors import KafkaStorageError, OffsetOutOfRangeError

log = logging.getLogger(__name__)

ResetFn = Callable[[TopicPartition], Awaitable[int]]


class OfflineSkips:
    """Reads that skipped a partition because its replica is offline (one per read and
    partition), per partition since the broker started; ``total`` over all. The first
    skip of a partition is logged as a warning, and again only after a read of it
    succeeded in between. Event-loop only."""

    def __init__(self) -> None:
        self.counts: dict[TopicPartition, int] = {}
        self.total = 0
        self._failing: set[TopicPartition] = set()

    def skipped(self, tp: TopicPartition, exc: FranzError) -> None:
        self.counts[tp] = self.counts.get(tp, 0) + 1
        self.total += 1
        if tp not in self._failing:
            self._failing.add(tp)
            log.warning("consumer reads skip %s-%d: its replica is offline (%s); the other "
                        "partitions are still served, and each read tries it again",
                        tp.topic, tp.partition, exc)

    def served(self, tp: TopicPartition) -> None:
        if tp in self._failing:
            self._failing.discard(tp)
            log.info("consumer reads of %s-%d work again", tp.topic, tp.partition)


async def reset_position(backend: GroupBackend, tp: TopicPartition, policy: str) -> int:
    """Where auto.offset.reset ``policy`` puts a partition without a usable position."""
    if policy == "none":
        raise NoOffsetForPartitionError(
            f"No committed offset and no reset policy for partition {tp.topic}-{tp.partition}"
        )
    offsets = await backend.partition_offsets(tp.topic, tp.partition)
    return offsets.log_start_offset if policy == "earliest" else offsets.high_watermark


def check_assigned(member: Member, partitions: Iterable[TopicPartition]) -> None:
    """Positions exist only for assigned partitions (IllegalConsumerStateError)."""
    for tp in partitions:
        if TopicPartition(*tp) not in member.assignment:
            raise IllegalConsumerStateError(
                f"Illegal state: No current assignment for partition {tp[0]}-{tp[1]}"
            )


async def edge_positions(
    backend: GroupBackend, partitions: Iterable[TopicPartition], *, end: bool
) -> dict[TopicPartition, int]:
    """The log start (or the high watermark, ``end``) of each partition."""
    out = {}
    for tp in partitions:
        offsets = await backend.partition_offsets(tp[0], tp[1])
        out[TopicPartition(*tp)] = offsets.high_watermark if end else offsets.log_start_offset
    return out


async def timestamp_positions(
    backend: GroupBackend, timestamps: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The first offset with a timestamp >= the given one; the high watermark if none."""
    out = {}
    for tp, ts in timestamps.items():
        offset = await backend.offset_for_timestamp(tp[0], tp[1], int(ts))
        if offset is None:
            offset = (await backend.partition_offsets(tp[0], tp[1])).high_watermark
        out[TopicPartition(*tp)] = offset
    return out


@dataclass
class Collected:
    """A read's records in read order, as ``(partition, batch, lo, hi)`` ranges of fetched
    batches (``chunks``), and the positions after them (every planned partition)."""

    positions: dict[TopicPartition, int]
    chunks: list[PartitionChunk] = field(default_factory=list)
    count: int = 0  # records read
    size: int = 0  # their key + value bytes
    full: bool = False  # the byte cap stopped the read


class _Read:
    def __init__(
        self,
        backend: GroupBackend,
        start: Mapping[TopicPartition, int],
        *,
        max_bytes: int,
        min_bytes: int,
        reset: ResetFn,
        offline: OfflineSkips | None = None,
    ) -> None:
        self.backend = backend
        self.offline = offline
        self.out = Collected(dict(start))
        self.max_bytes = max(1, max_bytes)
        self.min_bytes = max(1, min_bytes)
        self.reset = reset
        self.skip: set[TopicPartition] = set()
        #: partitions read again because their high watermark was above the position
        #: when the read was about to wait, at that position
        self.rechecked: dict[TopicPartition, int] = {}

    @property
    def satisfied(self) -> bool:
        out = self.out
        return out.full or (out.count > 0 and out.size >= min(self.min_bytes, self.max_bytes))

    async def fetch(self, tp: TopicPartition, wait_ms: int) -> FetchResult | None:
        """One fetch of ``tp`` from its position; None (and bookkeeping) on errors."""
        budget = max(1, self.max_bytes - self.out.size)
        try:
            res = await self.backend.fetch(
                tp.topic,
                tp.partition,
                self.out.positions[tp],
                max_bytes=budget,
                max_wait_ms=wait_ms,
            )
        except OffsetOutOfRangeError:
            await self._reset(tp)
            return None
        except FranzError as exc:
            if isinstance(exc, UnknownTopicOrPartitionError) or exc.retriable:
                if isinstance(exc, KafkaStorageError) and self.offline is not None:
                    self.offline.skipped(tp, exc)
                else:
                    log.debug("read skips %s-%d: %s", tp.topic, tp.partition, exc)
                self.skip.add(tp)
                return None
            raise
        if self.offline is not None:
            self.offline.served(tp)
        return res

    async def _reset(self, tp: TopicPartition) -> None:
        old = self.out.positions[tp]
        self.out.positions[tp] = await self.reset(tp)
        log.info(
            "position of %s-%d out of range at %d, reset to %d",
            tp.topic,
            tp.partition,
            old,
            self.out.positions[tp],
        )
        return None

    def take(self, tp: TopicPartition, res: FetchResult) -> bool:
        """Add what fits of ``res``; True if the position moved. Records are cut with
        ``bisect`` on each batch's offsets and cumulative key + value sizes, never one
        by one: a record that would cross ``max_bytes`` stays for the next read, except
        the first record of the read."""
        out = self.out
        start = pos = out.positions[tp]
        complete = True
        for batch, lo, hi in res.chunks:
            offs = batch.offsets
            if offs[hi - 1] < pos:
                continue
            if offs[lo] < pos:
                lo = bisect_left(offs, pos, lo, hi)
            sizes = batch.cumulative_sizes()
            end = hi
            if out.size + sizes[hi] - sizes[lo] > self.max_bytes:
                # the longest run that fits; the first record of the read always goes
                end = bisect_right(sizes, sizes[lo] + self.max_bytes - out.size, lo, hi + 1) - 1
                if end <= lo and not out.count:
                    end = lo + 1
            if end > lo:
                out.chunks.append((tp, batch, lo, end))
                out.count += end - lo
                out.size += sizes[end] - sizes[lo]
                pos = offs[end - 1] + 1
            if end < hi:
                out.full, complete = True, False
                break
        if complete:
            pos = max(pos, res.next_offset)
        out.positions[tp] = pos
        return pos != start


async def collect(
    backend: GroupBackend,
    start: Mapping[TopicPartition, int],
    order: Sequence[TopicPartition],
    *,
    max_bytes: int,
    min_bytes: int,
    wait_ms: int,
    reset: ResetFn,
    interrupt: Flag | None = None,
    offline: OfflineSkips | None = None,
) -> Collected:
    """Read from the partitions of ``order`` starting at ``start``; see the module doc."""
    read = _Read(backend, start, max_bytes=max_bytes, min_bytes=min_bytes, reset=reset,
                 offline=offline)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, wait_ms) / 1000
    while True:
        for tp in order:
            if read.out.full:
                break
            if tp not in read.skip and (res := await read.fetch(tp, 0)) is not None:
                read.take(tp, res)
        remaining_ms = int((deadline - loop.time()) * 1000)
        if read.satisfied or remaining_ms <= 0 or (interrupt is not None and interrupt.is_set()):
            return read.out
        if not await _wait_for_data(read, order, remaining_ms, interrupt):
            return read.out
        if read.satisfied:
            return read.out


async def _wait_for_data(
    read: _Read, order: Sequence[TopicPartition], wait_ms: int, interrupt: Flag | None
) -> bool:
    """Wait for data on every partition at once. True when the caller should read
    again (a partition led here woke, or a long-poll moved a position), False on
    timeout, interruption, or nothing left to wait on.

    Partitions this broker leads cost no task: one wake-up future is parked on their
    wait sets and on ``interrupt``. Each partition led elsewhere gets a long-poll fetch
    (a task) whose end wakes the same future; its records are taken here."""
    watches: list[WaitSet] = []
    remote: list[TopicPartition] = []
    for tp in order:
        if tp in read.skip:
            continue
        watch = read.backend.data_watch(tp.topic, tp.partition)
        if watch is None:
            remote.append(tp)
            continue
        position = read.out.positions[tp]
        if watch.high_watermark > position and read.rechecked.get(tp) != position:
            # data came while the pass awaited something else: read again (once per
            # position, so a partition whose read does not move cannot spin the loop)
            read.rechecked[tp] = position
            return True
        watches.append(watch.waiters)
    if not watches and not remote:
        return False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    pending = {asyncio.ensure_future(read.fetch(tp, wait_ms)): tp for tp in remote}
    wake: asyncio.Future[object] = loop.create_future()
    try:
        while True:
            for ws in watches:
                ws.park(wake)
            if interrupt is not None:
                interrupt.park(wake)
            for task in pending:
                task.add_done_callback(partial(_wake_on_done, wake))
            woken = await wake_or_timeout(wake, deadline - loop.time())
            _unpark(wake, watches, interrupt)
            if not woken or (interrupt is not None and interrupt.is_set()):
                return False
            moved = False
            for task, tp in list(pending.items()):  # in plan order, for a stable record order
                if task.done():
                    del pending[task]
                    before = read.out.positions[tp]
                    res = task.result()
                    moved |= (res is not None and read.take(tp, res)) or (
                        read.out.positions[tp] != before)
            if moved or watches:
                return True
            if not pending:
                return False
            wake = loop.create_future()
    finally:
        _unpark(wake, watches, interrupt)
        for task in pending:
            abandon(task)


def _wake_on_done(wake: asyncio.Future[object], _task: asyncio.Future[Any]) -> None:
    if not wake.done():
        wake.set_result(None)


def _unpark(wake: asyncio.Future[object], watches: list[WaitSet], interrupt: Flag | None) -> None:
    for ws in watches:
        ws.discard(wake)
    if interrupt is not None:
        interrupt.discard(wake)


CommittedFn = Callable[[list[TopicPartition]], Awaitable[Mapping[TopicPartition, CommittedOffset]]]


async def plan_positions(
    backend: GroupBackend, committed: CommittedFn, member: Member, state: InstanceState
) -> list[TopicPartition]:
    """Give every assigned partition a position (committed offset, else the reset
    policy); the partitions to read, rotated for fairness."""
    for tp in [tp for tp in state.positions if tp not in member.assignment]:
        del state.positions[tp]
    missing = [tp for tp in member.assignment if tp not in state.positions]
    if missing:
        found = await committed(missing)
        for tp in missing:
            c = found.get(tp)
            try:
                if c is not None and c.offset >= 0:
                    position = state.auto_committed[tp] = c.offset
                else:
                    position = await reset_position(backend, tp, state.info.auto_offset_reset)
            except UnknownTopicOrPartitionError:
                continue
            if tp in member.assignment and tp not in state.positions:
                state.positions[tp] = position
    return state.rotated([tp for tp in member.assignment if tp in state.positions])


async def read_instance(
    backend: GroupBackend,
    committed: CommittedFn,
    member: Member,
    state: InstanceState,
    *,
    wait_ms: int,
    max_bytes: int,
    heartbeat: Callable[[], None],
    offline: OfflineSkips | None = None,
) -> PolledRecords:
    """One read for an instance (the caller holds ``state.poll_lock``): records as soon
    as there are any, else none after ``wait_ms``. ``heartbeat`` runs after each round,
    so a long read keeps the instance alive."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    policy = state.info.auto_offset_reset
    while True:
        state.changed.clear()
        order = await plan_positions(backend, committed, member, state)
        records = PolledRecords()
        if order:
            start = {tp: state.positions[tp] for tp in order}
            got = await collect(
                backend,
                start,
                order,
                max_bytes=max_bytes,
                min_bytes=state.info.fetch_min_bytes,
                wait_ms=max(0, int((deadline - loop.time()) * 1000)),
                reset=lambda tp: reset_position(backend, tp, policy),
                interrupt=state.changed,
                offline=offline,
            )
            records = state.apply_read(start, got.positions, got.chunks)
        heartbeat()
        remaining = deadline - loop.time()
        if records.count or remaining <= 0:
            return records
        if not state.changed.is_set():  # nothing to read yet, or every partition failed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state.changed.wait(), remaining)
            if not state.changed.is_set():
                return records
