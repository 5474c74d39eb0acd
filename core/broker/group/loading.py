"""``__consumer_offsets`` for the coordinator runtime: the partition writer over the
group backend, and the load of one partition's groups.

Loading reads the partition from the log start through the backend and applies the
records in order (``records.PartitionLoader``); the runtime
(``core.broker.coordination.runtime``) decides when (this broker's replica became leader
at a new epoch, or first use) and drops the groups when the replica resigns.

Event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from core.broker.group.backend import GroupBackend
from core.broker.group.group import Group
from core.broker.group.records import PartitionLoader
from core.broker.types import OFFSETS_TOPIC
from core.clock import Clock
from core.storage.records import Record

log = logging.getLogger(__name__)


class OffsetsWriter:
    """``__consumer_offsets`` as a ``coordination.runtime.PartitionWriter``: appends
    with acks=all (the backend's commit timeout), fenced by the leader epoch."""

    topic = OFFSETS_TOPIC

    def __init__(self, backend: GroupBackend) -> None:
        self._backend = backend

    def leader_epoch(self, partition: int) -> int:
        return self._backend.offsets_leader_epoch(partition)

    async def append(self, partition: int, batch: bytes, *, acks: int, timeout_ms: int,
                     leader_epoch: int | None = None) -> int:
        return await self._backend.append_offsets(partition, batch, leader_epoch=leader_epoch)

    def read(self, partition: int) -> AsyncIterator[Record]:
        return self._backend.read_offsets(partition)


async def load_groups(backend: GroupBackend, clock: Clock, partition: int,
                      epoch: int) -> dict[str, Group]:
    """The groups of ``__consumer_offsets``-``partition`` as its log leaves them, each
    tied to leader ``epoch`` (its writes are refused under another)."""
    started = asyncio.get_running_loop().time()
    loader = PartitionLoader(partition)
    async for record in backend.read_offsets(partition):
        loader.apply(record)
    groups = loader.groups(clock.now_ms())
    for group in groups.values():
        group.loaded_epoch = epoch
    # an empty partition (most of them, on a new broker) is not worth an INFO line each
    log.log(logging.INFO if groups or loader.skipped else logging.DEBUG,
            "loaded %s-%d at leader epoch %d: %d groups in %.0f ms (%d records skipped)",
            OFFSETS_TOPIC, partition, epoch, len(groups),
             (asyncio.get_running_loop().time() - started) * 1000, loader.skipped)
    return groups
