"""The coordinator runtime: which internal-topic partitions a coordinator serves here, at
which leader epoch, and their state (a *shard*).

Kafka's ``coordinator-common`` shape, shared by the consumer groups
(``__consumer_offsets``), the Schema Registry (``_schemas``) and Idempotency-Keys
(``__franz_idempotency``). Each coordinator keeps only its own rules: how a shard is
loaded from the log (``load``), what installing and dropping one means (``loaded`` /
``unloaded``); the runtime does the rest:

- A shard belongs to one (partition, leader epoch). It is loaded when this broker's
  replica becomes leader at epoch E (``on_role_change``, with ``eager``) or on first use,
  and a call gets the shard of the epoch the replica leads at *now*, waiting for its load.
- When the replica resigns (a follower again, fenced after a lost ZooKeeper session,
  removed) or leads at another epoch, the shard is dropped before anything reads it
  again: a broker whose partition moved away and came back reloads from the log instead
  of serving (and writing back) the view it had before.
- A shard's writes carry its epoch and the leader's log refuses an append under another
  one (``ReplicaManager.append(leader_epoch=...)``), so nothing decided on a stale view
  reaches the log; the refusal drops the shard.
- Not the leader: :class:`NotCoordinatorError` (callers find the new coordinator);
  still loading: callers wait, or :class:`CoordinatorLoadInProgressError` when they
  cannot.

Event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from core.broker.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedLeaderEpochError,
    LeaderNotAvailableError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from core.storage.records import Record

log = logging.getLogger(__name__)

S = TypeVar("S")
_NOT_LEADER = (NotLeaderOrFollowerError, UnknownTopicOrPartitionError, FencedLeaderEpochError)
#: Loads one call starts at most when the epoch keeps moving while it loads.
MAX_LOAD_ROUNDS = 3


class PartitionWriter(Protocol):
    """An internal topic's partitions as the leader's coordinator uses them
    (``partition_log.InternalTopicLog``). ``leader_epoch`` and ``read`` raise
    ``NotLeaderOrFollowerError`` where this broker does not lead; ``append`` also when
    it leads at another epoch than ``leader_epoch``."""

    topic: str

    def leader_epoch(self, partition: int) -> int: ...
    async def append(self, partition: int, batch: bytes, *, acks: int, timeout_ms: int,
                     leader_epoch: int | None = None) -> int: ...
    def read(self, partition: int) -> AsyncIterator[Record]: ...


@dataclass(eq=False, slots=True)
class Shard(Generic[S]):
    """A coordinator's state of ``partition`` as loaded at leader ``epoch``."""

    partition: int
    epoch: int
    state: S


class _Slot(Generic[S]):
    __slots__ = ("epoch", "shard", "task")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.shard: Shard[S] | None = None
        self.task: asyncio.Task[None] | None = None


class CoordinatorRuntime(Generic[S]):
    """The shards of ``writer``'s partitions led here. ``load(partition, epoch)`` reads a
    shard's state from the log (through ``writer.read``); ``loaded(shard)`` and
    ``unloaded(shard)`` hear of a shard installed and dropped; ``eager``: load as soon as
    the replica becomes leader (else on first use)."""

    def __init__(self, writer: PartitionWriter, load: Callable[[int, int], Awaitable[S]], *,
                 loaded: Callable[[Shard[S]], None] | None = None,
                 unloaded: Callable[[Shard[S]], None] | None = None,
                 eager: bool = False) -> None:
        self.writer = writer
        self.topic = writer.topic
        self._load = load
        self._loaded = loaded
        self._unloaded = unloaded
        self._eager = eager
        self._slots: dict[int, _Slot[S]] = {}

    # --- role changes -------------------------------------------------------------------

    def on_role_change(self, partition: int, leader_epoch: int | None) -> None:
        """The replica of ``partition`` here leads at ``leader_epoch`` now (None: it does
        not lead). Drops a shard of another epoch; with ``eager``, starts the new load."""
        slot = self._slots.get(partition)
        if slot is not None and slot.epoch != leader_epoch:
            self.unload(partition)
        if leader_epoch is not None and self._eager:
            try:
                self.schedule(partition)
            except NotCoordinatorError:  # the notice was older than the replica's state
                pass

    def unload(self, partition: int) -> None:
        """Drop the shard of ``partition`` (and stop its load): the next call loads again
        from the log, if this broker still leads it."""
        slot = self._slots.pop(partition, None)
        if slot is None:
            return
        if slot.task is not None and not slot.task.done():
            slot.task.cancel()
        if slot.shard is not None:
            log.info("unloaded %s-%d (loaded at leader epoch %d)", self.topic, partition,
                     slot.epoch)
            if self._unloaded is not None:
                self._unloaded(slot.shard)

    # --- access -------------------------------------------------------------------------

    def _leader_epoch(self, partition: int) -> int:
        try:
            return self.writer.leader_epoch(partition)
        except _NOT_LEADER as exc:
            self.unload(partition)
            raise NotCoordinatorError(
                f"this broker does not lead {self.topic}-{partition}") from exc

    def schedule(self, partition: int) -> asyncio.Task[None]:
        """The load of ``partition`` at its current epoch, started if need be (a failed
        load is tried again); NotCoordinatorError where this broker does not lead it."""
        epoch = self._leader_epoch(partition)
        slot = self._slots.get(partition)
        if slot is not None and slot.epoch != epoch:
            self.unload(partition)
            slot = None
        if slot is None:
            slot = self._slots[partition] = _Slot(epoch)
        if slot.shard is None and (slot.task is None or slot.task.done()):
            slot.task = asyncio.ensure_future(self._run_load(partition, slot))
            slot.task.add_done_callback(_retrieve_exception)
        assert slot.task is not None
        return slot.task

    async def _run_load(self, partition: int, slot: _Slot[S]) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            state = await self._load(partition, slot.epoch)
        except _NOT_LEADER as exc:
            raise NotCoordinatorError(
                f"this broker does not lead {self.topic}-{partition}") from exc
        except LeaderNotAvailableError as exc:
            raise CoordinatorNotAvailableError(f"{self.topic}-{partition}: {exc}") from exc
        if self._slots.get(partition) is not slot:
            return  # dropped while loading (a role change): never installed
        slot.shard = Shard(partition, slot.epoch, state)
        if self._loaded is not None:
            self._loaded(slot.shard)
        log.debug("loaded %s-%d at leader epoch %d in %.0f ms", self.topic, partition,
                  slot.epoch, (loop.time() - started) * 1000)

    async def shard(self, partition: int) -> Shard[S]:
        """The shard of ``partition`` at the epoch its replica leads at now (loading it
        if need be)."""
        slot = self._slots.get(partition)
        if slot is not None and slot.shard is not None and \
                slot.epoch == self._leader_epoch(partition):
            return slot.shard
        for _ in range(MAX_LOAD_ROUNDS):
            task = self.schedule(partition)
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # we were cancelled, not the load
            slot = self._slots.get(partition)
            if slot is not None and slot.shard is not None and \
                    slot.epoch == self._leader_epoch(partition):
                return slot.shard
        raise CoordinatorLoadInProgressError(
            f"{self.topic}-{partition} changed leadership while loading; retry")

    def loaded(self, partition: int) -> Shard[S]:
        """Synchronously: the current shard, or the error a client should see (a load
        is started for the next call)."""
        epoch = self._leader_epoch(partition)
        slot = self._slots.get(partition)
        if slot is not None and slot.epoch == epoch and slot.shard is not None:
            return slot.shard
        self.schedule(partition)
        raise CoordinatorLoadInProgressError(f"loading {self.topic}-{partition}")

    def current(self, partition: int) -> Shard[S] | None:
        """The shard of ``partition`` if it is loaded at the epoch led now, else None."""
        slot = self._slots.get(partition)
        if slot is None or slot.shard is None:
            return None
        try:
            epoch = self.writer.leader_epoch(partition)
        except _NOT_LEADER:
            return None
        return slot.shard if slot.epoch == epoch else None

    def shards(self) -> list[Shard[S]]:
        """Every shard loaded at the epoch its partition is led at now."""
        return [s for p in sorted(self._slots) if (s := self.current(p)) is not None]

    def is_loading(self, partition: int) -> bool:
        slot = self._slots.get(partition)
        return slot is not None and slot.shard is None and slot.task is not None \
            and not slot.task.done()

    async def load_all(self, partitions: range) -> list[int]:
        """Load every one of ``partitions`` led here; those that loaded."""
        tasks = []
        for p in partitions:
            try:
                tasks.append(self.schedule(p))
            except NotCoordinatorError:
                continue
        await asyncio.gather(*tasks, return_exceptions=True)
        return [s.partition for s in self.shards() if s.partition in partitions]

    # --- writes -------------------------------------------------------------------------

    async def append(self, partition: int, epoch: int, batch: bytes, *, acks: int,
                     timeout_ms: int) -> int:
        """Append ``batch`` decided on the shard loaded at ``epoch``: refused by the log
        when ``partition`` is led at another epoch by now (the shard is dropped, if it
        is still there: NotCoordinatorError)."""
        try:
            return await self.writer.append(partition, batch, acks=acks,
                                            timeout_ms=timeout_ms, leader_epoch=epoch)
        except _NOT_LEADER as exc:
            slot = self._slots.get(partition)
            if slot is not None and slot.epoch == epoch:
                self.unload(partition)
            raise NotCoordinatorError(
                f"this broker no longer leads {self.topic}-{partition} at leader "
                f"epoch {epoch}") from exc


def _retrieve_exception(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
